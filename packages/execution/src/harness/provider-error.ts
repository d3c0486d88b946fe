/**
 * Provider failures in the llm-provider §7 categories, with the retry
 * classification of §7 ("transient" categories are retryable).
 */

/** The llm-provider §7 error categories a provider raises. */
export type ProviderErrorCategory =
  | "provider_authentication"
  | "provider_unavailable"
  | "provider_invalid_model"
  | "provider_model_not_loaded"
  | "provider_rate_limit"
  | "provider_invalid_response"
  | "provider_invalid_request"
  | "provider_unsupported_content_block";

const TRANSIENT: ReadonlySet<ProviderErrorCategory> = new Set([
  "provider_unavailable",
  "provider_rate_limit",
  "provider_model_not_loaded",
]);

/** Options of a {@link ProviderError}. */
export interface ProviderErrorOptions {
  category: ProviderErrorCategory;
  message: string;
  /** HTTP status of the provider's answer, when there was one. */
  status?: number;
  /** The provider's own error type / code (`rate_limit_error`, `invalid_api_key`, …). */
  providerCode?: string;
  /** From `retry-after-ms` / `retry-after`, when the provider sent it. */
  retryAfterMs?: number;
  /** The request ran out of time (a client-side timeout). */
  timedOut?: boolean;
  cause?: unknown;
}

/**
 * A failed model call. `category` is the llm-provider §7 name; `retryable`
 * follows §7's transient set. Check with {@link isProviderError}.
 */
export class ProviderError extends Error {
  readonly category: ProviderErrorCategory;
  readonly retryable: boolean;
  readonly status: number | undefined;
  readonly providerCode: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly timedOut: boolean;

  constructor(options: ProviderErrorOptions) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ProviderError";
    this.category = options.category;
    this.retryable = TRANSIENT.has(options.category);
    this.status = options.status;
    this.providerCode = options.providerCode;
    this.retryAfterMs = options.retryAfterMs;
    this.timedOut = options.timedOut ?? false;
  }
}

/** Guard for {@link ProviderError}. */
export function isProviderError(value: unknown): value is ProviderError {
  return value instanceof Error && value.name === "ProviderError" && "category" in value;
}

/** Reads `retry-after-ms` or `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(headers: Headers | undefined): number | undefined {
  if (!headers) return undefined;
  const ms = Number.parseFloat(headers.get("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers.get("retry-after");
  if (value === null) return undefined;
  const seconds = Number.parseFloat(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * The category of an HTTP error status, per the §8.1.3 / §8.2.3 tables;
 * `hint` is the provider's error type or code, and `text` its message, which
 * refine 404 (model not found) and 503 (model loading).
 */
export function categoryOfStatus(
  status: number,
  hint: string | undefined,
  text: string,
): ProviderErrorCategory {
  const about = `${hint ?? ""} ${text}`.toLowerCase();
  if (status === 401 || status === 402 || status === 403) return "provider_authentication";
  if (status === 429) return "provider_rate_limit";
  if (status === 404) {
    return about.includes("model") ? "provider_invalid_model" : "provider_invalid_request";
  }
  if (status === 503 && about.includes("loading")) return "provider_model_not_loaded";
  if (status === 408 || status >= 500) return "provider_unavailable";
  if (status === 400 && /\b(image|media[_ ]type|content block)\b/.test(about)) {
    return about.includes("unsupported") || about.includes("not support")
      ? "provider_unsupported_content_block"
      : "provider_invalid_request";
  }
  return "provider_invalid_request";
}

/** How an SDK call failed, in the provider's terms (the SDK's error classes differ). */
export type SdkFailure =
  | { kind: "timeout" }
  | {
      kind: "api";
      status: number | undefined;
      /** The provider's error type or code. */
      code: string | undefined;
      text: string;
      headers: Headers | undefined;
      /** The category when no HTTP status came (connection failed, error mid-stream). */
      withoutStatus: ProviderErrorCategory;
    }
  | { kind: "other" };

/** The llm-provider §7 error of an SDK failure; messages name `provider`. */
export function providerErrorOf(
  provider: string,
  failure: SdkFailure,
  error: unknown,
): ProviderError {
  if (failure.kind === "timeout") {
    return new ProviderError({
      category: "provider_unavailable",
      message: `${provider} did not answer in time (request timed out)`,
      timedOut: true,
      cause: error,
    });
  }
  if (failure.kind === "api") {
    const { status, code, text } = failure;
    const providerCode = code ? { providerCode: code } : {};
    if (status === undefined) {
      return new ProviderError({
        category: failure.withoutStatus,
        message: `${provider}: ${text}`,
        ...providerCode,
        cause: error,
      });
    }
    const wait = retryAfterMs(failure.headers);
    return new ProviderError({
      category: categoryOfStatus(status, code, text),
      message: `${provider} answered ${status}: ${text}`,
      status,
      ...providerCode,
      ...(wait !== undefined ? { retryAfterMs: wait } : {}),
      cause: error,
    });
  }
  if (error instanceof SyntaxError) {
    return new ProviderError({
      category: "provider_invalid_response",
      message: `${provider} sent a body that is not JSON: ${error.message}`,
      cause: error,
    });
  }
  return new ProviderError({
    category: "provider_unavailable",
    message: `${provider} call failed: ${error instanceof Error ? error.message : String(error)}`,
    cause: error,
  });
}

/** A response the provider should not have sent (`provider_invalid_response`). */
export function invalidResponse(provider: string, message: string): ProviderError {
  return new ProviderError({
    category: "provider_invalid_response",
    message: `${provider}: ${message}`,
  });
}

/** A counter as llm-provider §7 wants it: a non-negative integer, else not reported. */
export function counter(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : null;
}
