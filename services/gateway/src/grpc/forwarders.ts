/**
 * Distributed mode: the gateway serves every public RPC service itself and
 * forwards each call to the service that owns it, so a generated client
 * pointed at the gateway can do everything the REST client can.
 *
 * Generic over `DescService`: unary and server-streaming methods are
 * forwarded (the public services have no client or bidi streams). The
 * authenticated caller travels in the `x-trellis-*` headers, with the request
 * id; the client tracing interceptor adds `traceparent`. Errors of the owning
 * service (a ConnectError with its ErrorDetail) pass through unchanged.
 */
import type { DescService } from "@bufbuild/protobuf";
import type {
  CallOptions,
  Client,
  ConnectRouter,
  HandlerContext,
  ServiceImpl,
} from "@connectrpc/connect";
import { callerOf, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import { requestIdHeader, requestIdOf } from "@trellis/runtime";

/** Options of {@link registerForwarders}. */
export interface ForwarderOptions {
  /** Timeout of forwarded unary calls when the caller set none. */
  defaultTimeoutMs?: number;
}

type AnyMethod = (request: unknown, options: CallOptions) => unknown;

/** Outgoing call options for a call being served: caller, request id, deadline, cancel. */
export function forwardOptions(
  ctx: HandlerContext,
  options: ForwarderOptions & { streaming?: boolean } = {},
): CallOptions {
  const headers = new Headers();
  const caller = callerOf(ctx);
  if (caller) setCallerHeaders(headers, caller);
  const requestId = requestIdOf(ctx);
  if (requestId !== "") headers.set(requestIdHeader, requestId);
  const remaining = ctx.timeoutMs();
  return {
    headers,
    signal: ctx.signal,
    // A stream has no deadline unless the caller gave one.
    timeoutMs: remaining ?? (options.streaming ? 0 : (options.defaultTimeoutMs ?? 30_000)),
  };
}

/** A forwarding implementation of `service` over `client`. */
export function createForwardingImpl<T extends DescService>(
  service: T,
  client: Client<T>,
  options: ForwarderOptions = {},
): Partial<ServiceImpl<T>> {
  const methods = client as unknown as Record<string, AnyMethod>;
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    const call = methods[method.localName];
    if (call === undefined) continue;
    if (method.methodKind === "unary") {
      impl[method.localName] = (request: unknown, ctx: HandlerContext) =>
        call(request, forwardOptions(ctx, options));
    } else if (method.methodKind === "server_streaming") {
      impl[method.localName] = async function* (request: unknown, ctx: HandlerContext) {
        yield* call(
          request,
          forwardOptions(ctx, { ...options, streaming: true }),
        ) as AsyncIterable<unknown>;
      };
    }
  }
  return impl as Partial<ServiceImpl<T>>;
}

/** Register forwarders for every service in `services`. */
export function registerForwarders(
  router: ConnectRouter,
  services: readonly DescService[],
  clients: ServiceClients,
  options: ForwarderOptions = {},
): void {
  for (const service of services) {
    router.service(service, createForwardingImpl(service, clients.get(service), options));
  }
}
