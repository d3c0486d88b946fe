/**
 * The harness's built-in clarification tool (`ask_user`), through the real
 * SDK clients against recorded OpenAI and Anthropic responses: the model's
 * question suspends the turn, the answer resumes it as the call's result, a
 * checkpoint resumed twice gets the first answer again, and bad calls, bad
 * payloads and bad definitions get clear, typed errors.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { type ExecutionAdapter, type HarnessTool, textSha256 } from "../../src/index.js";
import { turnRequest } from "../../src/testing/harness-agents.js";
import { ANTHROPIC_MESSAGES, fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import {
  askingAnthropicAgent,
  completed,
  definitionRefusal,
  offlineHarness,
  record,
  shape,
  suspended,
  useRecordedHarness,
} from "./support/fixture.js";

const { server, harness } = useRecordedHarness();

const ASK_CALL = "call_AsK7uS3r9Qx2Lm4Np6Rt8Vw0";
const WEATHER_CALL = "call_LyOn4wEaT5hEr6Xy7Zb8Cd9E";
const QUESTION = "Which city would you like the weather for?";

const openaiAgent = (extra: JsonObject = {}): JsonObject => ({
  provider: "openai",
  model: "gpt-4o-mini",
  system: "You are a helpful assistant.",
  tools: ["get_weather"],
  ask_user: true,
  stream: false,
  ...extra,
});

/** The tool names a recorded request offered the model (either wire format). */
function offeredTools(index: number): string[] {
  const body = server.requests[index]?.body as {
    tools?: ({ name: string } | { function: { name: string } })[];
  };
  return (body.tools ?? []).map((t) => ("function" in t ? t.function.name : t.name));
}

describe("ask_user over OpenAI (recorded)", () => {
  async function askCity(adapter: ExecutionAdapter, taskId: string) {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-ask-user-tool-call.http"));
    const { request, events } = turnRequest(openaiAgent(), "What's the weather like?", {
      taskId,
    });
    return { result: suspended(await adapter.execute(request)), events };
  }

  it("suspends the turn with the model's question (clarification, INPUT_REQUIRED)", async () => {
    const { adapter, runs } = harness();
    const { result, events } = await askCity(adapter, "task_ask_suspend");

    expect(result).toMatchObject({
      kind: "input",
      reason: "clarification",
      signalLabel: `clarification:${ASK_CALL}`,
      metadata: {
        kind: "clarification",
        question: QUESTION,
        tool_call_id: ASK_CALL,
        tool_name: "ask_user",
        call_id: "main:1",
        answer: { answer: "" },
      },
      checkpoint: { awaiting: "clarification", pending: { id: ASK_CALL, name: "ask_user" } },
    });
    expect(result.approvalRequest).toBeUndefined();
    // The assistant's tool call goes to the transcript now; the answer comes on resume.
    expect(shape(result.messages)).toEqual([
      { role: "ASSISTANT", text: "", toolCalls: ["ask_user"], toolCallId: "" },
    ]);
    expect(record(result.messages[0], "llm:main:1")).toMatchObject({
      finish_reason: "tool_calls",
      response: { id: "chatcmpl-CW4a1s2k3U4s5e6r7Q8u9e0StIoN" },
    });
    // No tool ran; nothing but the message and the step was reported.
    expect(events.map((e) => e.kind)).toEqual(["message", "step_finished"]);
    expect(runs.get_weather).toEqual([]);
    // The model was offered the built-in beside the registry tool, with its schema.
    expect(offeredTools(0)).toEqual(["get_weather", "ask_user"]);
    const body = server.requests[0]?.body as {
      tools: { function: { name: string; parameters: JsonObject } }[];
    };
    expect(body.tools[1]?.function.parameters).toMatchObject({
      type: "object",
      required: ["question"],
      additionalProperties: false,
    });
  });

  it("feeds the answer back as the call's result and goes on with the loop, once per checkpoint", async () => {
    const { adapter, runs } = harness();
    const taskId = "task_ask_resume";
    const { result: waiting } = await askCity(adapter, taskId);

    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-ask-user-weather-tool-call.http"),
      fixture("openai/chat-ask-user-final.http"),
    );
    const once = turnRequest(openaiAgent(), "What's the weather like?", {
      taskId,
      resume: { checkpoint: waiting.checkpoint, payload: { answer: "Lyon" } },
    });
    const first = completed(await adapter.execute(once.request));
    expect(shape(first.messages)).toEqual([
      { role: "TOOL", text: "Lyon", toolCalls: [], toolCallId: ASK_CALL },
      { role: "ASSISTANT", text: "", toolCalls: ["get_weather"], toolCallId: "" },
      {
        role: "TOOL",
        text: '{"city":"Lyon","temperature_c":18,"sky":"sunny"}',
        toolCalls: [],
        toolCallId: WEATHER_CALL,
      },
      {
        role: "ASSISTANT",
        text: "It's 18°C and sunny in Lyon right now.",
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(record(first.messages[0], `tool:${ASK_CALL}`)).toEqual({
      kind: "tool_result",
      tool_call_id: ASK_CALL,
      name: "ask_user",
      status: "ok",
      output: "Lyon",
      clarification: { question: QUESTION, answer: "Lyon" },
      output_sha256: textSha256("Lyon"),
    });
    expect(runs.get_weather).toEqual([{ city: "Lyon" }]);
    // Call ids go on across the suspension.
    expect(record(first.messages[1], "llm:main:2")).toMatchObject({ call_id: "main:2" });
    expect(record(first.messages[3], "llm:main:3")).toMatchObject({ call_id: "main:3" });
    // The model saw its question answered as the tool call's result.
    const resumed = server.requests[1]?.body as {
      messages: { role: string; content?: unknown; tool_call_id?: string }[];
    };
    expect(resumed.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    expect(resumed.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: ASK_CALL,
      content: "Lyon",
    });
    expect(once.events.slice(0, 2)).toEqual([
      { kind: "tool_finished", toolCallId: ASK_CALL, name: "ask_user", status: "ok" },
      { kind: "message", message: first.messages[0] },
    ]);

    // The same checkpoint again, even with another answer: the first answer,
    // marked as recorded, and the tool after it does not run a second time.
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-ask-user-weather-tool-call.http"),
      fixture("openai/chat-ask-user-final.http"),
    );
    const again = turnRequest(openaiAgent(), "What's the weather like?", {
      taskId,
      resume: { checkpoint: waiting.checkpoint, payload: { answer: "Paris" } },
    });
    const second = completed(await adapter.execute(again.request));
    expect(shape(second.messages)).toEqual(shape(first.messages));
    expect(record(second.messages[0], `tool:${ASK_CALL}`)).toMatchObject({
      output: "Lyon",
      recorded: true,
    });
    expect(runs.get_weather).toHaveLength(1);
    expect(again.events.filter((e) => e.kind === "tool_started")).toEqual([]);
    const replayed = server.requests[3]?.body as { messages: { content?: unknown }[] };
    expect(replayed.messages.at(-1)?.content).toBe("Lyon");
  });

  let badPayloads = 0;
  it.each([
    [{ approved: true }, /unknown field\(s\) approved/],
    [{ answer: "   " }, /answer must not be blank/],
    [{ answer: 42 }, /answer must be a string/],
    ["Lyon", /not a JSON object/],
    [{ answer: "Lyon", city: "Lyon" }, /unknown field\(s\) city/],
  ])(
    "refuses the resume payload %j (suspension_resume_payload_invalid), recording nothing",
    async (payload, why) => {
      const { adapter } = harness();
      const taskId = `task_ask_bad_payload_${++badPayloads}`;
      const { result: waiting } = await askCity(adapter, taskId);
      const bad = await adapter.execute(
        turnRequest(openaiAgent(), "x", {
          taskId,
          resume: { checkpoint: waiting.checkpoint, payload },
        }).request,
      );
      expect(bad).toMatchObject({
        status: "failed",
        category: "suspension_resume_payload_invalid",
        retryable: false,
        messages: [],
      });
      expect(bad.status === "failed" && bad.message).toMatch(why);
      expect(bad.status === "failed" && bad.message).toContain('{"answer": "<text>"}');
      // No model call was made; a good answer afterwards is not shadowed by the bad one.
      expect(server.requests).toHaveLength(1);
      server.enqueue(
        OPENAI_CHAT,
        fixture("openai/chat-ask-user-weather-tool-call.http"),
        fixture("openai/chat-ask-user-final.http"),
      );
      const good = completed(
        await adapter.execute(
          turnRequest(openaiAgent(), "x", {
            taskId,
            resume: { checkpoint: waiting.checkpoint, payload: { answer: "Lyon" } },
          }).request,
        ),
      );
      expect(record(good.messages[0], `tool:${ASK_CALL}`)).toMatchObject({ output: "Lyon" });
      expect(record(good.messages[0], `tool:${ASK_CALL}`).recorded).toBeUndefined();
    },
  );

  it("answers a malformed ask_user call with an error result; the model asks again properly", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-ask-user-bad-arguments.http"),
      fixture("openai/chat-ask-user-tool-call.http"),
    );
    const { adapter } = harness();
    const { request, events } = turnRequest(openaiAgent(), "What's the weather like?");
    const result = suspended(await adapter.execute(request));
    expect(shape(result.messages).map((m) => m.role)).toEqual(["ASSISTANT", "TOOL", "ASSISTANT"]);
    expect(shape(result.messages)[1]?.text).toMatch(/^Error: the call was not run\./);
    expect(record(result.messages[1], "tool:call_BaDaSk1q2W3e4R5t6Y7u8I9o")).toEqual({
      kind: "tool_result",
      tool_call_id: "call_BaDaSk1q2W3e4R5t6Y7u8I9o",
      name: "ask_user",
      status: "rejected",
      problems: [
        { path: "/query", message: "must NOT have additional properties" },
        { path: "", message: "must have required property 'question'" },
      ],
      output_sha256: textSha256(shape(result.messages)[1]?.text ?? ""),
    });
    expect(events.filter((e) => e.kind === "tool_finished")).toEqual([
      {
        kind: "tool_finished",
        toolCallId: "call_BaDaSk1q2W3e4R5t6Y7u8I9o",
        name: "ask_user",
        status: "error",
      },
    ]);
    expect(result).toMatchObject({
      reason: "clarification",
      metadata: { question: QUESTION, call_id: "main:2" },
    });
  });

  it("does not offer ask_user to an agent that does not enable it; a call to it is refused", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-ask-user-tool-call.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const { adapter } = harness();
    const { request } = turnRequest(openaiAgent({ ask_user: false }), "Weather?");
    const result = completed(await adapter.execute(request));
    expect(offeredTools(0)).toEqual(["get_weather"]);
    expect(record(result.messages[1], `tool:${ASK_CALL}`)).toMatchObject({
      status: "rejected",
      problems: [{ path: "", message: "no tool named ask_user is available" }],
    });
  });

  it("fails a clarification resume once the agent no longer enables ask_user", async () => {
    const { adapter } = harness();
    const taskId = "task_ask_disabled";
    const { result: waiting } = await askCity(adapter, taskId);
    const result = await adapter.execute(
      turnRequest(openaiAgent({ ask_user: false }), "x", {
        taskId,
        resume: { checkpoint: waiting.checkpoint, payload: { answer: "Lyon" } },
      }).request,
    );
    expect(result).toMatchObject({ status: "failed", category: "agent_definition_invalid" });
  });

  it("refuses a checkpoint that waits for something it does not know (harness_checkpoint_invalid)", async () => {
    const { adapter } = harness();
    const { result: waiting } = await askCity(adapter, "task_ask_forged");
    const forged = { ...(waiting.checkpoint as JsonObject), awaiting: "payment" };
    const result = await adapter.execute(
      turnRequest(openaiAgent(), "x", {
        taskId: "task_ask_forged",
        resume: { checkpoint: forged, payload: { answer: "Lyon" } },
      }).request,
    );
    expect(result).toMatchObject({ status: "failed", category: "harness_checkpoint_invalid" });
    expect(result.status === "failed" && result.message).toContain('"payment"');
    // Nor is an answer taken for a call that was not a question.
    const checkpoint = waiting.checkpoint as { pending: JsonObject };
    const renamed = { ...checkpoint, pending: { ...checkpoint.pending, name: "get_weather" } };
    const misdirected = await adapter.execute(
      turnRequest(openaiAgent(), "x", {
        taskId: "task_ask_forged",
        resume: { checkpoint: renamed, payload: { answer: "Lyon" } },
      }).request,
    );
    expect(misdirected).toMatchObject({
      status: "failed",
      category: "harness_checkpoint_invalid",
      messages: [],
    });
  });
});

describe("ask_user over Anthropic (recorded)", () => {
  const NOTE_CALL = "toolu_01AsKuSeRnOtE4y5z6a7b8c9";
  const ANSWER = "The kitchen tap has been leaking since Monday.";

  it("asks, then drafts with the answer (tool_use → tool_result)", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-ask-user-tool-use.http"));
    const { adapter } = harness();
    const taskId = "task_ask_anthropic";
    const { request } = turnRequest(askingAnthropicAgent(), "Draft a short note to my landlord.", {
      taskId,
    });
    const waiting = suspended(await adapter.execute(request));
    expect(waiting).toMatchObject({
      reason: "clarification",
      kind: "input",
      signalLabel: `clarification:${NOTE_CALL}`,
      metadata: {
        kind: "clarification",
        question: "What should the note to your landlord be about?",
        tool_call_id: NOTE_CALL,
      },
    });
    expect(shape(waiting.messages)).toEqual([
      {
        role: "ASSISTANT",
        text: "Before I draft it, I need one detail.",
        toolCalls: ["ask_user"],
        toolCallId: "",
      },
    ]);
    const offered = server.requests[0]?.body as {
      tools: { name: string; input_schema: JsonObject }[];
    };
    expect(offered.tools.map((t) => t.name)).toEqual(["ask_user"]);
    expect(offered.tools[0]?.input_schema).toMatchObject({ required: ["question"] });

    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-ask-user-final.http"));
    const resumed = completed(
      await adapter.execute(
        turnRequest(askingAnthropicAgent(), "Draft a short note to my landlord.", {
          taskId,
          resume: { checkpoint: waiting.checkpoint, payload: { answer: ANSWER } },
        }).request,
      ),
    );
    expect(shape(resumed.messages)).toEqual([
      { role: "TOOL", text: ANSWER, toolCalls: [], toolCallId: NOTE_CALL },
      {
        role: "ASSISTANT",
        text: 'Here is a draft: "Dear landlord, the kitchen tap has been leaking since Monday. Could you arrange a repair this week? Thank you."',
        toolCalls: [],
        toolCallId: "",
      },
    ]);
    expect(record(resumed.messages[1], "llm:main:2")).toMatchObject({
      provider: "anthropic",
      usage: { prompt_tokens: 566, completion_tokens: 38, total_tokens: 604 },
    });
    // The answer went back as the tool_result of the ask_user tool_use.
    const body = server.requests[1]?.body as { messages: { role: string; content: unknown }[] };
    expect(body.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(body.messages.at(-1)).toEqual({
      role: "user",
      content: [{ type: "tool_result", tool_use_id: NOTE_CALL, content: ANSWER }],
    });
  });

  it("asks from a streamed answer: the text streams, the question is assembled from its deltas", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-ask-user-tool-use.stream.http"));
    const { adapter } = harness();
    const { request, events } = turnRequest(
      askingAnthropicAgent({ stream: true }),
      "Draft a note.",
    );
    const waiting = suspended(await adapter.execute(request));
    expect(events.map((e) => (e.kind === "text_delta" ? `T:${e.text}` : e.kind))).toEqual([
      "T:Before I draft it,",
      "T: I need one detail.",
      "message",
      "step_finished",
    ]);
    expect(waiting).toMatchObject({
      signalLabel: "clarification:toolu_01StReAmAsKnOtE5z6a7b8c9",
      metadata: { question: "What should the note to your landlord be about?" },
    });
    expect(record(waiting.messages[0], "llm:main:1")).toMatchObject({ streamed: true });
  });
});

describe("ask_user in agent definitions", () => {
  const adapter = offlineHarness();

  it.each([
    [{ ask_user: "yes" }, "agent.definition.ask_user", /must be true or false/],
    [{ tools: ["ask_user"] }, "agent.definition.tools[0]", /enable it with "ask_user": true/],
    [
      { require_approval: ["ask_user"] },
      "agent.definition.require_approval[0]",
      /built-in clarification tool/,
    ],
  ])("refuses %j at %s", (extra, param, message) => {
    const caught = definitionRefusal(adapter, {
      provider: "openai",
      model: "m",
      ...extra,
    } as JsonObject);
    expect(isTrellisError(caught)).toBe(true);
    expect(caught).toMatchObject({ reason: "agent_definition_invalid", param });
    expect((caught as Error).message).toMatch(message);
  });

  it("refuses the built-in beside a registry tool of the same name", () => {
    const own: HarnessTool = {
      name: "ask_user",
      description: "A deployment's own ask_user.",
      inputSchema: { type: "object" },
      run: () => "ok",
    };
    const withOwn = offlineHarness([own]);
    expect(
      definitionRefusal(withOwn, { provider: "openai", model: "m", ask_user: true }),
    ).toMatchObject({
      reason: "agent_definition_invalid",
      param: "agent.definition.ask_user",
    });
    // Without the flag the registry's tool is an ordinary tool.
    expect(
      definitionRefusal(withOwn, { provider: "openai", model: "m", tools: ["ask_user"] }),
    ).toBeUndefined();
  });

  it("accepts ask_user: true", () => {
    expect(
      definitionRefusal(adapter, { provider: "openai", model: "m", ask_user: true }),
    ).toBeUndefined();
  });
});
