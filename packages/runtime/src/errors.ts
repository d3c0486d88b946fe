import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@trellis/contracts/core";

/**
 * The closed set of stable error reasons Trellis services raise. Reasons are the
 * Harn error codes (snake_case) plus the domain-specific ones later areas add
 * through {@link TrellisErrorOptions.reason} as plain strings.
 */
export type CoreReason =
  | "invalid_request"
  | "invalid_state_transition"
  | "unauthenticated"
  | "permission_denied"
  | "resource_not_found"
  | "conflict"
  | "idempotency_key_reused"
  | "cursor_expired"
  | "payload_too_large"
  | "policy_violation"
  | "resource_locked"
  | "unsupported_protocol_version"
  | "rate_limited"
  | "client_closed_request"
  | "internal_error"
  | "upstream_unavailable"
  | "service_unavailable"
  | "deadline_exceeded"
  | "not_implemented"
  | "config_invalid";

/** Options of {@link TrellisError}. */
export interface TrellisErrorOptions {
  /** Stable machine-readable reason; clients switch on it. */
  reason: CoreReason | (string & {});
  /** Human-readable message; never contains secrets. */
  message: string;
  /** The request field the error is about (dotted path), when there is one. */
  param?: string;
  /** Extra facts (never secrets). */
  metadata?: Record<string, string>;
  /** Component that raised it; defaults to "trellis". */
  domain?: string;
  /** Underlying cause, logged but never sent to clients. */
  cause?: unknown;
}

const BRAND = Symbol.for("trellis.error");

/**
 * A domain error with a stable reason. Check with {@link isTrellisError}, not
 * `instanceof` (two copies of this module must still agree).
 *
 * @example
 *   throw new TrellisError({ reason: "resource_not_found", message: "no session ses_1" });
 */
export class TrellisError extends Error {
  readonly [BRAND] = true;
  readonly reason: string;
  readonly param: string | undefined;
  readonly metadata: Record<string, string>;
  readonly domain: string;

  constructor(options: TrellisErrorOptions) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TrellisError";
    this.reason = options.reason;
    this.param = options.param;
    this.metadata = options.metadata ?? {};
    this.domain = options.domain ?? "trellis";
  }
}

/** Guard for {@link TrellisError}. */
export function isTrellisError(value: unknown): value is TrellisError {
  return (
    typeof value === "object" && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true
  );
}

/** Shorthand for the most common domain errors. */
export const errors = {
  invalid(message: string, param?: string): TrellisError {
    return new TrellisError({ reason: "invalid_request", message, ...(param ? { param } : {}) });
  },
  notFound(object: string, id: string): TrellisError {
    return new TrellisError({
      reason: "resource_not_found",
      message: `${object} ${JSON.stringify(id)} was not found`,
      metadata: { object, id },
    });
  },
  unavailable(dependency: string, cause?: unknown): TrellisError {
    return new TrellisError({
      reason: "service_unavailable",
      message: `${dependency} is unavailable; retry later`,
      metadata: { dependency },
      cause,
    });
  },
};

const reasonCodes: Record<string, Code> = {
  invalid_request: Code.InvalidArgument,
  invalid_state_transition: Code.FailedPrecondition,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  resource_not_found: Code.NotFound,
  conflict: Code.Aborted,
  idempotency_key_reused: Code.AlreadyExists,
  cursor_expired: Code.OutOfRange,
  payload_too_large: Code.ResourceExhausted,
  policy_violation: Code.FailedPrecondition,
  resource_locked: Code.Aborted,
  unsupported_protocol_version: Code.FailedPrecondition,
  rate_limited: Code.ResourceExhausted,
  client_closed_request: Code.Canceled,
  internal_error: Code.Internal,
  upstream_unavailable: Code.Unavailable,
  service_unavailable: Code.Unavailable,
  deadline_exceeded: Code.DeadlineExceeded,
  not_implemented: Code.Unimplemented,
  config_invalid: Code.FailedPrecondition,
};

/**
 * Connect code for a reason. Domain reasons ending in `_invalid` or `_not_found`
 * follow the same families; anything unknown is Internal.
 */
export function codeForReason(reason: string): Code {
  const known = reasonCodes[reason];
  if (known !== undefined) return known;
  if (reason.endsWith("_invalid")) return Code.InvalidArgument;
  if (reason.endsWith("_not_found")) return Code.NotFound;
  if (reason.endsWith("_conflict")) return Code.Aborted;
  return Code.Internal;
}

// Errors travel in HTTP headers and trailers (gRPC), whose size is limited
// (and a stream whose headers are too large is reset, not answered): a
// message or fact that quotes a hostile input is cut short.
const maxMessageLength = 1024;
const maxFactLength = 256;
const maxFacts = 32;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/** Turn a domain error into a ConnectError that carries an ErrorDetail. */
export function toConnectError(error: TrellisError): ConnectError {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(error.metadata).slice(0, maxFacts)) {
    metadata[clip(key, maxFactLength)] = clip(value, maxFactLength);
  }
  const detail = create(ErrorDetailSchema, {
    reason: error.reason,
    domain: error.domain,
    metadata,
    param: clip(error.param ?? "", maxFactLength),
  });
  return new ConnectError(
    clip(error.message, maxMessageLength),
    codeForReason(error.reason),
    undefined,
    [{ desc: ErrorDetailSchema, value: detail }],
  );
}

/** Read the ErrorDetail back from a ConnectError (client side). */
export function errorDetailOf(error: ConnectError) {
  return error.findDetails(ErrorDetailSchema)[0];
}
