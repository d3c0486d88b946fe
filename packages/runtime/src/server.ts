/**
 * `createService`: the one function every Trellis service is built with.
 *
 * One TCP port serves Connect, gRPC and gRPC-Web over HTTP/2 cleartext (h2c)
 * and over HTTP/1.1, plus an optional plain-HTTP handler (the gateway's REST /
 * SSE surface): a `net.Server` reads the first bytes of each connection and
 * hands the socket to an `http2` server when they are the HTTP/2 client
 * preface, to an `http` server otherwise (TOOLCHAIN.md, "Connect on Node":
 * Node's h2c server does not also speak HTTP/1.1).
 *
 * Every service also gets gRPC health, server reflection (v1 + v1alpha), a
 * request id on every response, a server span per RPC, the error mapping
 * interceptor, and a graceful shutdown that drains in-flight calls.
 */
import { type EventEmitter, setMaxListeners } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type { Duplex } from "node:stream";
import type { DescFile, DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import { errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { Tracer } from "@opentelemetry/api";
import { file_trellis_core_v1_error } from "@trellis/contracts/core";
import { health, reflectionV1, reflectionV1alpha } from "@trellis/contracts/grpc";
import { createErrorInterceptor } from "./error-interceptor.js";
import {
  createHealthImpl,
  HealthMonitor,
  type HealthOptions,
  type HealthReporter,
} from "./health.js";
import type { HttpRequest, HttpResponse } from "./http-types.js";
import { type RequestLimits, requestLimitsFromEnv } from "./limits.js";
import { createLogger, type Logger } from "./logger.js";
import { createServerMetricsInterceptor } from "./metrics.js";
import { useBufferUtf8Encoder } from "./protobuf-text.js";
import { typed, typedRpcError } from "./protocol-errors.js";
import { createReflectionImpls, ReflectionIndex } from "./reflection.js";
import { afterResponse } from "./request-body.js";
import { createRequestChecksInterceptor, fieldCapsFromEnv } from "./request-checks.js";
import {
  acceptOrCreateRequestId,
  peerAddressKey,
  requestIdHeader,
  requestIdKey,
} from "./request-id.js";
import { createRpcHandler } from "./rpc-adapter.js";
import { structureLimitsFromEnv } from "./structure-limits.js";
import { createServerTracingInterceptor } from "./telemetry.js";

export type { HttpRequest, HttpResponse };

/**
 * A plain-HTTP handler, tried for every request that is not an RPC. Return
 * `true` when it handled (or is handling) the request, `false` to let the
 * server answer 404. The `x-request-id` response header is already set.
 */
export type HttpHandler = (req: HttpRequest, res: HttpResponse) => boolean | Promise<boolean>;

/** Handler for HTTP/1.1 `Upgrade` requests (WebSocket). */
export type UpgradeHandler = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;

/** Something to close on shutdown (a NATS connection, a database pool). */
export type Closer = () => unknown;

/** Options of {@link createService}. */
export interface ServiceOptions {
  /** Service name, used in logs (`tasks`, `gateway`). */
  name: string;
  /** Register Connect services: `(router) => router.service(TaskService, impl)`. */
  routes?: (router: ConnectRouter) => void;
  /** Plain-HTTP handler for non-RPC paths (REST, SSE, static UI). */
  http?: HttpHandler;
  /** HTTP/1.1 upgrade handler (WebSocket); without it upgrades are refused. */
  upgrade?: UpgradeHandler;
  /**
   * Extra server interceptors (auth, metrics), run inside tracing and error
   * mapping: a domain error they throw is mapped like a handler's. They do not
   * run for the built-in health and reflection services.
   */
  interceptors?: Interceptor[];
  /** Dependency probes and polling of the health service. */
  health?: HealthOptions;
  /**
   * Extra files for server reflection besides the served services' files
   * (which are always included with their imports). `trellis/core/v1/error.proto`
   * is always included so clients can decode error details.
   */
  reflection?: { files?: readonly DescFile[] };
  /** Logger; defaults to `createLogger({ service: name })`. */
  logger?: Logger;
  /**
   * Connect router options (protocol switches, timeouts, compression). Size,
   * nesting and JSON / binary parsing come from {@link ServiceOptions.limits}.
   */
  connect?: Omit<
    ConnectRouterOptions,
    "interceptors" | "shutdownSignal" | "readMaxBytes" | "jsonOptions" | "binaryOptions"
  >;
  /**
   * Request size and nesting limits; unset fields are read from `env`
   * (`TRELLIS_MAX_BODY_BYTES`, `TRELLIS_MAX_NESTING_DEPTH`), else the defaults.
   */
  limits?: Partial<RequestLimits>;
  /** Environment the limits are read from; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * A binary RPC request whose bytes skip the structure scan: one from inside
   * the mesh (a valid service credential for its path), which carries what
   * its own edge already scanned. Its interceptors still verify the call.
   */
  trustedRequest?: (req: HttpRequest) => boolean;
  /** Tracer for server spans; defaults to the global provider's. */
  tracer?: Tracer;
}

/** Options of {@link TrellisService.listen}. */
export interface ListenOptions {
  /** Interface to bind; default all interfaces. */
  host?: string;
  /** Port; default 0 (any free port). */
  port?: number;
}

/** Where a service listens. */
export interface ServiceAddress {
  host: string;
  port: number;
  /** `http://host:port` usable by a local client (the wildcard host becomes 127.0.0.1). */
  url: string;
}

/** Options of {@link TrellisService.close}. */
export interface CloseOptions {
  /**
   * How long in-flight calls and streams may run before they are cancelled
   * and their connections closed (default 10 000 ms).
   */
  graceMs?: number;
  /**
   * How long each closer may run before shutdown logs it as overdue and goes
   * on to the next (default 10 000 ms): a dependency that never answers
   * cannot hold the process open.
   */
  closerTimeoutMs?: number;
}

/** A service built by {@link createService}. */
export interface TrellisService {
  readonly name: string;
  readonly logger: Logger;
  /** The health this service reports. */
  readonly health: HealthReporter;
  /** The request limits in force. */
  readonly limits: Readonly<RequestLimits>;
  /**
   * Aborted when {@link TrellisService.close} starts. Long-lived streams
   * (subscriptions) should end on it rather than wait for the grace period.
   */
  readonly closing: AbortSignal;
  /** The Node request handler, for embedding or tests without a socket. */
  readonly handler: (req: HttpRequest, res: HttpResponse) => void;
  /** Bind and start serving; resolves after the first dependency probe round. */
  listen(options?: ListenOptions): Promise<ServiceAddress>;
  /** The bound address, once listening. */
  address(): ServiceAddress | undefined;
  /** Run `closer` at shutdown, after requests drained; closers run in reverse order of registration. */
  onClose(closer: Closer, name?: string): void;
  /**
   * Graceful shutdown: stop accepting connections, report NOT_SERVING, let
   * in-flight calls finish (HTTP/2 clients get GOAWAY), cancel what is left
   * after `graceMs`, then run the closers. Idempotent.
   */
  close(options?: CloseOptions): Promise<void>;
}

// The HTTP/2 client connection preface (RFC 9113 §3.4).
const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
// A connection that sends nothing is dropped after this long.
const sniffTimeoutMs = 10_000;
// After the grace period, how long cancelled calls get to send their final status.
const cancelWindowMs = 250;

const kRequestId = Symbol("trellis.requestId");
type TaggedRequest = HttpRequest & { [kRequestId]?: string };

/** The path and query of an absolute-form request target, undefined when it is not one. */
function originForm(target: string): string | undefined {
  try {
    const url = new URL(target);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    return `${url.pathname}${url.search}`;
  } catch {
    return undefined;
  }
}

/**
 * The request id the server assigned to a plain-HTTP request (for {@link HttpHandler}s).
 * RPC handlers use `requestIdOf(ctx)` instead.
 */
export function httpRequestId(req: HttpRequest): string {
  return (req as TaggedRequest)[kRequestId] ?? "";
}

function distinctServices(handlers: readonly { service: DescService }[]): DescService[] {
  const byName = new Map<string, DescService>();
  for (const h of handlers) byName.set(h.service.typeName, h.service);
  return [...byName.values()];
}

/**
 * Build a service: routes, health, reflection, interceptors, one port for
 * every protocol. Nothing is bound until {@link TrellisService.listen}.
 *
 * @example
 *   const service = createService({
 *     name: "tasks",
 *     routes: (router) => router.service(TaskService, createTaskHandlers(deps)),
 *     health: { dependencies: [{ name: "postgres", check: () => deps.db.ping() }] },
 *   });
 *   service.onClose(() => deps.db.destroy(), "postgres");
 *   const { url } = await service.listen({ port: config.PORT });
 */
export function createService(options: ServiceOptions): TrellisService {
  // Process-wide: protobuf's string encoder on Buffer (see protobuf-text.ts).
  useBufferUtf8Encoder();
  const logger = options.logger ?? createLogger({ service: options.name });
  const monitor = new HealthMonitor(options.health ?? {}, logger);
  const limits: RequestLimits = {
    ...requestLimitsFromEnv(options.env ?? process.env),
    ...options.limits,
  };
  const closing = new AbortController();
  // Aborted when the grace period ends: handler contexts' signals follow it.
  const cancelAll = new AbortController();
  // Every call in flight listens to cancelAll (Connect links each handler
  // context to the shutdown signal and unlinks it when the call ends), and
  // every long-lived stream to closing: many listeners is their normal state,
  // not a leak, so Node's warning above 10 would be noise.
  setMaxListeners(0, cancelAll.signal, closing.signal);
  const closers: { fn: Closer; name: string }[] = [];

  let served: DescService[] = [];
  let index: ReflectionIndex | undefined;
  const reflectionFiles = [file_trellis_core_v1_error, ...(options.reflection?.files ?? [])];

  const errorInterceptor = createErrorInterceptor(logger, limits);
  const requestChecks = createRequestChecksInterceptor(
    fieldCapsFromEnv(options.env ?? process.env),
  );
  const interceptors: Interceptor[] = [
    // Outermost: the span sees the final, mapped status code.
    createServerTracingInterceptor(options.tracer ? { tracer: options.tracer } : {}),
    // RED metrics per RPC, also outside the error mapping.
    createServerMetricsInterceptor(),
    errorInterceptor,
    ...(options.interceptors ?? []),
    // Innermost: only requests that passed the service's own checks (auth) are looked into.
    requestChecks,
  ];

  const adapter = createRpcHandler({
    ...options.connect,
    interceptors,
    shutdownSignal: cancelAll.signal,
    limits,
    structure: structureLimitsFromEnv(options.env ?? process.env, limits.maxNestingDepth),
    ...(options.trustedRequest ? { trustedRequest: options.trustedRequest } : {}),
    logger,
    requestIdOf: httpRequestId,
    contextValues: (req) =>
      createContextValues()
        .set(requestIdKey, (req as TaggedRequest)[kRequestId] ?? "")
        .set(peerAddressKey, req.socket?.remoteAddress ?? ""),
    fallback: serveHttp,
    routes(router) {
      options.routes?.(router);
      const own = distinctServices(router.handlers);
      monitor.register(own.map((s) => s.typeName));
      const taken = new Set(own.map((s) => s.typeName));
      // Built-ins get only error mapping: probes and schema discovery must not
      // depend on the service's auth interceptors, nor fill traces with probe spans.
      const builtin = { interceptors: [errorInterceptor, requestChecks] };
      if (!taken.has(health.Health.typeName)) {
        router.service(health.Health, createHealthImpl(monitor), builtin);
      }
      const reflection = createReflectionImpls(() => {
        index ??= new ReflectionIndex(served, reflectionFiles);
        return index;
      });
      if (!taken.has(reflectionV1.ServerReflection.typeName)) {
        router.service(reflectionV1.ServerReflection, reflection.v1, builtin);
      }
      if (!taken.has(reflectionV1alpha.ServerReflection.typeName)) {
        router.service(reflectionV1alpha.ServerReflection, reflection.v1alpha, builtin);
      }
      served = distinctServices(router.handlers);
    },
  });

  let draining = false;
  let inFlight = 0;
  let onIdle: (() => void) | undefined;
  // Shared listener (no closure per request).
  function requestDone(): void {
    inFlight--;
    if (draining) {
      http1.closeIdleConnections();
      if (inFlight === 0) onIdle?.();
    }
  }

  const handler = (req: HttpRequest, res: HttpResponse): void => {
    const id = acceptOrCreateRequestId(req.headers[requestIdHeader]);
    (req as TaggedRequest)[kRequestId] = id;
    // Set before the adapter writes: writeHead merges it, for every protocol, errors included.
    res.setHeader(requestIdHeader, id);
    inFlight++;
    (res as EventEmitter).once("close", requestDone);
    // Over HTTP/2 the response's own 'finish' waits for the whole stream to
    // close; the stream's writable side finishing is "the response is sent".
    if ("stream" in req) req.stream.once("finish", () => afterResponse(req, limits.maxBodyBytes));
    // HTTP/1.1 has no GOAWAY: tell keep-alive clients to reconnect (elsewhere).
    if (draining && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    // Handlers read req.url as a path: turn an absolute-form target
    // (`http://host/path`, which servers must accept) into one, refuse others.
    if (!req.url?.startsWith("/")) {
      const path = originForm(req.url ?? "");
      if (path === undefined) {
        sendJsonError(
          req,
          res,
          400,
          typed(Code.InvalidArgument, "invalid_request", "malformed request target"),
        );
        return;
      }
      req.url = path;
    }
    try {
      adapter(req, res);
    } catch (error) {
      // Whatever a request does, it must not take the process down with it.
      httpFailed(req, res, error);
    }
  };

  function serveHttp(req: HttpRequest, res: HttpResponse): void {
    const custom = options.http;
    if (custom === undefined) {
      notFound(req, res);
      return;
    }
    let result: boolean | Promise<boolean>;
    try {
      result = custom(req, res);
    } catch (error) {
      httpFailed(req, res, error);
      return;
    }
    if (typeof result === "boolean") {
      if (!result) notFound(req, res);
      return;
    }
    result.then(
      (handled) => {
        if (!handled) notFound(req, res);
      },
      (error: unknown) => httpFailed(req, res, error),
    );
  }

  /**
   * No RPC and no HTTP route at this path: `Unimplemented` with an
   * ErrorDetail, in the protocol the request speaks (gRPC and gRPC-Web:
   * status in the headers of an otherwise empty response; anything else: 404
   * with a Connect JSON error body).
   */
  function notFound(req: HttpRequest, res: HttpResponse): void {
    if (res.headersSent) return;
    const path = req.url?.split("?", 1)[0] ?? "";
    const error = typedRpcError(
      new ConnectError(
        `no RPC or route at ${JSON.stringify(path.slice(0, 200))}`,
        Code.Unimplemented,
      ),
      { rpc: path.slice(0, 200), requestId: httpRequestId(req), logger, limits },
    );
    const type = String(req.headers["content-type"] ?? "");
    if (/^application\/grpc(?:-web)?(?:\+|;|$)/i.test(type)) {
      res.statusCode = 200;
      res.setHeader(
        "content-type",
        type.toLowerCase().startsWith("application/grpc-web")
          ? "application/grpc-web+proto"
          : "application/grpc+proto",
      );
      setTrailerStatus(new Headers(), error).forEach((value, key) => {
        res.setHeader(key, value);
      });
      res.end();
      return;
    }
    sendJsonError(req, res, 404, error);
  }

  /** A Connect JSON error body (the shape of a Connect unary error) with `status`. */
  function sendJsonError(
    req: HttpRequest,
    res: HttpResponse,
    status: number,
    error: ConnectError,
  ): void {
    const body = errorToJsonBytes(error, {});
    res.statusCode = status;
    res.setHeader("content-type", "application/json");
    res.setHeader("content-length", String(body.byteLength));
    if (req.method === "HEAD") res.end();
    else res.end(body);
  }

  function httpFailed(req: HttpRequest, res: HttpResponse, error: unknown): void {
    logger.error("http handler failed", {
      request_id: httpRequestId(req),
      method: req.method,
      path: req.url?.split("?", 1)[0],
      error,
    });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.statusCode = 500;
    res.setHeader("content-type", "text/plain; charset=utf-8");
    res.end(`internal error (request id ${httpRequestId(req)})\n`);
  }

  // --- one port, two HTTP versions ------------------------------------------

  const http1 = http.createServer(handler);
  http1.on(
    "upgrade",
    options.upgrade ?? ((_req: http.IncomingMessage, socket: Duplex) => socket.destroy()),
  );
  // A request Node's HTTP/1 parser refuses (bad request line, bad header,
  // headers too large) never reaches a handler; answer it with a typed error
  // too, then close (the connection's framing can no longer be trusted).
  http1.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
    const timedOut = error.code === "ERR_HTTP_REQUEST_TIMEOUT";
    const status = tooLarge ? 431 : timedOut ? 408 : 400;
    const typedError = tooLarge
      ? typed(Code.ResourceExhausted, "payload_too_large", "the request headers are too large")
      : timedOut
        ? typed(Code.DeadlineExceeded, "deadline_exceeded", "the request was not received in time")
        : typed(Code.InvalidArgument, "invalid_request", "malformed HTTP request");
    const body = Buffer.from(errorToJsonBytes(typedError, {}));
    socket.end(
      Buffer.concat([
        Buffer.from(
          `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\nconnection: close\r\n\r\n`,
          "latin1",
        ),
        body,
      ]),
    );
  });
  // node:http starts its connection bookkeeping (request/headers timeouts,
  // closeIdleConnections) on 'listening'. This server never listens itself —
  // the net.Server below hands it sockets — so start the bookkeeping by hand.
  http1.emit("listening");

  const sessions = new Set<http2.ServerHttp2Session>();
  const http2Server = http2.createServer(handler);
  http2Server.on("session", (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    if (draining) session.close();
  });

  type SocketState = "sniffing" | "http1" | "http2";
  const sockets = new Map<net.Socket, SocketState>();
  let onSocketsClosed: (() => void) | undefined;
  function socketClosed(this: net.Socket): void {
    sockets.delete(this);
    if (sockets.size === 0) onSocketsClosed?.();
  }

  const listener = net.createServer({ noDelay: true }, (socket) => {
    sockets.set(socket, "sniffing");
    socket.once("close", socketClosed);
    if (draining) {
      socket.destroy();
      return;
    }
    let head: Buffer | undefined;
    const drop = (): void => {
      socket.destroy();
    };
    const onData = (chunk: Buffer): void => {
      head = head === undefined ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.length, preface.length);
      const isH2 = head.compare(preface, 0, n, 0, n) === 0;
      // An HTTP/1 request line never starts with "PRI "; wait for more bytes only
      // while what arrived could still be the preface.
      if (isH2 && head.length < preface.length) return;
      socket.off("data", onData);
      socket.off("error", drop);
      socket.off("end", drop);
      socket.off("timeout", drop);
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(head);
      sockets.set(socket, isH2 ? "http2" : "http1");
      (isH2 ? http2Server : http1).emit("connection", socket);
      process.nextTick(() => socket.resume());
    };
    // Until a server owns the socket its errors are ours: an unhandled 'error' would crash.
    socket.on("error", drop);
    socket.once("end", drop);
    socket.setTimeout(sniffTimeoutMs);
    socket.once("timeout", drop);
    socket.on("data", onData);
  });

  function address(): ServiceAddress | undefined {
    const bound = listener.address();
    if (bound === null || typeof bound === "string") return undefined;
    const wildcard = bound.address === "::" || bound.address === "0.0.0.0";
    const host = wildcard ? "127.0.0.1" : bound.address;
    const urlHost = host.includes(":") ? `[${host}]` : host;
    return { host: bound.address, port: bound.port, url: `http://${urlHost}:${bound.port}` };
  }

  async function listen(listenOptions: ListenOptions = {}): Promise<ServiceAddress> {
    if (draining) throw new Error(`service ${options.name} is closed`);
    if (listener.listening) throw new Error(`service ${options.name} is already listening`);
    const probed = monitor.start();
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen({ host: listenOptions.host, port: listenOptions.port ?? 0 }, () => {
        listener.off("error", reject);
        resolve();
      });
    });
    await probed;
    return address()!;
  }

  function waitIdle(ms: number): Promise<boolean> {
    if (inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        onIdle = undefined;
        resolve(false);
      }, ms);
      onIdle = () => {
        clearTimeout(timer);
        onIdle = undefined;
        resolve(true);
      };
    });
  }

  function waitSocketsClosed(ms: number): Promise<void> {
    if (sockets.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        onSocketsClosed = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      onSocketsClosed = done;
    });
  }

  async function shutdown(graceMs: number, closerBoundMs: number): Promise<void> {
    draining = true;
    closing.abort();
    monitor.shutdown();
    const listenerClosed = new Promise<void>((resolve) => {
      if (listener.listening) listener.close(() => resolve());
      else resolve();
    });
    // GOAWAY: HTTP/2 clients open no new streams here; open ones run to completion,
    // then Node closes the session (flushing what is left to write).
    for (const session of sessions) session.close();
    for (const [socket, state] of sockets) if (state === "sniffing") socket.destroy();
    http1.closeIdleConnections();

    if (!(await waitIdle(graceMs))) {
      logger.warn("shutdown grace period over; cancelling in-flight calls", {
        in_flight: inFlight,
        grace_ms: graceMs,
      });
      cancelAll.abort(new ConnectError("server is shutting down", Code.Unavailable));
      await waitIdle(cancelWindowMs);
    }
    // Graceful first (FIN after the last bytes are flushed), then force what is left:
    // destroying a socket right away could cut off a response's final frames.
    for (const [socket, state] of sockets) if (state === "http1") socket.end();
    await waitSocketsClosed(cancelWindowMs);
    for (const session of sessions) session.destroy();
    for (const socket of sockets.keys()) socket.destroy();
    await listenerClosed;
    http1.close();

    // A closer that hangs (a dependency that never answers) must not hold the
    // shutdown forever: after its bound the next one runs, and says so.
    for (const closer of closers.reverse()) {
      let timer: NodeJS.Timeout | undefined;
      const overdue = new Promise<"overdue">((resolve) => {
        timer = setTimeout(() => resolve("overdue"), closerBoundMs);
      });
      try {
        if ((await Promise.race([closer.fn(), overdue])) === "overdue") {
          logger.error("closer did not finish during shutdown; going on without it", {
            closer: closer.name,
            bound_ms: closerBoundMs,
          });
        }
      } catch (error) {
        logger.error("closer failed during shutdown", { closer: closer.name, error });
      } finally {
        clearTimeout(timer);
      }
    }
  }

  let closed: Promise<void> | undefined;
  return {
    name: options.name,
    logger,
    health: monitor,
    limits,
    closing: closing.signal,
    handler,
    listen,
    address,
    onClose(fn, name = `closer ${closers.length + 1}`) {
      closers.push({ fn, name });
    },
    close(closeOptions = {}) {
      closed ??= shutdown(closeOptions.graceMs ?? 10_000, closeOptions.closerTimeoutMs ?? 10_000);
      return closed;
    },
  };
}
