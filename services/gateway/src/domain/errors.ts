/**
 * The Harn error envelope (Harn v1 "Error taxonomy") and how internal errors
 * map onto it.
 *
 * Internal services fail with a ConnectError carrying a
 * `trellis.core.v1.ErrorDetail` whose `reason` is either a Harn code
 * (`resource_not_found`, …) or a domain reason (`session_not_found`,
 * `chat_message_shape_invalid`). A Harn code passes through; a domain reason is
 * folded into its family (`*_invalid` → `invalid_request`, …) and kept in
 * `details.reason`; without a detail the Connect code decides. Messages of
 * unexpected failures never reach the client: they get a generic message that
 * names the request id.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type BlockingReasons, BlockingReasonsSchema } from "@trellis/contracts/core";
import { type CoreReason, errorDetailOf, isTrellisError } from "@trellis/runtime";

/**
 * The closed set of Harn error codes: the runtime's core reasons, less the
 * ones that never reach a client (configuration errors stop a process).
 */
export type HarnErrorCode = Exclude<CoreReason, "config_invalid">;

/** The closed set of Harn error types. */
export type HarnErrorType =
  | "request_error"
  | "auth_error"
  | "permission_error"
  | "not_found_error"
  | "conflict_error"
  | "rate_limit_error"
  | "runtime_error"
  | "upstream_error"
  | "server_error";

/** The `error` member of a Harn error response. Key order is the spec's. */
export interface HarnErrorBody {
  code: HarnErrorCode;
  message: string;
  type: HarnErrorType;
  param: string | null;
  request_id: string | null;
  details: JsonObject;
}

/** A complete error response: status, body and extra headers. */
export interface HarnErrorResponse {
  status: number;
  body: { error: HarnErrorBody };
  headers?: Record<string, string>;
}

/** HTTP status and error type of every code (Harn v1 "Core error codes"). */
export const harnErrorCodes: Readonly<
  Record<HarnErrorCode, { status: number; type: HarnErrorType }>
> = {
  invalid_request: { status: 400, type: "request_error" },
  invalid_state_transition: { status: 400, type: "request_error" },
  unauthenticated: { status: 401, type: "auth_error" },
  permission_denied: { status: 403, type: "permission_error" },
  resource_not_found: { status: 404, type: "not_found_error" },
  conflict: { status: 409, type: "conflict_error" },
  idempotency_key_reused: { status: 409, type: "conflict_error" },
  cursor_expired: { status: 410, type: "request_error" },
  payload_too_large: { status: 413, type: "request_error" },
  policy_violation: { status: 422, type: "permission_error" },
  resource_locked: { status: 423, type: "conflict_error" },
  unsupported_protocol_version: { status: 426, type: "request_error" },
  rate_limited: { status: 429, type: "rate_limit_error" },
  client_closed_request: { status: 499, type: "request_error" },
  internal_error: { status: 500, type: "server_error" },
  upstream_unavailable: { status: 502, type: "upstream_error" },
  service_unavailable: { status: 503, type: "server_error" },
  deadline_exceeded: { status: 504, type: "server_error" },
  // A known Extended feature this deployment does not offer (e.g. a vault provider).
  not_implemented: { status: 501, type: "server_error" },
};

/**
 * Blocking reasons as JSON (`details.blocking` of an error or a task
 * failure): the shape of the `agent.blocked` event's data.
 */
export function blockingJson(blocking: BlockingReasons): JsonObject {
  return {
    category: blocking.category,
    retryable: blocking.retryable,
    reasons: blocking.reasons.map((reason) => ({
      backend_id: reason.backendId,
      code: reason.code,
      capability: reason.capability,
      severity: reason.severity,
      message: reason.message,
    })),
    omitted: blocking.omitted,
  };
}

/** Whether `value` is one of the Harn error codes. */
export function isHarnErrorCode(value: string): value is HarnErrorCode {
  return Object.hasOwn(harnErrorCodes, value);
}

/** The Harn code a domain reason belongs to, by its suffix; undefined when none fits. */
function codeForDomainReason(reason: string): HarnErrorCode | undefined {
  if (reason.endsWith("_invalid")) return "invalid_request";
  if (reason.endsWith("_not_found")) return "resource_not_found";
  if (reason.endsWith("_conflict")) return "conflict";
  if (reason.endsWith("_too_large")) return "payload_too_large";
  return undefined;
}

/** The Harn code of a Connect code, for errors without an ErrorDetail. */
export function codeForConnectCode(code: Code): HarnErrorCode {
  switch (code) {
    case Code.InvalidArgument:
      return "invalid_request";
    case Code.NotFound:
      return "resource_not_found";
    case Code.AlreadyExists:
    case Code.Aborted:
    case Code.FailedPrecondition:
      return "conflict";
    case Code.PermissionDenied:
      return "permission_denied";
    case Code.Unauthenticated:
      return "unauthenticated";
    case Code.ResourceExhausted:
      return "rate_limited";
    case Code.Canceled:
      return "client_closed_request";
    case Code.DeadlineExceeded:
      return "deadline_exceeded";
    case Code.OutOfRange:
      return "cursor_expired";
    case Code.Unavailable:
      return "service_unavailable";
    case Code.Unimplemented:
      return "not_implemented";
    default:
      return "internal_error";
  }
}

/**
 * Build an error response.
 *
 * @example
 *   harnError("resource_not_found", "task \"t1\" was not found", { requestId })
 */
export function harnError(
  code: HarnErrorCode,
  message: string,
  options: {
    requestId?: string;
    param?: string | undefined;
    details?: JsonObject;
    headers?: Record<string, string>;
  } = {},
): HarnErrorResponse {
  const { status, type } = harnErrorCodes[code];
  return {
    status,
    body: {
      error: {
        code,
        message,
        type,
        param: options.param ? options.param : null,
        request_id: options.requestId ? options.requestId : null,
        details: options.details ?? {},
      },
    },
    ...(options.headers ? { headers: options.headers } : {}),
  };
}

function genericInternal(requestId: string): string {
  return `internal error (request id ${requestId})`;
}

/**
 * Map anything thrown while serving a REST request to the Harn envelope:
 * TrellisErrors raised by the gateway itself, ConnectErrors returned by
 * internal services (with or without ErrorDetail), and unexpected failures
 * (generic message; the caller logs the cause).
 */
export function toHarnError(error: unknown, requestId: string): HarnErrorResponse {
  if (isTrellisError(error)) {
    const code = isHarnErrorCode(error.reason)
      ? error.reason
      : (codeForDomainReason(error.reason) ?? "internal_error");
    const details: JsonObject = {};
    if (error.reason !== code) details.reason = error.reason;
    if (Object.keys(error.metadata).length > 0) details.metadata = { ...error.metadata };
    const message = code === "internal_error" ? genericInternal(requestId) : error.message;
    return harnError(code, message, { requestId, param: error.param, details });
  }
  if (error instanceof ConnectError) {
    const detail = errorDetailOf(error);
    if (detail?.domain === "mesh") {
      // An internal service refused the gateway's own service credential (a
      // deployment fault: TRELLIS_MESH_SECRET differs), never the client's.
      return harnError("upstream_unavailable", "an internal service is unavailable; retry later", {
        requestId,
        details: { reason: "service_credential_refused" },
      });
    }
    const reason = detail?.reason ?? "";
    let code: HarnErrorCode;
    if (reason !== "" && isHarnErrorCode(reason)) code = reason;
    else code = codeForDomainReason(reason) ?? codeForConnectCode(error.code);
    const details: JsonObject = {};
    if (reason !== "" && reason !== code) details.reason = reason;
    if (detail?.domain) details.domain = detail.domain;
    if (detail && Object.keys(detail.metadata).length > 0) {
      details.metadata = Object.fromEntries(
        Object.entries(detail.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      );
    }
    // Why no backend can run the request, typed (a BlockingReasons detail).
    const [blocking] = error.findDetails(BlockingReasonsSchema);
    if (blocking) details.blocking = blockingJson(blocking);
    // Without a detail, an Internal / Unknown message may hold internals.
    const opaque =
      detail === undefined && (error.code === Code.Internal || error.code === Code.Unknown);
    const message = opaque ? genericInternal(requestId) : error.rawMessage;
    return harnError(code, message, {
      requestId,
      param: detail?.param || undefined,
      details,
    });
  }
  return harnError("internal_error", genericInternal(requestId), { requestId });
}
