/**
 * Errors that Connect raises itself, before any interceptor runs: a body that
 * is not a valid message (binary or JSON), too large, nested too deeply, bad
 * UTF-8, an unknown compression, a unary call with zero or two messages. They
 * arrive without a `trellis.core.v1.ErrorDetail`, and some with the wrong code
 * (`parse binary: …` is `Internal`, an HTTP 500). {@link typedRpcError} turns
 * each into the error a client should see: a 4xx-class code for what the
 * client sent wrong, and always an ErrorDetail with a stable reason.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { type codeForReason, errorDetailOf, TrellisError, toConnectError } from "./errors.js";
import type { RequestLimits } from "./limits.js";
import type { Logger } from "./logger.js";

/** What {@link typedRpcError} needs to know about the call. */
export interface ProtocolErrorContext {
  /** `pkg.Service/Method`, or the request path when no RPC matched. */
  rpc: string;
  requestId: string;
  logger: Logger;
  limits: RequestLimits;
}

// The reason of an error that carries only a Connect code (a handler threw a
// bare ConnectError, or Connect refused the request): the Harn family of the code.
const reasonOfCode: Record<Code, string> = {
  [Code.Canceled]: "client_closed_request",
  [Code.Unknown]: "internal_error",
  [Code.InvalidArgument]: "invalid_request",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "resource_not_found",
  [Code.AlreadyExists]: "conflict",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "rate_limited",
  [Code.FailedPrecondition]: "invalid_state_transition",
  [Code.Aborted]: "conflict",
  [Code.OutOfRange]: "invalid_request",
  [Code.Unimplemented]: "method_not_found",
  [Code.Internal]: "internal_error",
  [Code.Unavailable]: "service_unavailable",
  [Code.DataLoss]: "internal_error",
  [Code.Unauthenticated]: "unauthenticated",
};

/** The stable reason that goes with a bare Connect code. */
export function reasonForCode(code: Code): string {
  return reasonOfCode[code] ?? "internal_error";
}

// Messages are echoed to clients; Connect's JSON errors quote the offending
// value, which may be megabytes long.
const maxMessageLength = 512;

function clip(text: string): string {
  return text.length <= maxMessageLength ? text : `${text.slice(0, maxMessageLength)}…`;
}

/**
 * A ConnectError with an ErrorDetail and an explicit code (for errors whose
 * code is not the one {@link codeForReason} gives their reason).
 */
export function typed(
  code: Code,
  reason: string,
  message: string,
  extra: { param?: string; metadata?: Record<string, string> } = {},
): ConnectError {
  const error = toConnectError(new TrellisError({ reason, message: clip(message), ...extra }));
  if (error.code === code) return error;
  const recoded = new ConnectError(error.rawMessage, code);
  recoded.details.push(...error.details);
  return recoded;
}

function tooDeep(limits: RequestLimits): ConnectError {
  return typed(
    Code.InvalidArgument,
    "invalid_request",
    `the request nests deeper than the limit of ${limits.maxNestingDepth} levels`,
    { metadata: { limit_depth: String(limits.maxNestingDepth) } },
  );
}

/** The error for a request (or message) above `limits.maxBodyBytes`. */
export function payloadTooLarge(limits: RequestLimits): ConnectError {
  return typed(
    Code.ResourceExhausted,
    "payload_too_large",
    `the request exceeds the limit of ${limits.maxBodyBytes} bytes`,
    { metadata: { limit_bytes: String(limits.maxBodyBytes) } },
  );
}

/** The error for request text that is not valid UTF-8. */
export function invalidUtf8(): ConnectError {
  return typed(Code.InvalidArgument, "invalid_request", "the request is not valid UTF-8");
}

/**
 * The error a client gets instead of `error`: unchanged when it already
 * carries an ErrorDetail, otherwise classified (see the module comment) and
 * given one. Internal failures keep their code, lose their message (it may
 * hold internals) and are logged with the request id.
 */
export function typedRpcError(error: ConnectError, ctx: ProtocolErrorContext): ConnectError {
  if (errorDetailOf(error) !== undefined) return error;
  const message = error.rawMessage;

  if (/maximum recursion depth/.test(message)) return tooDeep(ctx.limits);

  // protobuf-es failing on the bytes of a binary message: invalid wire data, a
  // truncated message, a string field that is not UTF-8.
  const binary = /^parse binary: (.*)$/s.exec(message);
  if (binary) {
    const cause = binary[1] ?? "";
    if (/utf-?8/i.test(cause)) return invalidUtf8();
    return typed(
      Code.InvalidArgument,
      "invalid_request",
      `the request is not a valid protobuf message (${cause})`,
    );
  }

  if (error.code === Code.ResourceExhausted && /readMaxBytes|larger than/i.test(message)) {
    return payloadTooLarge(ctx.limits);
  }

  if (/^received compressed envelope, but do not know how to decompress/.test(message)) {
    return typed(
      Code.InvalidArgument,
      "invalid_request",
      "a message is flagged compressed, but the request names no compression (grpc-encoding, connect-content-encoding)",
    );
  }
  if (/^decompression failed/.test(message)) {
    return typed(Code.InvalidArgument, "invalid_request", "the request could not be decompressed");
  }

  // A unary method over an envelope protocol (gRPC, gRPC-Web) got no message or two.
  if (/^protocol error: (missing input message|received extra input message)/.test(message)) {
    return typed(
      Code.InvalidArgument,
      "invalid_request",
      "a unary call takes exactly one request message",
    );
  }

  // Connect answers Unimplemented (HTTP 501) to a compression it does not
  // know; what is wrong is the request's header, so it is InvalidArgument here.
  const compression = /^unknown compression "(.*)": supported encodings are (.*)$/s.exec(message);
  if (compression) {
    return typed(
      Code.InvalidArgument,
      "invalid_request",
      `unsupported compression ${JSON.stringify(clip(compression[1] ?? ""))}; supported: ${compression[2] ?? ""}`,
      { param: "content-encoding", metadata: { supported_encodings: compression[2] ?? "" } },
    );
  }

  // A downstream call whose HTTP/2 stream was reset (connect-node reports
  // that as Internal): the dependency failed, not this service.
  if (/^http\/2 stream closed with error code/.test(message)) {
    ctx.logger.warn("rpc failed: a downstream stream was reset", {
      rpc: ctx.rpc,
      request_id: ctx.requestId,
      error: message,
    });
    return typed(Code.Unavailable, "upstream_unavailable", "a downstream call failed; retry later");
  }

  switch (error.code) {
    case Code.Internal:
    case Code.Unknown:
    case Code.DataLoss: {
      ctx.logger.error("rpc failed in the protocol layer", {
        rpc: ctx.rpc,
        request_id: ctx.requestId,
        code: Code[error.code],
        error: message,
        // What Connect wrapped (a non-ConnectError thrown while reading or writing).
        ...(error.cause !== undefined ? { cause: error.cause } : {}),
      });
      return typed(error.code, "internal_error", `internal error (request id ${ctx.requestId})`);
    }
    default: {
      const copy = typed(error.code, reasonForCode(error.code), message);
      error.metadata.forEach((value, key) => {
        copy.metadata.append(key, value);
      });
      return copy;
    }
  }
}

// SQLSTATE classes a query fails with because of the values bound to it
// rather than the statement: 22 (data exception: NUL bytes, invalid text,
// numbers out of range, strings too long) and 54000 (a value too large for an
// index row).
const inputSqlState = /^(22[0-9A-Z]{3}|54000)$/;

/**
 * A database error caused by a value of the request, as the domain error the
 * client should get (`invalid_request`); undefined for anything else. A
 * backstop: services validate their input, and when one misses a case the
 * caller gets a 4xx naming the problem instead of an Internal error.
 */
export function inputRejectedByDatabase(error: unknown): TrellisError | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  if (typeof code !== "string" || typeof severity !== "string" || !inputSqlState.test(code)) {
    return undefined;
  }
  return new TrellisError({
    reason: "invalid_request",
    message:
      "a value in the request cannot be stored or looked up (too long, out of range, or not valid text)",
    metadata: { sqlstate: code },
    cause: error,
  });
}
