/**
 * What the SDK-backed providers share around their wire mapping: the client
 * settings, the missing-key failure, the streamed-or-atomic call with its
 * abort check and error mapping (llm-provider §6 "Streaming assembly", §7),
 * and the {@link ModelResponse} built from a parsed response. Each provider
 * gives only its own wire ({@link SdkWire}): request body, stream assembly,
 * response parsing and how its SDK's errors read.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { ChatBlockJson } from "@trellis/messages";
import { assistantMessage } from "./chat-mapping.js";
import type {
  FinishReason,
  ModelProvider,
  ModelProviderFactory,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ProviderConnection,
} from "./provider.js";
import { ProviderError, providerErrorOf, type SdkFailure } from "./provider-error.js";

/** A parsed wire response or request body. */
export type Json = Record<string, unknown>;

/** How one SDK's errors read. */
export interface SdkErrors {
  /** The SDK's error for a call its caller aborted. */
  abort: abstract new (
    ...args: never[]
  ) => Error;
  /** The SDK's error for a call that ran out of time (checked before {@link api}). */
  timeout: abstract new (
    ...args: never[]
  ) => Error;
  /** The API failure an SDK error reports, or undefined when it is not one. */
  api(error: unknown): SdkFailure | undefined;
}

/** The settings an SDK client is built with. */
export interface SdkClientSettings {
  apiKey: string;
  baseURL: string;
  timeout: number;
  maxRetries: number;
}

/** The per-call options an SDK call takes. */
export interface SdkCallOptions {
  signal?: AbortSignal;
}

/** One provider's wire over its SDK, for {@link sdkProvider}. */
export interface SdkWire<Client> {
  /** Provider name ("openai", "anthropic"). */
  name: string;
  /** The provider as messages name it ("OpenAI", "Anthropic"). */
  label: string;
  /** Where the API key comes from, for the message of a call without one. */
  keyVariable: string;
  /** API root when the connection names none. */
  baseURL: string;
  client(settings: SdkClientSettings): Client;
  errors: SdkErrors;
  /** Refuses a request the mapping cannot send, before the key is checked. */
  refuse?(request: ModelRequest): void;
  /** The request body (mapping failures are thrown as they are). */
  body(model: string, request: ModelRequest): Json;
  /** Starts a streamed call. */
  stream(client: Client, body: Json, options: SdkCallOptions): Promise<AsyncIterable<unknown>>;
  /** Makes an atomic call. */
  once(client: Client, body: Json, options: SdkCallOptions): Promise<unknown>;
  /** Reads the stream, reports deltas, and assembles what an atomic call returns. */
  assemble(events: AsyncIterable<unknown>, onDelta: ModelRequest["onDelta"]): Promise<Json>;
  /** The response of a parsed (or assembled) wire response. */
  responseOf(raw: Json, model: string): ModelResponse;
}

/** Maps an SDK failure onto llm-provider §7; aborts and provider errors pass through unchanged. */
function errorOf(
  label: string,
  errors: SdkErrors,
  error: unknown,
  signal: AbortSignal | undefined,
): unknown {
  if (error instanceof ProviderError) return error;
  if (error instanceof errors.abort || signal?.aborted) return error;
  if (error instanceof errors.timeout) return providerErrorOf(label, { kind: "timeout" }, error);
  return providerErrorOf(label, errors.api(error) ?? { kind: "other" }, error);
}

/**
 * A provider factory over an SDK. The client is built once (120 s timeout
 * and no retries unless the connection says); without an API key every call
 * fails with `provider_authentication`. A call streams when the request asks,
 * and its failure is mapped onto llm-provider §7.
 */
export function sdkProvider<Client>(
  options: ProviderConnection,
  wire: SdkWire<Client>,
): ModelProviderFactory {
  const client = options.apiKey
    ? wire.client({
        apiKey: options.apiKey,
        baseURL: options.baseURL ?? wire.baseURL,
        timeout: options.timeoutMs ?? 120_000,
        maxRetries: options.maxRetries ?? 0,
      })
    : undefined;
  return (model: string): ModelProvider => ({
    provider: wire.name,
    model,
    async complete(request: ModelRequest): Promise<ModelResponse> {
      wire.refuse?.(request);
      if (client === undefined) {
        throw new ProviderError({
          category: "provider_authentication",
          message: `no ${wire.label} API key is configured (${wire.keyVariable})`,
        });
      }
      const body = wire.body(model, request);
      const callOptions = request.signal ? { signal: request.signal } : {};
      try {
        if (request.stream) {
          const events = await wire.stream(client, body, callOptions);
          const assembled = await wire.assemble(events, request.onDelta);
          // The SDK ends a stream quietly when it is aborted: never take the rest for an answer.
          request.signal?.throwIfAborted();
          return wire.responseOf(assembled, model);
        }
        return wire.responseOf((await wire.once(client, body, callOptions)) as Json, model);
      } catch (error) {
        throw errorOf(wire.label, wire.errors, error, request.signal);
      }
    },
  });
}

/** What a provider read from its wire response. */
export interface ResponseParts {
  blocks: ChatBlockJson[];
  toolCalls: Parameters<typeof assistantMessage>[1];
  finishReason: FinishReason;
  usage: ModelUsage;
}

/** The {@link ModelResponse} of a wire response; `raw` is kept verbatim. */
export function modelResponse(raw: Json, model: string, parts: ResponseParts): ModelResponse {
  return {
    message: assistantMessage(parts.blocks, parts.toolCalls, parts.finishReason === "error"),
    finishReason: parts.finishReason,
    usage: parts.usage,
    raw: raw as JsonObject,
    model: typeof raw.model === "string" ? raw.model : model,
  };
}
