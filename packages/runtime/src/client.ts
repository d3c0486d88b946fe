/**
 * Clients for service-to-service calls: h2c transports with trace context
 * (and the request id of the call being served) propagated on every call.
 */
import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  type Http2SessionOptions,
} from "@connectrpc/connect-node";
import { CONNECT_RETRY_BUDGET_MS, createConnectRetryInterceptor } from "./connect-retry.js";
import { createClientTracingInterceptor } from "./telemetry.js";

/** Wire protocol for service-to-service calls. Both run over HTTP/2. */
export type ServiceProtocol = "grpc" | "connect";

/** Options of {@link createServiceTransport}. */
export interface ServiceTransportOptions extends Http2SessionOptions {
  /**
   * `grpc` (default here): what proxies and other languages understand best.
   * `connect`: the Connect protocol with the binary format — about half the
   * CPU per unary call on each side; what the distributed services use
   * between themselves by default (`TRELLIS_SERVICE_PROTOCOL`).
   */
  protocol?: ServiceProtocol;
  /** Interceptors run inside the tracing interceptor (so the client span covers them). */
  interceptors?: Interceptor[];
  /** Timeout applied to calls that set none. */
  defaultTimeoutMs?: number;
  /** Add the client tracing interceptor (default true). */
  tracing?: boolean;
  /**
   * How long a unary call keeps re-sending while the connection is refused
   * (the server is starting or restarting; nothing was delivered). Default
   * `TRELLIS_CONNECT_RETRY_MS` or 5 s; 0 turns it off. See `connect-retry.ts`.
   */
  connectRetryMs?: number;
}

function defaultConnectRetryMs(): number {
  const raw = process.env.TRELLIS_CONNECT_RETRY_MS;
  if (raw === undefined || raw === "") return CONNECT_RETRY_BUDGET_MS;
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms < 0) {
    throw new Error(`TRELLIS_CONNECT_RETRY_MS must be a number of milliseconds ≥ 0, got "${raw}"`);
  }
  return ms;
}

/**
 * An HTTP/2 (h2c for `http://` URLs) transport to another service. It keeps
 * one connection open: build it once in main.ts and share it.
 */
export function createServiceTransport(
  baseUrl: string,
  options: ServiceTransportOptions = {},
): Transport {
  const {
    protocol = "grpc",
    interceptors = [],
    tracing = true,
    connectRetryMs = defaultConnectRetryMs(),
    ...rest
  } = options;
  // Outermost first: one client span covers every re-send of a refused call.
  const all = [
    ...(tracing
      ? [createClientTracingInterceptor({ system: protocol === "grpc" ? "grpc" : "connectrpc" })]
      : []),
    createConnectRetryInterceptor(connectRetryMs),
    ...interceptors,
  ];
  if (protocol === "connect") {
    return createConnectTransport({
      ...rest,
      baseUrl,
      httpVersion: "2",
      useBinaryFormat: true,
      interceptors: all,
    });
  }
  return createGrpcTransport({ ...rest, baseUrl, interceptors: all });
}

/**
 * A typed client of `service`, at a base URL (a new transport is made with
 * `options`) or over an existing transport (`options` is then ignored).
 *
 * @example
 *   const tasks = createServiceClient(TaskService, config.TASKS_URL);
 *   const task = await tasks.getTask({ taskId }, { signal: ctx.signal });
 */
export function createServiceClient<T extends DescService>(
  service: T,
  target: string | Transport,
  options: ServiceTransportOptions = {},
): Client<T> {
  const transport = typeof target === "string" ? createServiceTransport(target, options) : target;
  return createClient(service, transport);
}

/** A client of each service of `S` over one transport, under the name `S` gives it. */
export type ClientsOf<S extends Record<string, DescService>> = { [K in keyof S]: Client<S[K]> };

/**
 * Clients of several services over one transport.
 *
 * @example
 *   const { agents, chat } = createClients(transport, { agents: AgentService, chat: ChatService });
 */
export function createClients<S extends Record<string, DescService>>(
  transport: Transport,
  services: S,
): ClientsOf<S> {
  const clients: Record<string, Client<DescService>> = {};
  for (const [name, service] of Object.entries(services)) {
    clients[name] = createClient(service, transport);
  }
  return clients as ClientsOf<S>;
}
