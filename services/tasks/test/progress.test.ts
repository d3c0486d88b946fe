/**
 * A running turn's progress (token deltas, tool calls, usage, routing) lands in
 * the task's event stream, batched, in order, before the task's outcome; a
 * turn that reports only messages writes nothing extra.
 */
import { create } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@trellis/contracts/core";
import {
  createLocalExecutor,
  createScriptedAdapter,
  type ExecutionAdapter,
  type ExecutionEvent,
} from "@trellis/execution";
import { createLogger } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProgressRecorder, progressItem } from "../src/worker/progress.js";
import { createAgent, text, watchUntil } from "./support/fixtures.js";
import { embeddedTarget, type TasksHarness } from "./support/harness.js";

const chatty: ExecutionAdapter = {
  backendId: "chatty",
  async execute(request) {
    const emit = (event: ExecutionEvent) => request.onEvent?.(event);
    for (const piece of ["Hel", "lo", " there"]) emit({ kind: "text_delta", text: piece });
    emit({ kind: "tool_started", toolCallId: "call_1", name: "lookup", input: { q: "x" } });
    emit({ kind: "tool_finished", toolCallId: "call_1", name: "lookup", status: "ok" });
    emit({ kind: "tool_started", toolCallId: "call_2", name: "lookup" });
    emit({ kind: "tool_finished", toolCallId: "call_2", name: "lookup", status: "timeout" });
    emit({ kind: "step_finished", iteration: 1, usage: { inputTokens: 12, outputTokens: 5 } });
    const reply = create(MessageSchema, {
      role: Role.ASSISTANT,
      parts: [{ kind: { case: "text", value: { text: "Hello there" } } }],
    });
    emit({ kind: "message", message: reply });
    return { status: "completed", messages: [reply] };
  },
};

describe("turn progress in the event log", () => {
  let h: TasksHarness;

  beforeAll(async () => {
    h = await embeddedTarget().start({
      executor: createLocalExecutor([createScriptedAdapter(), chatty]),
    });
  });

  afterAll(async () => {
    await h?.close();
  });

  async function eventsOf(taskId: string) {
    const { events } = await h.events.listEvents({ taskId, limit: 1000 });
    return events;
  }

  it("records deltas (merged), tool calls by id, usage — all before the completion", async () => {
    const agentId = await createAgent(h, "chatty", "chatty", {});
    const { session } = await h.sessions.createSession({ agentId });
    const { task } = await h.tasks.submitTask({
      sessionId: session?.id as string,
      input: text("hi"),
    });
    await watchUntil(h, task?.id as string);
    const events = await eventsOf(task?.id as string);
    const kinds = events.map((e) => e.kind);
    const progress = events.filter(
      (e) =>
        (e.kind.startsWith("agent.") && e.kind !== "agent.message") || e.kind.startsWith("tool."),
    );
    const data = progress.map((e) => ({
      kind: e.kind,
      ...(e.payload?.kind.case === "data" ? e.payload.kind.value : {}),
    }));
    expect(data).toEqual([
      { kind: "agent.text_delta", text: "Hello there" },
      { kind: "agent.tool_use", tool_call_id: "call_1", name: "lookup", input: { q: "x" } },
      { kind: "tool.completed", tool_call_id: "call_1", name: "lookup", status: "ok" },
      { kind: "agent.tool_use", tool_call_id: "call_2", name: "lookup" },
      { kind: "tool.failed", tool_call_id: "call_2", name: "lookup", status: "timeout" },
      { kind: "agent.model_call", step: 1, input_tokens: 12, output_tokens: 5 },
    ]);
    const completedAt = kinds.lastIndexOf("task.completed");
    expect(completedAt).toBeGreaterThan(kinds.indexOf("agent.model_call"));
    // Sequences stay gap-free on the task's stream.
    const sequences = events.map((e) => Number(e.sequence));
    expect(sequences).toEqual(sequences.map((_, i) => (sequences[0] ?? 0) + i));
  });

  it("writes nothing extra for a turn that reports only messages", async () => {
    const { session } = await h.sessions.createSession({ agentId: "agent_echo" });
    const { task } = await h.tasks.submitTask({
      sessionId: session?.id as string,
      input: text("echo me"),
    });
    await watchUntil(h, task?.id as string);
    const kinds = (await eventsOf(task?.id as string)).map((e) => e.kind);
    expect(kinds.filter((k) => k.startsWith("agent.") && k !== "agent.message")).toEqual([]);
  });
});

describe("ProgressRecorder", () => {
  const logger = createLogger({ service: "test", level: "error" });

  it("writes batches in order, flushes at most every flushMs, and everything on close", async () => {
    const batches: string[][] = [];
    const recorder = new ProgressRecorder(
      async (items) => {
        batches.push(items.map((i) => `${i.kind}:${JSON.stringify(i.data)}`));
      },
      { flushMs: 20, logger },
    );
    recorder.add({ kind: "text_delta", text: "a" });
    recorder.add({ kind: "text_delta", text: "b" });
    await new Promise((r) => setTimeout(r, 60));
    recorder.add({ kind: "thinking_delta", text: "hmm" });
    recorder.add({ kind: "text_delta", text: "c" });
    await recorder.close();
    expect(batches).toEqual([
      ['agent.text_delta:{"text":"ab"}'],
      ['agent.thinking_delta:{"text":"hmm"}', 'agent.text_delta:{"text":"c"}'],
    ]);
  });

  it("survives a failed write (progress is dropped, the turn goes on)", async () => {
    const recorder = new ProgressRecorder(
      async () => {
        throw new Error("database down");
      },
      { flushMs: 5, logger },
    );
    recorder.add({ kind: "text_delta", text: "a" });
    await expect(recorder.close()).resolves.toBeUndefined();
  });

  it("records routing with its reasons and skips what the transcript already holds", () => {
    expect(
      progressItem({
        kind: "routed",
        backendId: "harness",
        workerId: "w1",
        attempt: 1,
        degraded: true,
        reasons: [{ code: "streaming_unsupported", message: "no streaming", severity: "warning" }],
      }),
    ).toEqual({
      kind: "agent.routed",
      data: {
        backend_id: "harness",
        worker_id: "w1",
        attempt: 1,
        degraded: true,
        reasons: [{ code: "streaming_unsupported", message: "no streaming", severity: "warning" }],
      },
    });
    expect(
      progressItem({ kind: "tool_call_delta", toolCallId: "c", argsDelta: "{" }),
    ).toBeUndefined();
  });

  it("names the model of a step from the harness's llm: record of the message before it", async () => {
    const items: { kind: string; data: unknown }[] = [];
    const recorder = new ProgressRecorder(
      async (batch) => {
        items.push(...batch);
      },
      { flushMs: 5, logger },
    );
    const answer = create(MessageSchema, {
      role: Role.ASSISTANT,
      parts: [{ kind: { case: "text", value: { text: "It is sunny." } } }],
      metadata: {
        "llm:main:2": {
          kind: "llm_provider_response",
          call_id: "main:2",
          provider: "openai",
          model: "gpt-4o-mini-2024-07-18",
          usage: { prompt_tokens: 120, completion_tokens: 9, total_tokens: 129, cached_tokens: 64 },
          response: {},
        },
      },
    });
    recorder.add({ kind: "message", message: answer });
    recorder.add({
      kind: "step_finished",
      iteration: 2,
      usage: { inputTokens: 120, outputTokens: 9 },
    });
    // A later step of a backend that keeps no record is not given the earlier model.
    recorder.add({
      kind: "step_finished",
      iteration: 3,
      usage: { inputTokens: 1, outputTokens: 1 },
    });
    await recorder.close();
    expect(items).toEqual([
      {
        kind: "agent.model_call",
        data: {
          step: 2,
          call_id: "main:2",
          provider: "openai",
          model: "gpt-4o-mini-2024-07-18",
          cached_tokens: 64,
          input_tokens: 120,
          output_tokens: 9,
        },
      },
      { kind: "agent.model_call", data: { step: 3, input_tokens: 1, output_tokens: 1 } },
    ]);
  });
});
