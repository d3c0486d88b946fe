import { create, type JsonObject } from "@bufbuild/protobuf";
import type { ExecutionEvent, ExecutionRequest } from "@trellis/adapter-sdk";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { textOf } from "@trellis/messages";
import { TrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { GraphDefinitionError, parseGraph, runGraph } from "../src/scripted/graph.js";
import { chunkText, createScriptedAdapter } from "../src/scripted/scripted-adapter.js";

const streamed: JsonObject = {
  entry: "think",
  nodes: {
    think: { update: { messages: [], delay_ms: 15 } },
    reply: {
      update: {
        messages: [
          { role: "assistant", content: "Hello {{input}}, streamed." },
          { role: "tool", tool_call_id: "c1", content: "not streamed" },
          { role: "assistant", content: "Bye." },
        ],
        stream: { chunk_chars: 5, delay_ms: 10 },
      },
    },
  },
  edges: [{ from: "think", to: "reply" }],
};

function request(definition: JsonObject, signal: AbortSignal, events: ExecutionEvent[] = []) {
  const req: ExecutionRequest = {
    taskId: "task_1",
    sessionId: "ses_1",
    workspaceId: "default",
    agent: { id: "agent_1", backend: "scripted", definition, tools: [] },
    history: [],
    input: create(MessageSchema, {
      role: Role.USER,
      parts: [{ kind: { case: "text", value: { text: "Ada" } } }],
    }),
    signal,
    onEvent: (event) => events.push(event),
  };
  return req;
}

/** The events as short strings: `Δtext` for deltas, `M:<text>` for messages. */
function trace(events: ExecutionEvent[]): string[] {
  return events.flatMap((e) =>
    e.kind === "text_delta"
      ? [`Δ${e.text}`]
      : e.kind === "message"
        ? [`M:${textOf(e.message)}`]
        : [],
  );
}

describe("scripted graph stream option", () => {
  it("accepts a stream option and fills in defaults in the run's steps", () => {
    const graph = parseGraph({
      entry: "a",
      nodes: {
        a: { update: { messages: [{ role: "assistant", content: "x" }], stream: {} } },
        b: { update: { messages: [{ role: "assistant", content: "y" }], delay_ms: 3 } },
      },
      edges: [{ from: "a", to: "b" }],
    });
    const result = runGraph(graph, { kind: "start" }, { input: "" });
    expect(result).toEqual({
      status: "completed",
      messages: [
        { role: "assistant", content: "x" },
        { role: "assistant", content: "y" },
      ],
      delayMs: 3,
      steps: [
        {
          node: "a",
          delayMs: 0,
          messages: [{ role: "assistant", content: "x" }],
          stream: { chunkChars: 4, delayMs: 20 },
        },
        { node: "b", delayMs: 3, messages: [{ role: "assistant", content: "y" }] },
      ],
    });
  });

  it("leaves results of graphs that do not stream unchanged (no steps)", () => {
    const plain = runGraph(
      parseGraph({ entry: "a", nodes: { a: { update: { messages: [], delay_ms: 5 } } } }),
      { kind: "start" },
      { input: "" },
    );
    expect(plain).toEqual({ status: "completed", messages: [], delayMs: 5 });
  });

  it("rejects a malformed stream option, naming the field", () => {
    const cases: [unknown, string][] = [
      [true, "nodes.a.update.stream"],
      [[], "nodes.a.update.stream"],
      [{ chunk_chars: 0 }, "nodes.a.update.stream.chunk_chars"],
      [{ chunk_chars: 2.5 }, "nodes.a.update.stream.chunk_chars"],
      [{ chunk_chars: "4" }, "nodes.a.update.stream.chunk_chars"],
      [{ chunk_chars: 10_001 }, "nodes.a.update.stream.chunk_chars"],
      [{ delay_ms: -1 }, "nodes.a.update.stream.delay_ms"],
      [{ delay_ms: 60_001 }, "nodes.a.update.stream.delay_ms"],
      [{ delay_ms: Number.NaN }, "nodes.a.update.stream.delay_ms"],
      [{ chunk_size: 4 }, "nodes.a.update.stream.chunk_size"],
    ];
    for (const [stream, path] of cases) {
      let thrown: unknown;
      try {
        parseGraph({ entry: "a", nodes: { a: { update: { messages: [], stream } } } });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(stream)).toBeInstanceOf(GraphDefinitionError);
      expect((thrown as GraphDefinitionError).path).toBe(path);
    }
  });

  it("refuses a bad stream option when the agent is defined, as agent_definition_invalid", () => {
    const adapter = createScriptedAdapter();
    let thrown: unknown;
    try {
      adapter.validateDefinition?.({
        entry: "a",
        nodes: { a: { update: { messages: [], stream: { chunk_chars: -3 } } } },
      });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TrellisError);
    expect(thrown).toMatchObject({
      reason: "agent_definition_invalid",
      param: "agent.definition.nodes.a.update.stream.chunk_chars",
    });
    expect((thrown as Error).message).toContain("chunk_chars must be a whole number");
  });

  it("cuts text into code points, never inside a surrogate pair", () => {
    expect(chunkText("abcdefghij", 4)).toEqual(["abcd", "efgh", "ij"]);
    expect(chunkText("a😀b😀c", 2)).toEqual(["a😀", "b😀", "c"]);
    expect(chunkText("", 4)).toEqual([]);
  });
});

describe("scripted adapter streaming", () => {
  it("streams each assistant message as text deltas before the message, pausing between chunks", async () => {
    const events: ExecutionEvent[] = [];
    const adapter = createScriptedAdapter();
    const started = performance.now();
    const result = await adapter.execute(request(streamed, new AbortController().signal, events));
    const elapsed = performance.now() - started;
    expect(result.status).toBe("completed");
    expect(result.messages.map(textOf)).toEqual(["Hello Ada, streamed.", "not streamed", "Bye."]);
    expect(trace(events)).toEqual([
      "ΔHello",
      "Δ Ada,",
      "Δ stre",
      "Δamed.",
      "M:Hello Ada, streamed.",
      "M:not streamed",
      "ΔBye.",
      "M:Bye.",
    ]);
    // 15 ms step delay + 3 pauses of 10 ms inside the first message.
    expect(elapsed).toBeGreaterThanOrEqual(40);
  });

  it("streams the messages before a suspension too", async () => {
    const events: ExecutionEvent[] = [];
    const definition = {
      entry: "ask",
      nodes: {
        ask: {
          update: {
            messages: [{ role: "assistant", content: "May I?" }],
            stream: { chunk_chars: 3, delay_ms: 0 },
          },
        },
        gate: { suspend: { signal_id: "approval", metadata: { kind: "approval" } } },
      },
      edges: [{ from: "ask", to: "gate" }],
    };
    const result = await createScriptedAdapter().execute(
      request(definition, new AbortController().signal, events),
    );
    expect(result.status).toBe("suspended");
    expect(trace(events)).toEqual(["ΔMay", "Δ I?", "M:May I?"]);
  });

  it("stops streaming and reports cancelled when aborted mid-message", async () => {
    const events: ExecutionEvent[] = [];
    const definition = {
      entry: "a",
      nodes: {
        a: {
          update: {
            messages: [{ role: "assistant", content: "x".repeat(100) }],
            stream: { chunk_chars: 1, delay_ms: 10 },
          },
        },
      },
    };
    const abort = new AbortController();
    const started = performance.now();
    const pending = createScriptedAdapter().execute(request(definition, abort.signal, events));
    setTimeout(() => abort.abort(), 45);
    const result = await pending;
    expect(performance.now() - started).toBeLessThan(500);
    expect(result).toMatchObject({ status: "cancelled", messages: [] });
    const deltas = events.filter((e) => e.kind === "text_delta");
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.length).toBeLessThan(100);
    expect(events.some((e) => e.kind === "message")).toBe(false);
  });
});
