/**
 * The Anthropic provider through the real `@anthropic-ai/sdk` against
 * recorded Messages API responses (streamed and not), and the llm-provider §7
 * error categories of each failure the API gives.
 */
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Visibility } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { describe, expect, it } from "vitest";
import { createAnthropicProvider, type ModelDelta, type ModelTool } from "../../src/index.js";
import { ANTHROPIC_MESSAGES, fixture } from "../../src/testing/recorded-server.js";
import { failure, useRecordedServer } from "./support/fixture.js";

const WEATHER: ModelTool = {
  name: "get_weather",
  description: "Current weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const question = [
  chatToMessage({ role: "system", content: "You are terse." }),
  chatToMessage({ role: "user", content: "Weather in Paris?" }),
];

const server = useRecordedServer({ drained: true });

function provider(options: { timeoutMs?: number } = {}) {
  return createAnthropicProvider({
    apiKey: "sk-ant-test-recorded",
    baseURL: server.url,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  })("claude-sonnet-5-5");
}

describe("Anthropic provider (Messages API)", () => {
  it("maps tool_use to tool calls, derives total usage, keeps raw; sends system and tools per §8.2.1", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-tool-use.http"));
    const response = await provider().complete({
      messages: question,
      tools: [WEATHER],
      maxOutputTokens: 512,
      stream: false,
    });
    expect(response.finishReason).toBe("tool_calls");
    expect(response.usage).toEqual({ promptTokens: 412, completionTokens: 64, totalTokens: 476 });
    expect(response.message.parts.map((p) => p.kind.case)).toEqual(["text"]);
    const [call] = response.message.toolCalls;
    expect(call?.id).toBe("toolu_01A09q90qw90lq917835lq9");
    expect(call?.arguments && toJson(ValueSchema, call.arguments)).toEqual({ city: "Paris" });
    expect(response.raw.id).toBe("msg_01XFDUDYJgAACzvnptvVoYEL");

    const [request] = server.requests;
    expect(request?.headers.authorization).toBe("Bearer sk-ant-test-recorded");
    expect(request?.headers["anthropic-version"]).toBeTruthy();
    expect(request?.body).toEqual({
      model: "claude-sonnet-5-5",
      max_tokens: 512,
      system: "You are terse.",
      messages: [{ role: "user", content: [{ type: "text", text: "Weather in Paris?" }] }],
      tools: [
        { name: "get_weather", description: WEATHER.description, input_schema: WEATHER.parameters },
      ],
    });
  });

  it("sends tool calls as tool_use blocks and tool results as a user turn of tool_result blocks", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-final.http"));
    const response = await provider().complete({
      messages: [
        ...question,
        chatToMessage({
          role: "assistant",
          content: "Checking.",
          tool_calls: [{ id: "toolu_1", name: "get_weather", arguments: { city: "Paris" } }],
        }),
        chatToMessage({ role: "tool", tool_call_id: "toolu_1", content: "18°C, sunny" }),
      ],
      tools: [WEATHER],
      maxOutputTokens: 512,
      stream: false,
    });
    expect(response.finishReason).toBe("stop");
    const body = server.requests[0]?.body as { messages: unknown[] };
    expect(body.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
        ],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18°C, sunny" }],
      },
    ]);
  });

  it("streams: text deltas, input_json deltas reassembled, usage from message_delta", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-tool-use.stream.http"));
    const deltas: ModelDelta[] = [];
    const response = await provider().complete({
      messages: question,
      tools: [WEATHER],
      maxOutputTokens: 512,
      stream: true,
      onDelta: (d) => deltas.push(d),
    });
    expect(deltas).toEqual([
      { kind: "text", text: "I'll look up" },
      { kind: "text", text: " the weather in Paris." },
    ]);
    expect(response.finishReason).toBe("tool_calls");
    const [call] = response.message.toolCalls;
    expect(call?.id).toBe("toolu_01StReAmWeAtHeR9x8y7z6w");
    expect(call?.arguments && toJson(ValueSchema, call.arguments)).toEqual({ city: "Paris" });
    expect(response.usage).toEqual({ promptTokens: 412, completionTokens: 61, totalTokens: 473 });
    expect(server.requests[0]?.body).toMatchObject({ stream: true });
    expect(response.raw).toMatchObject({
      id: "msg_01StReAmToOlUsE1a2b3c4d5",
      stop_reason: "tool_use",
      content: [
        { type: "text", text: "I'll look up the weather in Paris." },
        { type: "tool_use", name: "get_weather", input: { city: "Paris" } },
      ],
    });
  });

  it("streams thinking: thinking deltas reported, the signed thinking block kept (internal)", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-final.stream.http"));
    const deltas: ModelDelta[] = [];
    const response = await provider().complete({
      messages: question,
      tools: [],
      maxOutputTokens: 512,
      stream: true,
      onDelta: (d) => deltas.push(d),
    });
    expect(deltas).toEqual([
      { kind: "thinking", text: "The tool says 18°C and sunny." },
      { kind: "thinking", text: " Answer briefly." },
      { kind: "text", text: "It's 18°C" },
      { kind: "text", text: " and sunny in Paris." },
    ]);
    const [thinking, text] = response.message.parts;
    expect(thinking?.visibility).toBe(Visibility.INTERNAL);
    expect(thinking?.kind).toMatchObject({
      case: "thinking",
      value: {
        text: "The tool says 18°C and sunny. Answer briefly.",
        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
      },
    });
    expect(text?.kind).toMatchObject({
      case: "text",
      value: { text: "It's 18°C and sunny in Paris." },
    });
    expect(response.usage.totalTokens).toBe(498 + 38);
  });

  it("refuses a NUL in the text as provider_invalid_response (issue 22)", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-poison-nul.http"));
    const error = await failure(
      provider().complete({
        messages: question,
        tools: [WEATHER],
        maxOutputTokens: 512,
        stream: false,
      }),
    );
    expect(error).toMatchObject({ category: "provider_invalid_response", retryable: false });
    expect(error.message).toMatch(/holds a NUL character/);
  });

  it("sends a thinking block back verbatim with its signature (§8.2.1.1)", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-final.http"));
    await provider().complete({
      messages: [
        ...question,
        chatToMessage({
          role: "assistant",
          content: [
            { type: "thinking", text: "Look it up.", signature: "sig-1" },
            { type: "text", text: "Checking." },
          ],
          tool_calls: [{ id: "toolu_1", name: "get_weather", arguments: { city: "Paris" } }],
        }),
        chatToMessage({ role: "tool", tool_call_id: "toolu_1", content: "18°C" }),
      ],
      tools: [WEATHER],
      maxOutputTokens: 512,
      stream: false,
    });
    const body = server.requests[0]?.body as { messages: { content: unknown[] }[] };
    expect(body.messages[1]?.content[0]).toEqual({
      type: "thinking",
      thinking: "Look it up.",
      signature: "sig-1",
    });
  });

  it.each([
    ["error-429.http", "provider_rate_limit", true, 429],
    ["error-500.http", "provider_unavailable", true, 500],
    ["error-529.http", "provider_unavailable", true, 529],
    ["error-400.http", "provider_invalid_request", false, 400],
    ["error-401.http", "provider_authentication", false, 401],
  ])("maps %s to %s (retryable %s)", async (name, category, retryable, status) => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture(`anthropic/${name}`));
    const error = await failure(
      provider().complete({ messages: question, tools: [], maxOutputTokens: 64, stream: false }),
    );
    expect(error).toMatchObject({ category, retryable, status });
    if (status === 429) expect(error.retryAfterMs).toBe(12_000);
  });

  it("maps a client timeout to provider_unavailable (retryable, timed out)", async () => {
    server.enqueue(
      ANTHROPIC_MESSAGES,
      fixture("anthropic/messages-weather-final.http", { delayMs: 2_000 }),
    );
    const error = await failure(
      provider({ timeoutMs: 200 }).complete({
        messages: question,
        tools: [],
        maxOutputTokens: 64,
        stream: false,
      }),
    );
    expect(error).toMatchObject({
      category: "provider_unavailable",
      retryable: true,
      timedOut: true,
    });
  });

  it("maps an error event in the middle of a stream by its type (overloaded → provider_unavailable)", async () => {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/stream-overloaded.stream.http"));
    const error = await failure(
      provider().complete({ messages: question, tools: [], maxOutputTokens: 64, stream: true }),
    );
    expect(error).toMatchObject({
      category: "provider_unavailable",
      retryable: true,
      providerCode: "overloaded_error",
    });
  });

  it("refuses a call without max_tokens before sending (provider_invalid_request, §8.2.1)", async () => {
    const error = await failure(
      provider().complete({ messages: question, tools: [], stream: false }),
    );
    expect(error.category).toBe("provider_invalid_request");
    expect(server.requests).toEqual([]);
  });
});
