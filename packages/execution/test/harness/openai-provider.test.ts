/**
 * The OpenAI provider through the real `openai` SDK against recorded Chat
 * Completions responses (streamed and not), and the llm-provider §7 error
 * categories of each failure the API gives.
 */
import { create, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { describe, expect, it } from "vitest";
import { createOpenAIProvider, type ModelDelta, type ModelTool } from "../../src/index.js";
import { fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import { failure, useRecordedServer } from "./support/fixture.js";

const WEATHER: ModelTool = {
  name: "get_weather",
  description: "Current weather of a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  },
};

const question = [
  chatToMessage({ role: "system", content: "You are terse." }),
  chatToMessage({ role: "user", content: "Weather in Paris?" }),
];

const server = useRecordedServer({ drained: true });

function provider(options: { timeoutMs?: number; apiKey?: string } = {}) {
  return createOpenAIProvider({
    apiKey: options.apiKey ?? "sk-test-recorded",
    baseURL: `${server.url}/v1`,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  })("gpt-4o-mini");
}

describe("OpenAI provider (Chat Completions)", () => {
  it("maps a tool call answer, usage and the verbatim raw response; sends the mapped request", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-tool-call.http"));
    const response = await provider().complete({
      messages: question,
      tools: [WEATHER],
      maxOutputTokens: 256,
      temperature: 0,
      stream: false,
    });
    expect(response.finishReason).toBe("tool_calls");
    expect(response.model).toBe("gpt-4o-mini-2024-07-18");
    expect(response.usage).toEqual({
      promptTokens: 82,
      completionTokens: 17,
      totalTokens: 99,
      cachedTokens: 0,
    });
    expect(response.message.role).toBe(Role.ASSISTANT);
    expect(response.message.parts).toEqual([]);
    const [call] = response.message.toolCalls;
    expect(call?.id).toBe("call_Wx7pQ2hZk1LmN3oP4qR5sT6u");
    expect(call?.name).toBe("get_weather");
    expect(call?.arguments && toJson(ValueSchema, call.arguments)).toEqual({ city: "Paris" });
    expect(response.raw.id).toBe("chatcmpl-CW1a2b3c4d5e6f7g8h9i0jKlMnOpQ");
    expect(response.raw.system_fingerprint).toBe("fp_560af6e559");

    const [request] = server.requests;
    expect(request?.headers.authorization).toBe("Bearer sk-test-recorded");
    expect(request?.body).toEqual({
      model: "gpt-4o-mini",
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Weather in Paris?" },
      ],
      tools: [{ type: "function", function: WEATHER }],
      max_completion_tokens: 256,
      temperature: 0,
    });
  });

  it("sends assistant tool calls and tool results back in the Chat Completions shape", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-final.http"));
    const response = await provider().complete({
      messages: [
        ...question,
        chatToMessage({
          role: "assistant",
          tool_calls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
        }),
        chatToMessage({ role: "tool", tool_call_id: "call_1", content: "18°C, sunny" }),
      ],
      tools: [WEATHER],
      stream: false,
    });
    expect(response.finishReason).toBe("stop");
    expect(response.usage.cachedTokens).toBe(64);
    expect(response.message.parts.map((p) => p.kind.value)).toEqual([
      {
        $typeName: "trellis.core.v1.TextPart",
        text: "It's 18°C and sunny in Paris right now.",
        signature: "",
      },
    ]);
    const body = server.requests[0]?.body as { messages: unknown[] };
    expect(body.messages.slice(2)).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "18°C, sunny" },
    ]);
  });

  it("streams: reports text deltas in order and reassembles tool-call deltas, usage from the last chunk", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.stream.http"),
      fixture("openai/chat-weather-final.stream.http"),
    );
    const p = provider();
    const calling = await p.complete({ messages: question, tools: [WEATHER], stream: true });
    expect(calling.finishReason).toBe("tool_calls");
    expect(calling.message.toolCalls.map((c) => [c.id, c.name])).toEqual([
      ["call_Q9sT4mV2aB7cD8eF9gH0iJ1k", "get_weather"],
    ]);
    const args = calling.message.toolCalls[0]?.arguments;
    expect(args && toJson(ValueSchema, args)).toEqual({ city: "Paris" });
    expect(calling.usage.totalTokens).toBe(99);
    expect(server.requests[0]?.body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });

    const deltas: ModelDelta[] = [];
    const final = await p.complete({
      messages: question,
      tools: [WEATHER],
      stream: true,
      onDelta: (d) => deltas.push(d),
    });
    expect(deltas).toEqual([
      { kind: "text", text: "It's" },
      { kind: "text", text: " 18°C" },
      { kind: "text", text: " and sunny" },
      { kind: "text", text: " in Paris." },
    ]);
    expect(final.finishReason).toBe("stop");
    expect(final.usage).toEqual({
      promptTokens: 121,
      completionTokens: 11,
      totalTokens: 132,
      cachedTokens: 64,
    });
    // The assembled raw response has the atomic shape (llm-provider §6 streaming assembly).
    expect(final.raw).toMatchObject({
      id: "chatcmpl-CW2f1i2n3a4l5S6t7r8e9a0mAbCd",
      object: "chat.completion",
      choices: [{ message: { role: "assistant", content: "It's 18°C and sunny in Paris." } }],
      usage: { total_tokens: 132 },
    });
  });

  it("maps 429 to provider_rate_limit (retryable, with retry-after)", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/error-429.http"));
    const error = await failure(
      provider().complete({ messages: question, tools: [], stream: false }),
    );
    expect(error.category).toBe("provider_rate_limit");
    expect(error.retryable).toBe(true);
    expect(error.status).toBe(429);
    expect(error.retryAfterMs).toBe(20_000);
    expect(error.providerCode).toBe("rate_limit_exceeded");
  });

  it("maps 500 to provider_unavailable (retryable)", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/error-500.http"));
    const error = await failure(
      provider().complete({ messages: question, tools: [], stream: true }),
    );
    expect(error).toMatchObject({ category: "provider_unavailable", retryable: true, status: 500 });
  });

  it("maps 400 to provider_invalid_request (not retryable)", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/error-400.http"));
    const error = await failure(
      provider().complete({ messages: question, tools: [], stream: false }),
    );
    expect(error).toMatchObject({
      category: "provider_invalid_request",
      retryable: false,
      status: 400,
    });
    expect(error.message).toContain("must be a response to a preceeding message");
  });

  it("maps 401 to provider_authentication and an unknown model to provider_invalid_model", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/error-401.http"),
      fixture("openai/error-404-model.http"),
    );
    const auth = await failure(
      provider({ apiKey: "sk-bad" }).complete({ messages: question, tools: [], stream: false }),
    );
    expect(auth).toMatchObject({ category: "provider_authentication", retryable: false });
    const model = await failure(
      provider().complete({ messages: question, tools: [], stream: false }),
    );
    expect(model).toMatchObject({ category: "provider_invalid_model", retryable: false });
  });

  it("maps a client timeout to provider_unavailable (retryable, timed out)", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-final.http", { delayMs: 2_000 }));
    const started = Date.now();
    const error = await failure(
      provider({ timeoutMs: 200 }).complete({ messages: question, tools: [], stream: false }),
    );
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(error).toMatchObject({
      category: "provider_unavailable",
      retryable: true,
      timedOut: true,
    });
  });

  it("maps an error sent in the middle of a stream to provider_unavailable", async () => {
    server.enqueue(OPENAI_CHAT, fixture("openai/stream-error.stream.http"));
    const deltas: ModelDelta[] = [];
    const error = await failure(
      provider().complete({
        messages: question,
        tools: [],
        stream: true,
        onDelta: (d) => deltas.push(d),
      }),
    );
    expect(deltas).toEqual([{ kind: "text", text: "It's" }]);
    expect(error).toMatchObject({ category: "provider_unavailable", retryable: true });
    expect(error.status).toBeUndefined();
  });

  it("fails with provider_authentication, without a request, when no key is configured", async () => {
    const p = createOpenAIProvider({ baseURL: `${server.url}/v1` })("gpt-4o-mini");
    const error = await failure(p.complete({ messages: question, tools: [], stream: false }));
    expect(error.category).toBe("provider_authentication");
    expect(server.requests).toEqual([]);
  });

  it("refuses a message without a chat role before sending (provider_invalid_request)", async () => {
    const bad = create(MessageSchema, { role: Role.UNSPECIFIED, parts: [] });
    const error = await failure(provider().complete({ messages: [bad], tools: [], stream: false }));
    expect(error.category).toBe("provider_invalid_request");
    expect(server.requests).toEqual([]);
  });

  // Issue 22, finding 2: text PostgreSQL cannot store fails at the boundary, typed.
  it.each([
    ["a NUL in the text", "openai/chat-poison-nul.http", /content\[0\]\.text holds a NUL/],
    [
      "a lone surrogate in the text",
      "openai/chat-poison-surrogate.http",
      /lone UTF-16 surrogate \(U\+D83D\)/,
    ],
    [
      "a NUL in tool-call arguments",
      "openai/chat-poison-tool-arguments.http",
      /tool_calls\[0\]\.arguments\.city holds a NUL/,
    ],
  ])("refuses %s as provider_invalid_response (not retryable)", async (_name, file, message) => {
    server.enqueue(OPENAI_CHAT, fixture(file));
    const error = await failure(
      provider().complete({ messages: question, tools: [WEATHER], stream: false }),
    );
    expect(error).toMatchObject({ category: "provider_invalid_response", retryable: false });
    expect(error.message).toMatch(message);
  });
});
