/**
 * The one builder of a {@link RestCall}. Every transport that runs a REST
 * route builds its call here: the REST handler (`rest-handler.ts`, then the
 * pipeline's stages fill in caller, body and idempotency key), WebSocket
 * commands and upgrades (`../ws/`) and A2A (`../a2a/`).
 *
 * A call's {@link RestCall.options} are the options of a call to an internal
 * service on the caller's behalf: the caller's identity headers (none for an
 * anonymous caller), the request id, the upstream timeout (none for a
 * stream), and where the transport has them, the client's trace headers and
 * an abort signal.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import { type Caller, setCallerHeaders } from "@trellis/platform";
import { type HttpRequest, type HttpResponse, requestIdHeader } from "@trellis/runtime";
import type { RestCall, RoutePorts } from "./context.js";

/** The caller of a request not authenticated (yet): public routes keep it. */
export const anonymousCaller: Caller = Object.freeze({ actorId: "", workspaceId: "", scopes: [] });

/** The client trace headers handed on to internal services. */
const traceHeaders = ["traceparent", "tracestate", "baggage"] as const;

/** What a call to an internal service on a caller's behalf is made with. */
export interface OutgoingCallInit {
  caller: Caller;
  requestId: string;
  /** Timeout of a unary call, ms (`TRELLIS_UPSTREAM_TIMEOUT`); a stream has none. */
  upstreamTimeoutMs: number;
  /** The client request whose trace headers are handed on; none when absent. */
  traceFrom?: HttpRequest | undefined;
  /** Aborts the call (the client went away, the gateway shuts down). */
  signal?: AbortSignal | undefined;
}

/** Options of one call to an internal service on the caller's behalf. */
export function outgoingCallOptions(init: OutgoingCallInit, streaming = false): CallOptions {
  const headers = new Headers();
  if (init.caller !== anonymousCaller) setCallerHeaders(headers, init.caller);
  headers.set(requestIdHeader, init.requestId);
  // Keep the caller's trace; the client tracing interceptor replaces it with
  // a child span when tracing is active in this process.
  if (init.traceFrom !== undefined) {
    for (const name of traceHeaders) {
      const raw = init.traceFrom.headers[name];
      const value = Array.isArray(raw) ? raw[0] : raw;
      if (value) headers.set(name, value);
    }
  }
  return {
    headers,
    timeoutMs: streaming ? 0 : init.upstreamTimeoutMs,
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  };
}

/** What a {@link RestCall} is built from. */
export interface RestCallInit {
  req: HttpRequest;
  res: HttpResponse;
  requestId: string;
  params: Readonly<Record<string, string>>;
  /** The query string; empty when absent (commands and A2A have none). */
  query?: URLSearchParams;
  /** The authenticated caller; {@link anonymousCaller} when absent. */
  caller?: Caller;
  body?: JsonValue | undefined;
  /** The derived key for internal services; "" when absent. */
  idempotencyKey?: string;
  ports: RoutePorts;
  /** Hand the request's trace headers on to internal services. */
  forwardTrace?: boolean;
  /** Aborts every internal call made for this request. */
  signal?: AbortSignal | undefined;
}

/**
 * A call the route gets. Its options read `caller` when they are made, so a
 * stage that authenticates the call later changes the identity they carry.
 */
export function createRestCall(init: RestCallInit): RestCall {
  const call: RestCall = {
    req: init.req,
    res: init.res,
    requestId: init.requestId,
    params: init.params,
    query: init.query ?? new URLSearchParams(),
    caller: init.caller ?? anonymousCaller,
    body: init.body,
    idempotencyKey: init.idempotencyKey ?? "",
    options: (overrides = {}) =>
      outgoingCallOptions(
        {
          caller: call.caller,
          requestId: init.requestId,
          upstreamTimeoutMs: init.ports.config.TRELLIS_UPSTREAM_TIMEOUT,
          traceFrom: init.forwardTrace ? init.req : undefined,
          signal: init.signal,
        },
        overrides.streaming ?? false,
      ),
    ports: init.ports,
  };
  return call;
}
