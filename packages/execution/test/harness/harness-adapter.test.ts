/**
 * The built-in harness's tool loop, run through the real SDK clients against
 * recorded OpenAI and Anthropic responses: tool calls → tools → final answer,
 * recording for replay, budgets, bad tool calls, approval-gated tools
 * (exactly once, however often a checkpoint is resumed) and failures.
 */
import { create, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Message, MessageSchema, PartSchema, Role } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  createHarnessAdapter,
  type ExecutionAdapter,
  type ExecutionResult,
  HARNESS_BACKEND,
  textSha256,
} from "../../src/index.js";
import { createTools, recordedProviders, turnRequest } from "../../src/testing/harness-agents.js";
import { ANTHROPIC_MESSAGES, fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import {
  completed,
  definitionRefusal,
  offlineHarness,
  record,
  shape,
  suspended,
  useRecordedHarness,
} from "./support/fixture.js";

const { server, harness } = useRecordedHarness();

const openaiAgent = (extra: JsonObject = {}): JsonObject => ({
  provider: "openai",
  model: "gpt-4o-mini",
  system: "You are a helpful assistant.",
  tools: ["get_weather", "send_email"],
  stream: false,
  ...extra,
});

const anthropicAgent = (extra: JsonObject = {}): JsonObject => ({
  provider: "anthropic",
  model: "claude-sonnet-5-5",
  system: "You are a helpful assistant.",
  tools: ["get_weather"],
  max_output_tokens: 1024,
  ...extra,
});

describe("harness tool loop over OpenAI (recorded)", () => {
  it("runs assistant(tool_calls) → tool → assistant(final), recording responses and usage", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const { adapter, runs } = harness();
    const { request, events } = turnRequest(openaiAgent(), "What's the weather in Paris?");
    const result = completed(await adapter.execute(request));

    expect(shape(result.messages)).toEqual([
      { role: "ASSISTANT", text: "", toolCalls: ["get_weather"], toolCallId: "" },
      {
        role: "TOOL",
        text: '{"city":"Paris","temperature_c":18,"sky":"sunny"}',
        toolCalls: [],
        toolCallId: "call_Wx7pQ2hZk1LmN3oP4qR5sT6u",
      },
      {
        role: "ASSISTANT",
        text: "It's 18°C and sunny in Paris right now.",
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(runs.get_weather).toEqual([{ city: "Paris" }]);

    // Replay records: llm:<call_id> on assistant messages, tool:<tool call id> on tool messages.
    const first = record(result.messages[0], "llm:main:1");
    expect(first).toMatchObject({
      kind: "llm_provider_response",
      call_id: "main:1",
      provider: "openai",
      model: "gpt-4o-mini-2024-07-18",
      finish_reason: "tool_calls",
      usage: { prompt_tokens: 82, completion_tokens: 17, total_tokens: 99, cached_tokens: 0 },
      response: { id: "chatcmpl-CW1a2b3c4d5e6f7g8h9i0jKlMnOpQ", object: "chat.completion" },
    });
    expect(record(result.messages[2], "llm:main:2")).toMatchObject({
      usage: { prompt_tokens: 121, completion_tokens: 13, total_tokens: 134 },
    });
    expect(record(result.messages[1], "tool:call_Wx7pQ2hZk1LmN3oP4qR5sT6u")).toEqual({
      kind: "tool_result",
      tool_call_id: "call_Wx7pQ2hZk1LmN3oP4qR5sT6u",
      name: "get_weather",
      status: "ok",
      output: '{"city":"Paris","temperature_c":18,"sky":"sunny"}',
      output_sha256: textSha256('{"city":"Paris","temperature_c":18,"sky":"sunny"}'),
    });

    // The second call carried the whole loop: system, user, assistant tool call, tool result.
    const second = server.requests[1]?.body as { messages: { role: string }[] };
    expect(second.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(events.map((e) => e.kind)).toEqual([
      "message",
      "step_finished",
      "tool_started",
      "tool_finished",
      "message",
      "message",
      "step_finished",
    ]);
    expect(events[1]).toEqual({
      kind: "step_finished",
      iteration: 1,
      usage: { inputTokens: 82, outputTokens: 17 },
    });
    expect(events[2]).toEqual({
      kind: "tool_started",
      toolCallId: "call_Wx7pQ2hZk1LmN3oP4qR5sT6u",
      name: "get_weather",
      input: { city: "Paris" },
    });
    // The result carries the turn's usage and the BYOH trace summary.
    expect(result).toMatchObject({
      backendId: "harness",
      usage: { inputTokens: 82 + 121, outputTokens: 17 + 13 },
      trace: { stepCount: 2, toolCallCount: 1, degraded: false },
    });
    expect(events[3]).toEqual({
      kind: "tool_finished",
      toolCallId: "call_Wx7pQ2hZk1LmN3oP4qR5sT6u",
      name: "get_weather",
      status: "ok",
    });
  });

  it("streams: text deltas become text_delta events before the final message", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.stream.http"),
      fixture("openai/chat-weather-final.stream.http"),
    );
    const { adapter, runs } = harness();
    const { request, events } = turnRequest(openaiAgent({ stream: true }), "Weather in Paris?");
    const result = completed(await adapter.execute(request));
    expect(result.messages.map((m) => Role[m.role])).toEqual(["ASSISTANT", "TOOL", "ASSISTANT"]);
    expect(runs.get_weather).toEqual([{ city: "Paris" }]);
    expect(events.map((e) => (e.kind === "text_delta" ? `Δ${e.text}` : e.kind))).toEqual([
      "message",
      "step_finished",
      "tool_started",
      "tool_finished",
      "message",
      "ΔIt's",
      "Δ 18°C",
      "Δ and sunny",
      "Δ in Paris.",
      "message",
      "step_finished",
    ]);
    expect(record(result.messages[2], "llm:main:2")).toMatchObject({
      streamed: true,
      usage: { total_tokens: 132 },
      response: { choices: [{ message: { content: "It's 18°C and sunny in Paris." } }] },
    });
  });

  it("answers a call whose input fails the tool's schema with an error result; the tool never runs", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-bad-arguments.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const { adapter, runs } = harness();
    const { request, events } = turnRequest(openaiAgent(), "Weather?");
    const result = completed(await adapter.execute(request));
    expect(runs.get_weather).toEqual([]);
    const tool = result.messages[1];
    expect(shape([tool as Message])[0]?.text).toMatch(/^Error: the call was not run\./);
    expect(record(tool, "tool:call_BaDaRgS1x2y3z4A5b6C7d8E9")).toMatchObject({
      status: "rejected",
      problems: expect.arrayContaining([
        { path: "", message: "must have required property 'city'" },
      ]) as unknown as JsonValue,
    });
    expect(events.filter((e) => e.kind === "tool_finished")).toEqual([
      {
        kind: "tool_finished",
        toolCallId: "call_BaDaRgS1x2y3z4A5b6C7d8E9",
        name: "get_weather",
        status: "error",
      },
    ]);
  });

  it("turns a tool result holding a NUL into the tool's error (issue 22), never poison output", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const { tools } = createTools();
    const poisoned = tools.map((tool) =>
      tool.name === "get_weather" ? { ...tool, run: () => "18\u0000C and sunny" } : tool,
    );
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: poisoned,
    });
    const { request, events } = turnRequest(openaiAgent(), "Weather?");
    const result = completed(await adapter.execute(request));
    const tool = result.messages[1] as Message;
    expect(shape([tool])[0]?.text).toBe(
      "Error: get_weather returned a NUL character (U+0000), which cannot be recorded",
    );
    expect(JSON.stringify(toJson(MessageSchema, tool))).not.toContain("\\u0000");
    expect(events.find((e) => e.kind === "tool_finished")).toMatchObject({ status: "error" });
  });

  it("fails with budget_exceeded when the step budget runs out before a final answer", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-tool-call.http"));
    const { adapter, runs } = harness();
    const { request } = turnRequest(openaiAgent({ budgets: { max_steps: 1 } }), "Weather?");
    const result = await adapter.execute(request);
    expect(result).toMatchObject({
      status: "failed",
      category: "budget_exceeded",
      retryable: false,
    });
    expect(result.messages.map((m) => Role[m.role])).toEqual(["ASSISTANT", "TOOL"]);
    expect(runs.get_weather).toHaveLength(1);
  });

  it("fails with budget_exceeded when the token budget is used up", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-tool-call.http"));
    const { adapter } = harness();
    const { request } = turnRequest(openaiAgent({ budgets: { max_total_tokens: 50 } }), "Weather?");
    const result = await adapter.execute(request);
    expect(result).toMatchObject({ status: "failed", category: "budget_exceeded" });
    expect(result.status === "failed" && result.message).toContain("99 of its 50 tokens");
  });

  it("fails the turn with the provider's category (429 → provider_rate_limit, retryable)", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/error-429.http"));
    const { adapter } = harness();
    const result = await adapter.execute(turnRequest(openaiAgent(), "Weather?").request);
    expect(result).toMatchObject({
      status: "failed",
      category: "provider_rate_limit",
      retryable: true,
      messages: [],
    });
  });

  it("is cancelled promptly when the turn is aborted while the model is answering", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-final.http", { delayMs: 3_000 }));
    const { adapter } = harness();
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error("canceled by user")), 100);
    const started = Date.now();
    const result = await adapter.execute(
      turnRequest(openaiAgent(), "Weather?", { signal: abort.signal }).request,
    );
    expect(result).toMatchObject({ status: "cancelled", messages: [] });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("is cancelled, without a model call, when the turn is already aborted", async () => {
    const { adapter } = harness();
    const abort = new AbortController();
    abort.abort();
    const result = await adapter.execute(
      turnRequest(openaiAgent(), "Weather?", { signal: abort.signal }).request,
    );
    expect(result).toMatchObject({ status: "cancelled", messages: [] });
    expect(server.requests).toEqual([]);
  });
});

describe("harness tool loop over Anthropic (recorded)", () => {
  it("runs the loop on atomic responses, with usage recorded per call", async () => {
    server.enqueue(
      ANTHROPIC_MESSAGES,
      fixture("anthropic/messages-weather-tool-use.http"),
      fixture("anthropic/messages-weather-final.http"),
    );
    const { adapter, runs } = harness();
    const { request } = turnRequest(anthropicAgent({ stream: false }), "Weather in Paris?");
    const result = completed(await adapter.execute(request));
    expect(shape(result.messages)).toEqual([
      {
        role: "ASSISTANT",
        text: "I'll look up the current weather in Paris.",
        toolCalls: ["get_weather"],
        toolCallId: "",
      },
      {
        role: "TOOL",
        text: '{"city":"Paris","temperature_c":18,"sky":"sunny"}',
        toolCalls: [],
        toolCallId: "toolu_01A09q90qw90lq917835lq9",
      },
      {
        role: "ASSISTANT",
        text: "It's 18°C and sunny in Paris right now.",
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(runs.get_weather).toEqual([{ city: "Paris" }]);
    expect(record(result.messages[0], "llm:main:1")).toMatchObject({
      provider: "anthropic",
      finish_reason: "tool_calls",
      usage: { prompt_tokens: 412, completion_tokens: 64, total_tokens: 476 },
      response: { id: "msg_01XFDUDYJgAACzvnptvVoYEL", stop_reason: "tool_use" },
    });
    expect(record(result.messages[2], "llm:main:2")).toMatchObject({
      usage: { prompt_tokens: 501, completion_tokens: 15, total_tokens: 516 },
    });
    // The tool result went back as a user turn of tool_result blocks.
    const second = server.requests[1]?.body as { messages: { role: string; content: unknown }[] };
    expect(second.messages.at(-1)).toEqual({
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "toolu_01A09q90qw90lq917835lq9",
          content: '{"city":"Paris","temperature_c":18,"sky":"sunny"}',
        },
      ],
    });
  });

  it("streams: text and thinking deltas become events; the thinking block stays on the message", async () => {
    server.enqueue(
      ANTHROPIC_MESSAGES,
      fixture("anthropic/messages-weather-tool-use.stream.http"),
      fixture("anthropic/messages-weather-final.stream.http"),
    );
    const { adapter } = harness();
    const { request, events } = turnRequest(anthropicAgent(), "Weather in Paris?");
    const result = completed(await adapter.execute(request));
    expect(result.messages.map((m) => Role[m.role])).toEqual(["ASSISTANT", "TOOL", "ASSISTANT"]);
    expect(
      events.map((e) =>
        e.kind === "text_delta"
          ? `T:${e.text}`
          : e.kind === "thinking_delta"
            ? `R:${e.text}`
            : e.kind,
      ),
    ).toEqual([
      "T:I'll look up",
      "T: the weather in Paris.",
      "message",
      "step_finished",
      "tool_started",
      "tool_finished",
      "message",
      "R:The tool says 18°C and sunny.",
      "R: Answer briefly.",
      "T:It's 18°C",
      "T: and sunny in Paris.",
      "message",
      "step_finished",
    ]);
    expect(result.messages[2]?.parts.map((p) => p.kind.case)).toEqual(["thinking", "text"]);
    expect(record(result.messages[2], "llm:main:2")).toMatchObject({
      usage: { prompt_tokens: 498, completion_tokens: 38, total_tokens: 536 },
    });
  });
});

describe("harness approval-gated tools", () => {
  async function suspendOnEmail(adapter: ExecutionAdapter, taskId: string) {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-tool-call.http"));
    const { request } = turnRequest(openaiAgent(), "Email Bob about lunch", { taskId });
    return suspended(await adapter.execute(request));
  }

  it("suspends before the tool runs, describing the pending call", async () => {
    const { adapter, runs } = harness();
    const result = await suspendOnEmail(adapter, "task_approval_describe");
    expect(runs.send_email).toEqual([]);
    expect(result.kind).toBe("input");
    expect(result.signalLabel).toBe("approval:call_Em4iL5sEnD6bOb7x8Y9z0AbC");
    expect(result.metadata).toMatchObject({
      kind: "tool_approval",
      tool_call_id: "call_Em4iL5sEnD6bOb7x8Y9z0AbC",
      tool_name: "send_email",
      arguments: { to: "bob@example.com", subject: "Lunch", body: "Are you free at noon?" },
      call_id: "main:1",
    });
    // The assistant's tool call is the pending message (it goes to the transcript now).
    expect(shape(result.messages)).toEqual([
      {
        role: "ASSISTANT",
        text: "I'll send Bob the email.",
        toolCalls: ["send_email"],
        toolCallId: "",
      },
    ]);
  });

  it("runs the approved call exactly once, even when the same checkpoint is resumed twice", async () => {
    const { adapter, runs } = harness();
    const taskId = "task_approval_twice";
    const waiting = await suspendOnEmail(adapter, taskId);
    const resume = { checkpoint: waiting.checkpoint, payload: { approved: true } };

    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-sent.http"));
    const once = turnRequest(openaiAgent(), "Email Bob about lunch", { taskId, resume });
    const first = completed(await adapter.execute(once.request));
    expect(runs.send_email).toEqual([
      { to: "bob@example.com", subject: "Lunch", body: "Are you free at noon?" },
    ]);
    expect(shape(first.messages)).toEqual([
      {
        role: "TOOL",
        text: "sent to bob@example.com",
        toolCalls: [],
        toolCallId: "call_Em4iL5sEnD6bOb7x8Y9z0AbC",
      },
      {
        role: "ASSISTANT",
        text: "Done: the email to Bob is on its way.",
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(record(first.messages[0], "tool:call_Em4iL5sEnD6bOb7x8Y9z0AbC")).toMatchObject({
      status: "ok",
      approval: { approved: true },
    });
    // The resumed call continues the numbering across the suspension.
    expect(record(first.messages[1], "llm:main:2")).toMatchObject({ call_id: "main:2" });
    // The model saw the turn so far: the assistant's call and the tool's result.
    const body = server.requests.at(-1)?.body as { messages: { role: string }[] };
    expect(body.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(once.events.map((e) => e.kind)).toEqual([
      "tool_started",
      "tool_finished",
      "message",
      "message",
      "step_finished",
    ]);
    expect(first).toMatchObject({ usage: { inputTokens: 203, outputTokens: 12 } });

    // The same checkpoint again (a redelivered resume): the recorded result, no second send.
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-sent.http"));
    const again = turnRequest(openaiAgent(), "Email Bob about lunch", { taskId, resume });
    const second = completed(await adapter.execute(again.request));
    expect(runs.send_email).toHaveLength(1);
    expect(shape(second.messages)).toEqual(shape(first.messages));
    expect(record(second.messages[0], "tool:call_Em4iL5sEnD6bOb7x8Y9z0AbC")).toMatchObject({
      status: "ok",
      recorded: true,
    });
    expect(again.events.map((e) => e.kind)).not.toContain("tool_started");
  });

  it("runs the approved call once when two resumes of one checkpoint race", async () => {
    const { adapter, runs } = harness({ emailDelayMs: 150 });
    const taskId = "task_approval_race";
    const waiting = await suspendOnEmail(adapter, taskId);
    const resume = { checkpoint: waiting.checkpoint, payload: { approved: true } };
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-email-sent.http"),
      fixture("openai/chat-email-sent.http"),
    );
    const [a, b] = await Promise.all([
      adapter.execute(turnRequest(openaiAgent(), "x", { taskId, resume }).request),
      adapter.execute(turnRequest(openaiAgent(), "x", { taskId, resume }).request),
    ]);
    expect(runs.send_email).toHaveLength(1);
    expect(completed(a as ExecutionResult).messages[0]?.parts).toEqual(
      completed(b as ExecutionResult).messages[0]?.parts,
    );
  });

  it("feeds a denial back to the model instead of running the tool", async () => {
    const { adapter, runs } = harness();
    const taskId = "task_approval_denied";
    const waiting = await suspendOnEmail(adapter, taskId);
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-declined.http"));
    const { request, events } = turnRequest(openaiAgent(), "Email Bob about lunch", {
      taskId,
      resume: { checkpoint: waiting.checkpoint, payload: { approved: false, reason: "not today" } },
    });
    const result = completed(await adapter.execute(request));
    expect(runs.send_email).toEqual([]);
    expect(shape(result.messages)).toEqual([
      {
        role: "TOOL",
        text: "The user denied this call to send_email: not today.",
        toolCalls: [],
        toolCallId: "call_Em4iL5sEnD6bOb7x8Y9z0AbC",
      },
      {
        role: "ASSISTANT",
        text: "Understood, I did not send the email.",
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(events[0]).toEqual({
      kind: "tool_finished",
      toolCallId: "call_Em4iL5sEnD6bOb7x8Y9z0AbC",
      name: "send_email",
      status: "denied",
    });
    const sent = server.requests.at(-1)?.body as { messages: { role: string; content: unknown }[] };
    expect(sent.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "call_Em4iL5sEnD6bOb7x8Y9z0AbC",
      content: "The user denied this call to send_email: not today.",
    });
  });

  it("fails a resume whose payload is not an approval, without running the tool", async () => {
    const { adapter, runs } = harness();
    const taskId = "task_approval_bad_payload";
    const waiting = await suspendOnEmail(adapter, taskId);
    const result = await adapter.execute(
      turnRequest(openaiAgent(), "x", {
        taskId,
        resume: { checkpoint: waiting.checkpoint, payload: { ok: "sure" } },
      }).request,
    );
    expect(result).toMatchObject({
      status: "failed",
      category: "suspension_resume_payload_invalid",
      retryable: false,
    });
    expect(runs.send_email).toEqual([]);
  });

  it("fails a resume from a checkpoint it did not make (harness_checkpoint_invalid)", async () => {
    const { adapter } = harness();
    const result = await adapter.execute(
      turnRequest(openaiAgent(), "x", {
        resume: { checkpoint: { node: "wait" }, payload: { approved: true } },
      }).request,
    );
    expect(result).toMatchObject({ status: "failed", category: "harness_checkpoint_invalid" });
  });

  it("gates a tool on approval when the caller's tool descriptors require it", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-tool-call.http"));
    const { adapter, runs } = harness();
    const { request } = turnRequest(openaiAgent(), "Weather?");
    request.toolDescriptors = [{ name: "get_weather", requiresApproval: true }];
    const result = suspended(await adapter.execute(request));
    expect(runs.get_weather).toEqual([]);
    expect(result).toMatchObject({
      reason: "approval",
      approvalRequest: { approvalKey: "approval:call_Wx7pQ2hZk1LmN3oP4qR5sT6u" },
    });
  });

  it("gates a tool on approval when the agent's definition requires it", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-tool-call.http"));
    const { adapter, runs } = harness();
    const result = suspended(
      await adapter.execute(
        turnRequest(openaiAgent({ require_approval: ["get_weather"] }), "Weather?").request,
      ),
    );
    expect(runs.get_weather).toEqual([]);
    expect(result.metadata.tool_name).toBe("get_weather");
    const args = result.messages[0]?.toolCalls[0]?.arguments;
    expect(args && toJson(ValueSchema, args)).toEqual({ city: "Paris" });
  });
});

describe("harness agent definitions", () => {
  const adapter = offlineHarness();

  it.each([
    [{ provider: "gemini", model: "x" }, "agent.definition.provider"],
    [{ provider: "openai", model: "" }, "agent.definition.model"],
    [{ provider: "openai", model: "m", tools: ["rm_rf"] }, "agent.definition.tools[0]"],
    [{ provider: "anthropic", model: "claude-sonnet-5-5" }, "agent.definition.max_output_tokens"],
    [
      { provider: "openai", model: "m", budgets: { max_steps: 0 } },
      "agent.definition.budgets.max_steps",
    ],
    [{ provider: "openai", model: "m", temprature: 1 }, "agent.definition.temprature"],
  ])("rejects %j at %s", (definition, param) => {
    const caught = definitionRefusal(adapter, definition as JsonObject);
    expect(isTrellisError(caught)).toBe(true);
    expect(caught).toMatchObject({ reason: "agent_definition_invalid", param });
  });

  it("accepts a complete definition and names its backend", () => {
    expect(adapter.backendId).toBe(HARNESS_BACKEND);
    expect(() => adapter.validateDefinition?.(openaiAgent())).not.toThrow();
    expect(() => adapter.validateDefinition?.(anthropicAgent())).not.toThrow();
  });

  it("declares its capabilities and refuses inputs with file references (blocking, no model call)", async () => {
    expect(adapter.describeCapabilities?.()).toMatchObject({
      toolUse: "native-iterative",
      approvalInterrupts: "native",
      continuationSupport: "structured",
      streaming: "native",
    });
    const { request } = turnRequest(openaiAgent(), "Summarize this file");
    request.input.parts.push(
      create(PartSchema, {
        kind: {
          case: "fileRef",
          value: { uri: "file:///tmp/report.pdf", mimeType: "application/pdf" },
        },
      }),
    );
    const negotiation = adapter.negotiate?.(request);
    expect(negotiation?.supported).toBe(false);
    expect(negotiation?.reasons).toContainEqual(
      expect.objectContaining({ code: "attachments_unsupported", severity: "blocking" }),
    );
    const result = await adapter.execute(request);
    expect(result).toMatchObject({ status: "failed", category: "unsupported", retryable: false });
  });

  it("fails a turn whose agent lists a tool the registry lacks", async () => {
    const { request } = turnRequest({ provider: "openai", model: "m" }, "x");
    request.agent.tools = ["get_weather", "launch_rocket"];
    const result = await adapter.execute(request);
    expect(result).toMatchObject({ status: "failed", category: "agent_definition_invalid" });
  });
});
