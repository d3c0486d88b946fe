/**
 * The one place where errors cross the service boundary (STYLE.md "Errors"):
 * domain errors become Connect errors carrying an ErrorDetail; Connect errors
 * with a detail pass through, bare ones get a detail (`protocol-errors.ts`);
 * anything else becomes a generic Internal error whose cause is logged here,
 * never sent.
 */
import {
  Code,
  ConnectError,
  type Interceptor,
  type StreamRequest,
  type UnaryRequest,
} from "@connectrpc/connect";
import { codeForReason, isTrellisError, toConnectError } from "./errors.js";
import { defaultRequestLimits, type RequestLimits } from "./limits.js";
import type { Logger } from "./logger.js";
import { inputRejectedByDatabase, reasonForCode, typed, typedRpcError } from "./protocol-errors.js";
import { requestIdKey } from "./request-id.js";
import { isUnreachableError } from "./unreachable.js";

/**
 * Map a thrown value to what goes on the wire, logging what the client will not see.
 *
 * @param rpc `pkg.Service/Method`, for the log line.
 * @param requestId the call's request id; the generic Internal message names it
 *   so that a user report can be matched to the logged cause.
 * @param signal the call's signal: when it is aborted (deadline, client cancel,
 *   shutdown), whatever the handler threw is a consequence, and the abort reason
 *   is what the client gets.
 * @param limits the server's request limits (named in size and depth errors).
 */
export function toWireError(
  error: unknown,
  logger: Logger,
  rpc: string,
  requestId: string,
  signal?: AbortSignal,
  limits: RequestLimits = defaultRequestLimits,
): ConnectError {
  const rejected = inputRejectedByDatabase(error);
  if (rejected !== undefined) {
    logger.warn("rpc input refused by the database", { rpc, request_id: requestId, error });
    return toConnectError(rejected);
  }
  if (isTrellisError(error)) {
    const code = codeForReason(error.reason);
    if (code === Code.Internal) {
      logger.error("rpc failed", { rpc, request_id: requestId, reason: error.reason, error });
    } else if (code === Code.Unavailable) {
      logger.warn("rpc failed: dependency unavailable", {
        rpc,
        request_id: requestId,
        reason: error.reason,
        error,
      });
    }
    return toConnectError(error);
  }
  const context = { rpc, requestId, logger, limits };
  if (signal?.aborted) {
    // Even a ConnectError: a downstream call cut short by this abort fails with
    // whatever its transport saw (a stream reset reads as Internal).
    logger.debug("rpc aborted", { rpc, request_id: requestId, reason: signal.reason, error });
    const reason = ConnectError.from(signal.reason, Code.Canceled);
    // The call's own HTTP/2 stream was reset (the client left): that is a
    // cancellation, not a failed downstream call, and nothing to warn about.
    if (/^http\/2 stream closed with error code/.test(reason.rawMessage)) {
      return typed(
        reason.code,
        reasonForCode(reason.code),
        `the client closed the call (${reason.rawMessage})`,
      );
    }
    return typedRpcError(reason, context);
  }
  if (error instanceof ConnectError) {
    // With a detail it is relayed as it is; a bare one (a handler's, a
    // library's, Connect's own parse error of a streamed request) is typed.
    return typedRpcError(withoutTransportMetadata(error), context);
  }
  // A dependency down or dropping connections (Postgres restart, …) is transient: retryable.
  if (isUnreachableError(error)) {
    logger.warn("rpc failed: a dependency is unreachable", { rpc, request_id: requestId, error });
    return typed(
      Code.Unavailable,
      "service_unavailable",
      `a dependency is unreachable; retry (request id ${requestId})`,
    );
  }
  // Unknown failure: the message may hold internals (SQL, paths, hosts) — log it, send none of it.
  logger.error("rpc failed with an unexpected error", { rpc, request_id: requestId, error });
  const internal = typed(
    Code.Internal,
    "internal_error",
    `internal error (request id ${requestId})`,
  );
  const wire = new ConnectError(internal.rawMessage, internal.code, undefined, undefined, error);
  wire.details.push(...internal.details);
  return wire;
}

/**
 * Headers a ConnectError picks up when it comes back from a downstream call:
 * the downstream response's own framing. Re-sent as this response's headers
 * they corrupt it (a second content-type, a grpc-status before the body), so a
 * propagated error keeps its code, message, details and any other metadata,
 * but not these.
 */
const transportHeaders = new Set([
  "content-type",
  "content-length",
  "content-encoding",
  "date",
  "grpc-status",
  "grpc-message",
  "grpc-status-details-bin",
  "grpc-encoding",
  "grpc-accept-encoding",
  "connect-content-encoding",
  "connect-accept-encoding",
  "trailer",
  "transfer-encoding",
  "x-request-id",
]);

function withoutTransportMetadata(error: ConnectError): ConnectError {
  let dirty = false;
  error.metadata.forEach((_value, key) => {
    if (transportHeaders.has(key.toLowerCase()) || key.toLowerCase().startsWith("trailer-"))
      dirty = true;
  });
  if (!dirty) return error;
  const metadata = new Headers();
  error.metadata.forEach((value, key) => {
    const k = key.toLowerCase();
    if (!transportHeaders.has(k) && !k.startsWith("trailer-")) metadata.append(key, value);
  });
  const copy = new ConnectError(
    error.rawMessage,
    error.code,
    metadata,
    undefined,
    error.cause ?? error,
  );
  copy.details.push(...error.details);
  return copy;
}

/**
 * Server interceptor applying {@link toWireError} to unary results and to
 * errors raised while a response stream is being produced.
 */
export function createErrorInterceptor(
  logger: Logger,
  limits: RequestLimits = defaultRequestLimits,
): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      if (!res.stream) return res;
      return { ...res, message: mapStreamErrors(res.message, logger, req, limits) };
    } catch (error) {
      throw callError(error, logger, req, limits);
    }
  };
}

async function* mapStreamErrors<T>(
  source: AsyncIterable<T>,
  logger: Logger,
  req: UnaryRequest | StreamRequest,
  limits: RequestLimits,
): AsyncGenerator<T> {
  try {
    yield* source;
  } catch (error) {
    throw callError(error, logger, req, limits);
  }
}

/** {@link toWireError} for an error of the call `req`. */
function callError(
  error: unknown,
  logger: Logger,
  req: UnaryRequest | StreamRequest,
  limits: RequestLimits,
): ConnectError {
  return toWireError(
    error,
    logger,
    `${req.service.typeName}/${req.method.name}`,
    req.contextValues.get(requestIdKey),
    req.signal,
    limits,
  );
}
