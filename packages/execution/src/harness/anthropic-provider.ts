/**
 * The Anthropic provider: the Messages API (`POST /v1/messages`) through the
 * official `@anthropic-ai/sdk`, mapped per llm-provider §8.2 (request §8.2.1,
 * content blocks §8.2.1.1, tool results §8.2.1.2, response §8.2.2, errors
 * §8.2.3). Streaming reads the Messages SSE events and assembles the same
 * message an atomic call returns.
 */
import Anthropic, {
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import type { JsonObject } from "@bufbuild/protobuf";
import type { ChatBlockJson } from "@trellis/messages";
import { isRecord } from "@trellis/runtime";
import { plainText, toWireMessages, type WireMessage } from "./chat-mapping.js";
import type {
  FinishReason,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ProviderConnection,
} from "./provider.js";
import { type Json, modelResponse, type SdkErrors, sdkProvider } from "./provider-call.js";
import {
  counter,
  invalidResponse,
  ProviderError,
  type ProviderErrorCategory,
} from "./provider-error.js";

const PROVIDER = "Anthropic";

/** Provider name of {@link createAnthropicProvider}. */
export const ANTHROPIC_PROVIDER = "anthropic";

function invalidRequest(message: string): ProviderError {
  return new ProviderError({ category: "provider_invalid_request", message });
}

/** §8.2.1.1: content blocks of a user or assistant message. */
function blocksOf(content: string | ChatBlockJson[], role: "user" | "assistant"): Json[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  return content.map((block): Json => {
    switch (block.type) {
      case "text":
        return { type: "text", text: block.text };
      case "image":
        if (role !== "user") throw invalidRequest("image blocks belong to user messages");
        return {
          type: "image",
          source:
            block.source.type === "url"
              ? { type: "url", url: block.source.url }
              : {
                  type: "base64",
                  media_type: block.media_type ?? "",
                  data: block.source.base64_data,
                },
        };
      case "thinking":
        return {
          type: "thinking",
          thinking: block.text,
          ...(block.signature ? { signature: block.signature } : {}),
        };
      case "redacted_thinking":
        return { type: "redacted_thinking", data: block.data };
      default:
        throw invalidRequest("a content block of an unknown type");
    }
  });
}

/**
 * §8.2.1: the system text and the user/assistant turns. Consecutive tool
 * messages collapse into one user message of `tool_result` blocks (§8.2.1.2);
 * consecutive turns of one role are merged, since the API alternates roles.
 */
function wireRequest(messages: readonly WireMessage[]): { system: string; messages: Json[] } {
  const system: string[] = [];
  const turns: { role: "user" | "assistant"; content: Json[] }[] = [];
  const push = (role: "user" | "assistant", content: Json[]) => {
    const last = turns.at(-1);
    if (last && last.role === role) last.content.push(...content);
    else turns.push({ role, content });
  };
  for (const message of messages) {
    switch (message.role) {
      case "system":
        if (typeof message.content !== "string" && message.content.some((b) => b.type !== "text")) {
          throw invalidRequest("a system message may only carry text");
        }
        system.push(plainText(message.content));
        break;
      case "tool":
        push("user", [
          {
            type: "tool_result",
            tool_use_id: message.toolCallId,
            content: plainText(message.content),
          },
        ]);
        break;
      case "user":
        push("user", blocksOf(message.content, "user"));
        break;
      case "assistant":
        push("assistant", [
          ...blocksOf(message.content, "assistant"),
          ...message.toolCalls.map((call) => ({
            type: "tool_use",
            id: call.id,
            name: call.name,
            input: call.arguments ?? {},
          })),
        ]);
        break;
    }
  }
  for (const [index, turn] of turns.entries()) {
    if (turn.content.length === 0) throw invalidRequest(`message ${index} has no content`);
  }
  return { system: system.filter((s) => s !== "").join("\n\n"), messages: turns };
}

/** §8.2.2: Anthropic's stop reasons. */
function finishReasonOf(value: unknown): FinishReason {
  switch (value) {
    case "end_turn":
    case "stop_sequence":
    case "pause_turn":
      return "stop";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "refusal":
      return "content_filter";
    default:
      return "error";
  }
}

/** §8.2.2: the total is derived, and unknown when either addend is (§7). */
function usageOf(raw: unknown): ModelUsage {
  if (!isRecord(raw)) return { promptTokens: null, completionTokens: null, totalTokens: null };
  const prompt = counter(raw.input_tokens);
  const completion = counter(raw.output_tokens);
  return {
    promptTokens: prompt,
    completionTokens: completion,
    totalTokens: prompt !== null && completion !== null ? prompt + completion : null,
  };
}

/** Error types of the envelope `{type: "error", error: {type, message}}`, for in-stream errors. */
const CATEGORY_OF_TYPE: Record<string, ProviderErrorCategory> = {
  authentication_error: "provider_authentication",
  permission_error: "provider_authentication",
  billing_error: "provider_authentication",
  not_found_error: "provider_invalid_model",
  rate_limit_error: "provider_rate_limit",
  invalid_request_error: "provider_invalid_request",
  request_too_large: "provider_invalid_request",
  api_error: "provider_unavailable",
  overloaded_error: "provider_unavailable",
  timeout_error: "provider_unavailable",
};

/** How the SDK's errors map onto llm-provider §7 (§8.2.3). */
const SDK_ERRORS: SdkErrors = {
  abort: APIUserAbortError,
  timeout: APIConnectionTimeoutError,
  api(error) {
    if (!(error instanceof APIError)) return undefined;
    const type = error.type ?? undefined;
    return {
      kind: "api",
      status: error.status,
      code: type,
      text: error.apiMessage ?? error.message,
      headers: error.headers,
      withoutStatus: (type && CATEGORY_OF_TYPE[type]) || "provider_unavailable",
    };
  },
};

/** §8.2.2: a complete message response. */
function responseOf(raw: Json, model: string): ModelResponse {
  if (!Array.isArray(raw.content))
    throw invalidResponse(PROVIDER, "the response has no content list");
  const finishReason = finishReasonOf(raw.stop_reason);
  const blocks: ChatBlockJson[] = [];
  const toolCalls: { id: string; name: string; arguments: JsonObject }[] = [];
  for (const [index, block] of raw.content.entries()) {
    if (!isRecord(block)) throw invalidResponse(PROVIDER, `content[${index}] is not an object`);
    switch (block.type) {
      case "text":
        if (typeof block.text === "string") blocks.push({ type: "text", text: block.text });
        break;
      case "thinking":
        if (typeof block.thinking === "string" && block.thinking !== "") {
          blocks.push({
            type: "thinking",
            text: block.thinking,
            ...(typeof block.signature === "string" ? { signature: block.signature } : {}),
          });
        }
        break;
      case "redacted_thinking":
        if (typeof block.data === "string")
          blocks.push({ type: "redacted_thinking", data: block.data });
        break;
      case "tool_use":
        if (typeof block.id !== "string" || typeof block.name !== "string") {
          throw invalidResponse(PROVIDER, `content[${index}] is a tool_use without id or name`);
        }
        if (!isRecord(block.input) && finishReason !== "error") {
          throw invalidResponse(
            PROVIDER,
            `content[${index}] has a tool_use input that is not an object`,
          );
        }
        toolCalls.push({
          id: block.id,
          name: block.name,
          arguments: (isRecord(block.input) ? block.input : {}) as JsonObject,
        });
        break;
      default:
        // Server-tool blocks (web search, code execution, …) stay in `raw` only.
        break;
    }
  }
  return modelResponse(raw, model, { blocks, toolCalls, finishReason, usage: usageOf(raw.usage) });
}

/**
 * Reads the Messages stream (message_start, content_block_start / _delta /
 * _stop, message_delta, message_stop), reports text and thinking deltas, and
 * assembles the message an atomic call would have returned.
 */
async function assemble(
  events: AsyncIterable<unknown>,
  onDelta: ModelRequest["onDelta"],
): Promise<Json> {
  let message: Json | undefined;
  const blocks: Json[] = [];
  const partialJson = new Map<number, string>();
  for await (const event of events) {
    if (!isRecord(event)) continue;
    switch (event.type) {
      case "message_start":
        if (!isRecord(event.message))
          throw invalidResponse(PROVIDER, "message_start without a message");
        message = { ...event.message, content: [] };
        break;
      case "content_block_start":
        if (typeof event.index === "number" && isRecord(event.content_block)) {
          blocks[event.index] = { ...event.content_block };
          if (event.content_block.type === "tool_use") partialJson.set(event.index, "");
        }
        break;
      case "content_block_delta": {
        const block = typeof event.index === "number" ? blocks[event.index] : undefined;
        const delta = isRecord(event.delta) ? event.delta : {};
        if (!block)
          throw invalidResponse(PROVIDER, "a content_block_delta for a block never started");
        if (delta.type === "text_delta" && typeof delta.text === "string") {
          block.text = `${typeof block.text === "string" ? block.text : ""}${delta.text}`;
          onDelta?.({ kind: "text", text: delta.text });
        } else if (delta.type === "thinking_delta" && typeof delta.thinking === "string") {
          block.thinking = `${typeof block.thinking === "string" ? block.thinking : ""}${delta.thinking}`;
          onDelta?.({ kind: "thinking", text: delta.thinking });
        } else if (delta.type === "signature_delta" && typeof delta.signature === "string") {
          block.signature = `${typeof block.signature === "string" ? block.signature : ""}${delta.signature}`;
        } else if (delta.type === "input_json_delta" && typeof delta.partial_json === "string") {
          const index = event.index as number;
          partialJson.set(index, `${partialJson.get(index) ?? ""}${delta.partial_json}`);
        }
        break;
      }
      case "message_delta":
        if (!message) throw invalidResponse(PROVIDER, "message_delta before message_start");
        if (isRecord(event.delta)) {
          for (const [key, value] of Object.entries(event.delta)) message[key] = value;
        }
        if (isRecord(event.usage)) {
          // message_delta usage counters are cumulative: they replace the start's.
          const usage = isRecord(message.usage) ? { ...message.usage } : {};
          for (const [key, value] of Object.entries(event.usage)) {
            if (value !== null && value !== undefined) usage[key] = value;
          }
          message.usage = usage;
        }
        break;
      default:
        // message_stop, content_block_stop, ping: nothing to assemble.
        break;
    }
  }
  if (!message) throw invalidResponse(PROVIDER, "the stream ended without message_start");
  for (const [index, text] of partialJson) {
    const block = blocks[index];
    if (!block) continue;
    try {
      block.input = text.trim() === "" ? {} : JSON.parse(text);
    } catch {
      block.input = null;
    }
  }
  message.content = blocks.filter((block) => block !== undefined);
  return message;
}

/** Options of {@link createAnthropicProvider}. */
export type AnthropicProviderOptions = ProviderConnection;

/**
 * The Anthropic Messages provider factory. Requires `maxOutputTokens` on every
 * call (the API does, and §8.2.1 forbids inventing one).
 */
export function createAnthropicProvider(options: AnthropicProviderOptions) {
  return sdkProvider(options, {
    name: ANTHROPIC_PROVIDER,
    label: PROVIDER,
    keyVariable: "ANTHROPIC_API_KEY",
    baseURL: "https://api.anthropic.com",
    client: (settings) => new Anthropic(settings),
    errors: SDK_ERRORS,
    refuse(request) {
      if (request.maxOutputTokens === undefined) {
        throw invalidRequest("the Anthropic mapping needs max_tokens (max_output_tokens)");
      }
    },
    body(model, request) {
      const wire = wireRequest(toWireMessages(request.messages));
      return {
        model,
        max_tokens: request.maxOutputTokens,
        ...(wire.system !== "" ? { system: wire.system } : {}),
        messages: wire.messages,
        ...(request.tools.length > 0
          ? {
              tools: request.tools.map((tool) => ({
                name: tool.name,
                description: tool.description,
                input_schema: tool.parameters,
              })),
            }
          : {}),
        ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      };
    },
    stream: (client, body, options) =>
      client.messages.create(
        { ...body, stream: true } as unknown as Anthropic.MessageCreateParamsStreaming,
        options,
      ),
    once: (client, body, options) =>
      client.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming, options),
    assemble,
    responseOf,
  });
}
