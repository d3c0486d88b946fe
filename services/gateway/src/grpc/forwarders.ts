/**
 * Distributed mode: the gateway serves every public RPC service itself and
 * forwards each call to the service that owns it, so a generated client
 * pointed at the gateway can do everything the REST client can.
 *
 * Generic over `DescService`: unary, server-streaming and bidi-streaming
 * methods are forwarded (bidi: WorkerService.WorkerChannel, both directions
 * as they come; the services' clients speak HTTP/2). The
 * authenticated caller travels in the `x-trellis-*` headers, with the request
 * id; the host's clients sign both with the service credentials and the
 * client tracing interceptor adds `traceparent`. Errors of the owning service
 * (a ConnectError with its ErrorDetail) pass through unchanged — except a
 * refused service credential, a deployment fault the client did not cause,
 * which becomes Unavailable.
 */
import type { DescService } from "@bufbuild/protobuf";
import {
  type CallOptions,
  type Client,
  ConnectError,
  type ConnectRouter,
  type HandlerContext,
  type ServiceImpl,
} from "@connectrpc/connect";
import { callerOf, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import { errorDetailOf, requestIdHeader, requestIdOf, TrellisError } from "@trellis/runtime";

/** Options of {@link registerForwarders}. */
export interface ForwarderOptions {
  /** Timeout of forwarded unary calls when the caller set none. */
  defaultTimeoutMs?: number;
  /**
   * Services forwarded to another service than the one their proto package
   * names, by full name (e.g. `trellis.adapters.v1.WorkerService` to
   * `tasks`).
   */
  owners?: Readonly<Record<string, string>>;
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
      impl[method.localName] = async (request: unknown, ctx: HandlerContext) => {
        try {
          return await call(request, forwardOptions(ctx, options));
        } catch (error) {
          throw credentialFault(error);
        }
      };
    } else if (method.methodKind === "bidi_streaming") {
      impl[method.localName] = async function* (
        requests: AsyncIterable<unknown>,
        ctx: HandlerContext,
      ) {
        try {
          yield* call(
            requests,
            forwardOptions(ctx, { ...options, streaming: true }),
          ) as AsyncIterable<unknown>;
        } catch (error) {
          throw credentialFault(error);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      impl[method.localName] = async function* (request: unknown, ctx: HandlerContext) {
        try {
          yield* call(
            request,
            forwardOptions(ctx, { ...options, streaming: true }),
          ) as AsyncIterable<unknown>;
        } catch (error) {
          throw credentialFault(error);
        }
      };
    }
  }
  return impl as Partial<ServiceImpl<T>>;
}

/** A refused service credential (domain `mesh`) as Unavailable; anything else as is. */
function credentialFault(error: unknown): unknown {
  if (error instanceof ConnectError && errorDetailOf(error)?.domain === "mesh") {
    return new TrellisError({
      reason: "service_unavailable",
      message: "an internal service is unavailable; retry later",
      metadata: { reason: "service_credential_refused" },
      cause: error,
    });
  }
  return error;
}

/** Register forwarders for every service in `services`. */
export function registerForwarders(
  router: ConnectRouter,
  services: readonly DescService[],
  clients: ServiceClients,
  options: ForwarderOptions = {},
): void {
  for (const service of services) {
    const client = clients.get(service, options.owners?.[service.typeName]);
    router.service(service, createForwardingImpl(service, client, options));
  }
}
