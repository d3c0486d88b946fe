/**
 * Request ids: every response carries `x-request-id`; the id is the caller's
 * when it sent a sane one, otherwise generated. Handlers read it from the
 * Connect context values, and logs pick it up from the OpenTelemetry context.
 */
import { randomUUID } from "node:crypto";
import { type ContextKey, createContextKey, type HandlerContext } from "@connectrpc/connect";
import {
  type Context,
  createContextKey as createOtelContextKey,
  context as otelContext,
} from "@opentelemetry/api";

/** Header that carries the request id, on requests and on every response. */
export const requestIdHeader = "x-request-id";

/** Connect context key under which the server stores the request id of a call. */
export const requestIdKey: ContextKey<string> = createContextKey("", {
  description: "trellis request id",
});

/**
 * Connect context key under which the server stores the address of the peer
 * that sent a call ("" when unknown), e.g. to throttle failed authentication.
 */
export const peerAddressKey: ContextKey<string> = createContextKey("", {
  description: "trellis peer address",
});

// The same id in the OpenTelemetry context: that context follows async work made
// on behalf of the call (AsyncLocalStorage), so logs and outgoing calls find it
// without it being passed around.
const otelRequestIdKey = createOtelContextKey("trellis.request_id");

// Accept ids from callers only when they are short and printable: the id is
// echoed into headers and logs, so it must not smuggle in anything else.
const acceptable = /^[A-Za-z0-9._:/+=-]{1,128}$/;

/** The caller's request id when acceptable, otherwise a new random one. */
export function acceptOrCreateRequestId(incoming: string | string[] | null | undefined): string {
  return typeof incoming === "string" && acceptable.test(incoming) ? incoming : randomUUID();
}

/**
 * The request id of the call a handler is serving.
 *
 * @example
 *   async getTask(req, ctx) { log.info("loading", { request_id: requestIdOf(ctx) }); }
 */
export function requestIdOf(ctx: Pick<HandlerContext, "values">): string {
  return ctx.values.get(requestIdKey);
}

/** The request id stored in an OpenTelemetry context (the active one by default). */
export function requestIdFromContext(ctx: Context = otelContext.active()): string | undefined {
  const value = ctx.getValue(otelRequestIdKey);
  return typeof value === "string" ? value : undefined;
}

/** A copy of `ctx` that carries `requestId`. */
export function contextWithRequestId(ctx: Context, requestId: string): Context {
  return ctx.setValue(otelRequestIdKey, requestId);
}
