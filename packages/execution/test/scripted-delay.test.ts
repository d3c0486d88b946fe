import { create } from "@bufbuild/protobuf";
import type { ExecutionRequest } from "@trellis/adapter-sdk";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import { GraphDefinitionError, parseGraph, runGraph } from "../src/scripted/graph.js";
import { createScriptedAdapter } from "../src/scripted/scripted-adapter.js";

const slow = {
  entry: "think",
  nodes: {
    think: { update: { messages: [], delay_ms: 40 } },
    reply: { update: { messages: [{ role: "assistant", content: "{{input}}" }], delay_ms: 20 } },
  },
  edges: [{ from: "think", to: "reply" }],
};

function request(signal: AbortSignal): ExecutionRequest {
  return {
    taskId: "task_1",
    sessionId: "ses_1",
    workspaceId: "default",
    agent: { id: "agent_1", backend: "scripted", definition: slow, tools: [] },
    history: [],
    input: create(MessageSchema, {
      role: Role.USER,
      parts: [{ kind: { case: "text", value: { text: "hi" } } }],
    }),
    signal,
  };
}

describe("scripted graph delay_ms", () => {
  it("adds the delays of the visited update nodes up, and only then reports them", () => {
    const result = runGraph(parseGraph(slow), { kind: "start" }, { input: "x" });
    expect(result).toMatchObject({ status: "completed", delayMs: 60 });
    const plain = runGraph(
      parseGraph({ entry: "a", nodes: { a: { update: { messages: [] } } } }),
      { kind: "start" },
      { input: "" },
    );
    expect(plain).toEqual({ status: "completed", messages: [] });
  });

  it("rejects a delay that is not a sane number of milliseconds", () => {
    for (const delay of [-1, "10", Number.POSITIVE_INFINITY, 3_600_001]) {
      expect(() =>
        parseGraph({ entry: "a", nodes: { a: { update: { messages: [], delay_ms: delay } } } }),
      ).toThrow(GraphDefinitionError);
    }
  });

  it("waits delay_ms before completing", async () => {
    const adapter = createScriptedAdapter();
    const started = performance.now();
    const result = await adapter.execute(request(new AbortController().signal));
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
    expect(result.status).toBe("completed");
  });

  it("stops waiting and reports cancelled when aborted", async () => {
    const adapter = createScriptedAdapter();
    const abort = new AbortController();
    const started = performance.now();
    const pending = adapter.execute(request(abort.signal));
    setTimeout(() => abort.abort(), 10);
    const result = await pending;
    expect(performance.now() - started).toBeLessThan(50);
    expect(result).toMatchObject({ status: "cancelled", messages: [], backendId: "scripted" });
  });
});
