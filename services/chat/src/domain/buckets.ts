/**
 * Error categories → harness §7's three buckets (harness-chat §10). Pure.
 *
 * Categories are the spec's snake_case names. Where the specs disagree, the
 * resolutions of `shared/spec/README.md` apply: provider categories use the
 * llm-provider §7 names (harness-chat §10.2's `provider_timeout` and
 * `provider_rate_limited` are read as `provider_unavailable` and
 * `provider_rate_limit`), and `session_save_failed` is retryable when the store
 * was unreachable, session-terminating when the saved state is unusable.
 */
import { ErrorBucket } from "@trellis/contracts/chat";

/** harness-chat §10.4: the inbound message failed §3.1 validation. */
export const CHAT_MESSAGE_SHAPE_INVALID = "chat_message_shape_invalid";

/** harness-chat §10.2 names that Trellis reads as the llm-provider §7 names. */
const ALIASES: Readonly<Record<string, string>> = {
  provider_timeout: "provider_unavailable",
  provider_rate_limited: "provider_rate_limit",
};

// harness §7.1, harness-chat §10.1 (sessions §10, suspension §10, harness §10).
const SESSION_TERMINATING = new Set([
  "session_load_failed",
  "session_state_migration_chain_ambiguous",
  "session_state_migration_missing",
  "session_state_invalid",
  "suspension_persistence_failed",
  "harness_session_id_unresolved",
  "harness_path_classification_ambiguous",
  "session_closed",
]);

// harness §7.2, harness-chat §10.2 (llm-provider §7 transient categories, and
// the transport-level transients Trellis's own services report).
const RETRYABLE_TRANSIENT = new Set([
  "provider_unavailable",
  "provider_rate_limit",
  "provider_model_not_loaded",
  "provider_finish_error",
  "harness_signal_subscription_failed",
  "harness_signal_correlation_failed",
  "timeout",
  "deadline_exceeded",
  "service_unavailable",
  "upstream_unavailable",
  "rate_limited",
  "resource_locked",
  "conflict",
]);

// harness §7.3, harness-chat §10.3 (llm-provider §7 non-transient request
// categories, suspension §9, harness-chat §10.4).
const USER_CORRECTABLE = new Set([
  "provider_invalid_request",
  "provider_invalid_response",
  "provider_authentication",
  "provider_unsupported_content_block",
  "structured_output_invalid",
  "suspension_resume_payload_invalid",
  CHAT_MESSAGE_SHAPE_INVALID,
  "invalid_request",
  "payload_too_large",
  "policy_violation",
]);

/** What is known about a failure besides its category. */
export interface FailureFacts {
  /** The failure says a retry may succeed (TaskFailure.retryable). */
  retryable?: boolean;
  /** The stable reason of the ErrorDetail that came with it, if any. */
  reason?: string;
}

// Reasons that mean "a dependency could not be reached" (runtime errors.ts).
const UNREACHABLE_REASONS = new Set([
  "service_unavailable",
  "upstream_unavailable",
  "deadline_exceeded",
]);

/**
 * The canonical name of a category: trimmed, lower case, with the
 * harness-chat §10.2 aliases replaced by the llm-provider §7 names.
 */
export function canonicalCategory(category: string): string {
  const name = category.trim().toLowerCase();
  return ALIASES[name] ?? name;
}

/**
 * The bucket a category belongs to.
 *
 * Unknown categories: retryable ones (by `facts.retryable`) and everything
 * else are retryable-transient — the bucket whose reply promises nothing the
 * user must do and exposes no internals ("I had trouble responding").
 *
 * @example bucketOf("provider_invalid_request") // ErrorBucket.USER_CORRECTABLE
 */
export function bucketOf(category: string, facts: FailureFacts = {}): ErrorBucket {
  const name = canonicalCategory(category);
  if (name === "session_save_failed") {
    // spec README: retryable when the store was unreachable, else terminating.
    const unreachable =
      facts.retryable === true ||
      (facts.reason !== undefined && UNREACHABLE_REASONS.has(facts.reason));
    return unreachable ? ErrorBucket.RETRYABLE_TRANSIENT : ErrorBucket.SESSION_TERMINATING;
  }
  if (SESSION_TERMINATING.has(name)) return ErrorBucket.SESSION_TERMINATING;
  if (USER_CORRECTABLE.has(name)) return ErrorBucket.USER_CORRECTABLE;
  if (RETRYABLE_TRANSIENT.has(name)) return ErrorBucket.RETRYABLE_TRANSIENT;
  return ErrorBucket.RETRYABLE_TRANSIENT;
}

/** The harness-conformance name of a bucket ("session_terminating", …). */
export function bucketName(bucket: ErrorBucket): string {
  switch (bucket) {
    case ErrorBucket.SESSION_TERMINATING:
      return "session_terminating";
    case ErrorBucket.RETRYABLE_TRANSIENT:
      return "retryable_transient";
    case ErrorBucket.USER_CORRECTABLE:
      return "user_correctable";
    default:
      return "unspecified";
  }
}
