/**
 * The OpenAI provider: Chat Completions (`POST /chat/completions`) through the
 * official `openai` SDK, mapped per llm-provider §8.1 (request §8.1.1,
 * response §8.1.2, errors §8.1.3, streaming §8.1.6). Works with any
 * OpenAI-compatible server through `baseURL`.
 */
import type { ChatBlockJson } from "@trellis/messages";
import { isRecord } from "@trellis/runtime";
import OpenAI, { APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { plainText, toWireMessages, type WireMessage } from "./chat-mapping.js";
import type {
  FinishReason,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ProviderConnection,
} from "./provider.js";
import { type Json, modelResponse, type SdkErrors, sdkProvider } from "./provider-call.js";
import { counter, invalidResponse } from "./provider-error.js";

const PROVIDER = "OpenAI";

/** Provider name of {@link createOpenAIProvider}. */
export const OPENAI_PROVIDER = "openai";

/** §8.1.1: one canonical message as a Chat Completions message (thinking stripped). */
function wireMessage(message: WireMessage): Json {
  switch (message.role) {
    case "system":
      return { role: "system", content: plainText(message.content) };
    case "tool":
      return {
        role: "tool",
        tool_call_id: message.toolCallId,
        content: plainText(message.content),
      };
    case "user": {
      if (typeof message.content === "string") return { role: "user", content: message.content };
      const parts = message.content.flatMap((block): Json[] => {
        if (block.type === "text") return [{ type: "text", text: block.text }];
        if (block.type === "image") {
          const url =
            block.source.type === "url"
              ? block.source.url
              : `data:${block.media_type ?? "image/png"};base64,${block.source.base64_data}`;
          return [
            {
              type: "image_url",
              image_url: { url, ...(block.detail ? { detail: block.detail } : {}) },
            },
          ];
        }
        return [];
      });
      return { role: "user", content: parts };
    }
    case "assistant": {
      const text = plainText(message.content);
      return {
        role: "assistant",
        content: text === "" ? null : text,
        ...(message.toolCalls.length > 0
          ? {
              tool_calls: message.toolCalls.map((call) => ({
                id: call.id,
                type: "function",
                function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
              })),
            }
          : {}),
      };
    }
  }
}

/** §8.1.2: OpenAI's finish reasons; `function_call` is legacy tool calling; unknown → error. */
function finishReasonOf(value: unknown): FinishReason {
  switch (value) {
    case "stop":
    case "length":
    case "tool_calls":
    case "content_filter":
      return value;
    case "function_call":
      return "tool_calls";
    default:
      return "error";
  }
}

function usageOf(raw: unknown): ModelUsage {
  if (!isRecord(raw)) return { promptTokens: null, completionTokens: null, totalTokens: null };
  const details = raw.prompt_tokens_details;
  const cached = isRecord(details) ? counter(details.cached_tokens) : null;
  return {
    promptTokens: counter(raw.prompt_tokens),
    completionTokens: counter(raw.completion_tokens),
    totalTokens: counter(raw.total_tokens),
    ...(cached !== null ? { cachedTokens: cached } : {}),
  };
}

/** How the SDK's errors map onto llm-provider §7 (§8.1.3). */
const SDK_ERRORS: SdkErrors = {
  abort: APIUserAbortError,
  timeout: APIConnectionTimeoutError,
  api(error) {
    if (!(error instanceof APIError)) return undefined;
    const body = isRecord(error.error) ? error.error : {};
    return {
      kind: "api",
      status: error.status,
      code: typeof body.code === "string" ? body.code : (error.type ?? undefined),
      text: typeof body.message === "string" ? body.message : error.message,
      headers: error.headers,
      withoutStatus: "provider_unavailable",
    };
  },
};

/** §8.1.2: a complete (non-streamed) chat completion. */
function responseOf(raw: Json, model: string): ModelResponse {
  const choices = raw.choices;
  const choice = Array.isArray(choices) ? choices[0] : undefined;
  if (!isRecord(choice) || !isRecord(choice.message)) {
    throw invalidResponse(PROVIDER, "the response has no choices[0].message");
  }
  const finishReason = finishReasonOf(choice.finish_reason);
  const message = choice.message;
  const blocks: ChatBlockJson[] = [];
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (typeof reasoning === "string" && reasoning !== "") {
    blocks.push({ type: "thinking", text: reasoning });
  }
  if (typeof message.content === "string") blocks.push({ type: "text", text: message.content });
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  const toolCalls = calls.map((call, index) => {
    const fn = isRecord(call) && isRecord(call.function) ? call.function : undefined;
    if (!isRecord(call) || typeof call.id !== "string" || !fn) {
      throw invalidResponse(PROVIDER, `tool call ${index} is not a function call with an id`);
    }
    return {
      id: call.id,
      name: typeof fn.name === "string" ? fn.name : "",
      argumentsText: typeof fn.arguments === "string" ? fn.arguments : "",
    };
  });
  return modelResponse(raw, model, { blocks, toolCalls, finishReason, usage: usageOf(raw.usage) });
}

/** §8.1.6: reads the chunks, reports deltas, and assembles a chat completion. */
async function assemble(
  chunks: AsyncIterable<unknown>,
  onDelta: ModelRequest["onDelta"],
): Promise<Json> {
  let head: Json | undefined;
  let content = "";
  let reasoning = "";
  let finish: unknown = null;
  let usage: unknown;
  const calls: { id: string; type: string; function: { name: string; arguments: string } }[] = [];
  for await (const chunk of chunks) {
    if (!isRecord(chunk)) continue;
    head ??= chunk;
    if (chunk.usage !== undefined && chunk.usage !== null) usage = chunk.usage;
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    if (!isRecord(choice)) continue;
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      finish = choice.finish_reason;
    }
    const delta = isRecord(choice.delta) ? choice.delta : {};
    const thought = delta.reasoning_content ?? delta.reasoning;
    if (typeof thought === "string" && thought !== "") {
      reasoning += thought;
      onDelta?.({ kind: "thinking", text: thought });
    }
    if (typeof delta.content === "string" && delta.content !== "") {
      content += delta.content;
      onDelta?.({ kind: "text", text: delta.content });
    }
    for (const part of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
      if (!isRecord(part) || typeof part.index !== "number") continue;
      const fn = isRecord(part.function) ? part.function : {};
      let call = calls[part.index];
      if (!call) {
        call = { id: "", type: "function", function: { name: "", arguments: "" } };
        calls[part.index] = call;
      }
      if (typeof part.id === "string") call.id = part.id;
      if (typeof fn.name === "string") call.function.name += fn.name;
      if (typeof fn.arguments === "string") call.function.arguments += fn.arguments;
    }
  }
  if (!head) throw invalidResponse(PROVIDER, "the stream ended without a chunk");
  const message: Json = { role: "assistant", content: content === "" ? null : content };
  if (reasoning !== "") message.reasoning_content = reasoning;
  const assembled = calls.filter((call) => call !== undefined);
  if (assembled.length > 0) message.tool_calls = assembled;
  return {
    id: head.id,
    object: "chat.completion",
    created: head.created,
    model: head.model,
    ...(head.system_fingerprint !== undefined
      ? { system_fingerprint: head.system_fingerprint }
      : {}),
    choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
    ...(usage !== undefined ? { usage } : {}),
  };
}

/** Options of {@link createOpenAIProvider}. */
export type OpenAIProviderOptions = ProviderConnection;

/**
 * The OpenAI Chat Completions provider factory. The SDK client is built once;
 * without an API key every call fails with `provider_authentication`.
 */
export function createOpenAIProvider(options: OpenAIProviderOptions) {
  return sdkProvider(options, {
    name: OPENAI_PROVIDER,
    label: PROVIDER,
    keyVariable: "OPENAI_API_KEY",
    baseURL: "https://api.openai.com/v1",
    client: (settings) => new OpenAI(settings),
    errors: SDK_ERRORS,
    body: (model, request) => ({
      model,
      messages: toWireMessages(request.messages).map(wireMessage),
      ...(request.tools.length > 0
        ? {
            tools: request.tools.map((tool) => ({
              type: "function",
              function: {
                name: tool.name,
                description: tool.description,
                parameters: tool.parameters,
              },
            })),
          }
        : {}),
      ...(request.maxOutputTokens !== undefined
        ? { max_completion_tokens: request.maxOutputTokens }
        : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    }),
    stream: (client, body, options) =>
      client.chat.completions.create(
        {
          ...body,
          stream: true,
          stream_options: { include_usage: true },
        } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming,
        options,
      ),
    once: (client, body, options) =>
      client.chat.completions.create(
        body as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
        options,
      ),
    assemble,
    responseOf,
  });
}
