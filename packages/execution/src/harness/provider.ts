/**
 * The model-provider port of the built-in harness (llm-provider §5/§6).
 *
 * A provider is bound to one model, is stateless (the caller passes the whole
 * conversation each call), never loops on tool calls and never retries: the
 * harness composes those above it. Messages cross the port in the canonical
 * shape (`Message` of `trellis.core.v1`); each implementation maps them to its
 * wire format and back, and keeps the parsed wire response verbatim in `raw`
 * so a call can be recorded and replayed.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";

/** A tool the model may call (llm-provider §4). */
export interface ModelTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: JsonObject;
}

/** Why the model stopped (llm-provider §6). */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error";

/**
 * Token usage of one call (llm-provider §6). A counter the provider did not
 * report, or reported malformed, is `null` — never guessed (§7).
 */
export interface ModelUsage {
  promptTokens: number | null;
  completionTokens: number | null;
  totalTokens: number | null;
  /** Prompt tokens served from a prefix cache, when the provider says. */
  cachedTokens?: number;
}

/** A piece of the answer while it streams. */
export type ModelDelta = { kind: "text"; text: string } | { kind: "thinking"; text: string };

/** One call to the model. */
export interface ModelRequest {
  /** The whole conversation, system messages included, in the canonical shape. */
  messages: readonly Message[];
  tools: readonly ModelTool[];
  /** Upper bound on generated tokens; required by some providers (Anthropic). */
  maxOutputTokens?: number;
  temperature?: number;
  /** Consume the answer as a stream (SSE) and report deltas as they arrive. */
  stream: boolean;
  signal?: AbortSignal;
  onDelta?(delta: ModelDelta): void;
}

/**
 * What a call returned. A streamed call is assembled into the same shape as
 * an atomic one (llm-provider §6 "Streaming assembly").
 */
export interface ModelResponse {
  /** The assistant message: text / thinking parts and tool calls (ids verbatim). */
  message: Message;
  finishReason: FinishReason;
  usage: ModelUsage;
  /** The provider's parsed response, verbatim (for a stream: the assembled response). */
  raw: JsonObject;
  /** The model that answered, as the provider named it. */
  model: string;
}

/** A provider bound to one model (llm-provider §1). */
export interface ModelProvider {
  /** Provider name: "openai", "anthropic", … */
  readonly provider: string;
  readonly model: string;
  /** Throws a {@link ProviderError} (or aborts with the request's signal). */
  complete(request: ModelRequest): Promise<ModelResponse>;
}

/** Builds a provider for a model. */
export type ModelProviderFactory = (model: string) => ModelProvider;

/** Where a provider is and how to reach it (never read from an agent definition). */
export interface ProviderConnection {
  /** Secret API key; a call without one fails with `provider_authentication`. */
  apiKey?: string;
  /** API root, e.g. `https://api.openai.com/v1`; defaults to the official service. */
  baseURL?: string;
  /** Per-request timeout in milliseconds (default 120 000). */
  timeoutMs?: number;
  /** Retries inside the SDK (default 0: retry policy belongs above the provider). */
  maxRetries?: number;
}
