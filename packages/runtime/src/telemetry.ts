/**
 * OpenTelemetry for Trellis services: one tracer provider per process, W3C
 * `traceparent` carried through Connect headers and NATS message headers, a
 * server span per RPC and a client span per outgoing call.
 */
import {
  Code,
  ConnectError,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import {
  type Context,
  context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  InMemorySpanExporter,
  ParentBasedSampler,
  type Sampler,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import {
  ATTR_ERROR_TYPE,
  ATTR_RPC_METHOD,
  ATTR_RPC_STATUS_CODE,
  ATTR_RPC_SYSTEM_NAME,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from "@opentelemetry/semantic-conventions";
import {
  grpcCodeNames as codeNames,
  initMetrics,
  type MetricExporterKind,
  type Metrics,
  serverErrorCodes,
} from "./metrics.js";
import {
  contextWithRequestId,
  requestIdFromContext,
  requestIdHeader,
  requestIdKey,
} from "./request-id.js";

// ---------------------------------------------------------------------------
// Provider

/** Where finished spans go. `memory` keeps them in an {@link InMemorySpanExporter} (tests). */
export type TraceExporterKind = "otlp" | "console" | "memory" | "none";

/** Options of {@link initTelemetry}. */
export interface TelemetryOptions {
  /** `service.name` of the resource (`OTEL_SERVICE_NAME` overrides it, per the OTel spec). */
  serviceName: string;
  /** `service.version` of the resource. */
  serviceVersion?: string;
  /**
   * Exporter, overriding the environment. Without it the standard variables decide:
   * `OTEL_SDK_DISABLED=true` → none; `OTEL_TRACES_EXPORTER` (`otlp` | `console` | `none`);
   * else OTLP/proto when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
   * is set; else none. The OTLP exporter reads its endpoint, headers and timeout from
   * the same `OTEL_EXPORTER_OTLP_*` variables.
   */
  exporter?: TraceExporterKind | SpanExporter;
  /**
   * Metrics exporter, overriding the environment (`OTEL_METRICS_EXPORTER`,
   * else OTLP when an OTLP endpoint is set; see `metricExporterFromEnv`).
   */
  metricsExporter?: MetricExporterKind;
  /** Environment to read; defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Register as the global provider, with the AsyncLocalStorage context manager
   * and the W3C propagators (default true). Without a registered context manager
   * the active span does not follow `await`s.
   */
  register?: boolean;
}

/** The running telemetry of a process; shut it down last, after the server. */
export interface Telemetry {
  readonly provider: NodeTracerProvider;
  /** The exporter chosen (`none` when spans are not exported). */
  readonly exporter: TraceExporterKind | "custom";
  /** Finished spans, when the exporter is `memory`. */
  readonly memoryExporter: InMemorySpanExporter | undefined;
  /** The RED metrics pipeline (same resource, same OTLP endpoint). */
  readonly metrics: Metrics;
  /** Export every finished span and the current metrics now. */
  forceFlush(): Promise<void>;
  /** Flush and stop; later spans are dropped. */
  shutdown(): Promise<void>;
}

/**
 * Set up tracing for this process. Call once, first thing in `main.ts`.
 *
 * With no exporter the provider still runs, so trace ids exist for logs and
 * `traceparent` is still propagated; it samples only calls whose caller
 * sampled them (ParentBased(AlwaysOff)), so an unexported service costs
 * almost nothing yet never breaks a trace that passes through it.
 *
 * @example
 *   const telemetry = initTelemetry({ serviceName: "tasks" });
 *   // … on shutdown, after server.close():
 *   await telemetry.shutdown();
 */
export function initTelemetry(options: TelemetryOptions): Telemetry {
  const env = options.env ?? process.env;
  const choice = options.exporter ?? exporterFromEnv(env);
  let exporter: SpanExporter | undefined;
  let memoryExporter: InMemorySpanExporter | undefined;
  let kind: Telemetry["exporter"];
  if (typeof choice === "string") {
    kind = choice;
    if (choice === "otlp") exporter = new OTLPTraceExporter();
    else if (choice === "console") exporter = new ConsoleSpanExporter();
    else if (choice === "memory") exporter = memoryExporter = new InMemorySpanExporter();
  } else {
    kind = "custom";
    exporter = choice;
  }

  const spanProcessors: SpanProcessor[] = [];
  if (exporter !== undefined) {
    // Tests read spans right after a call: export them synchronously there.
    spanProcessors.push(
      kind === "memory" || kind === "console"
        ? new SimpleSpanProcessor(exporter)
        : new BatchSpanProcessor(exporter),
    );
  }
  const sampler: Sampler | undefined =
    exporter === undefined ? new ParentBasedSampler({ root: new AlwaysOffSampler() }) : undefined;

  const resource = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: options.serviceName,
    ...(options.serviceVersion ? { [ATTR_SERVICE_VERSION]: options.serviceVersion } : {}),
  }).merge(detectResources({ detectors: [envDetector] }));

  const provider = new NodeTracerProvider({
    resource,
    spanProcessors,
    // Undefined leaves the SDK default, which honours OTEL_TRACES_SAMPLER.
    ...(sampler ? { sampler } : {}),
  });
  if (options.register !== false) provider.register();
  const metrics = initMetrics({
    resource,
    env,
    ...(options.metricsExporter ? { exporter: options.metricsExporter } : {}),
    ...(options.register === false ? { register: false } : {}),
  });
  return {
    provider,
    exporter: kind,
    memoryExporter,
    metrics,
    forceFlush: async () => {
      await Promise.all([provider.forceFlush(), metrics.forceFlush()]);
    },
    shutdown: async () => {
      await Promise.all([provider.shutdown(), metrics.shutdown()]);
    },
  };
}

function exporterFromEnv(env: Readonly<Record<string, string | undefined>>): TraceExporterKind {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return "none";
  const listed = env.OTEL_TRACES_EXPORTER?.split(",").map((s) => s.trim().toLowerCase());
  if (listed !== undefined && listed.length > 0 && listed[0] !== "") {
    if (listed.includes("otlp")) return "otlp";
    if (listed.includes("console")) return "console";
    return "none";
  }
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return "otlp";
  return "none";
}

// ---------------------------------------------------------------------------
// Propagation

/**
 * Anything with header-like `get`/`set`: fetch `Headers`, NATS `MsgHdrs`,
 * `Map<string, string>`. `get` may return null/undefined/"" for absent keys.
 */
export interface TraceCarrier {
  get(key: string): string | string[] | null | undefined;
  set(key: string, value: string): unknown;
}

/** A plain header record, as Node's `IncomingMessage.headers` (lower-case keys). */
export type HeaderRecord = Record<string, string | string[] | undefined>;

// Our own W3C propagators, not the global API's: propagation must work the same
// whether or not initTelemetry ran (the global one is a no-op until registered).
const propagator = new CompositePropagator({
  propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
});

function isCarrier(value: TraceCarrier | HeaderRecord): value is TraceCarrier {
  return typeof value.get === "function" && typeof value.set === "function";
}

// Shared getter/setter objects: no allocation per call.
const carrierGetter: TextMapGetter<TraceCarrier> = {
  keys: () => [],
  get: (carrier, key) => {
    const value = carrier.get(key);
    return value === null || value === "" ? undefined : value;
  },
};
const carrierSetter: TextMapSetter<TraceCarrier> = {
  set: (carrier, key, value) => {
    carrier.set(key, value);
  },
};
const recordGetter: TextMapGetter<HeaderRecord> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key] ?? carrier[key.toLowerCase()],
};
const recordSetter: TextMapSetter<HeaderRecord> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/**
 * Write the W3C trace context (`traceparent`, `tracestate`, `baggage`) of `ctx`
 * (the active context by default) into `headers`. Works for Connect / fetch
 * `Headers`, NATS message headers and plain records. Returns `headers`.
 *
 * @example
 *   const h = natsHeaders();
 *   injectTraceHeaders(h);
 *   await js.publish(subject, data, { headers: h });
 */
export function injectTraceHeaders<T extends TraceCarrier | HeaderRecord>(
  headers: T,
  ctx: Context = context.active(),
): T {
  if (isCarrier(headers)) propagator.inject(ctx, headers, carrierSetter);
  else propagator.inject(ctx, headers, recordSetter);
  return headers;
}

/**
 * Read the W3C trace context from `headers` into a context derived from
 * `parent` (ROOT by default: an incoming message starts from its own trace, not
 * from whatever happens to be active). Use it as the parent of a consumer span.
 *
 * @example
 *   const parent = extractTraceContext(msg.headers);
 *   const span = tracer.startSpan("process event", { kind: SpanKind.CONSUMER }, parent);
 */
export function extractTraceContext(
  headers: TraceCarrier | HeaderRecord | undefined,
  parent: Context = ROOT_CONTEXT,
): Context {
  if (headers === undefined) return parent;
  return isCarrier(headers)
    ? propagator.extract(parent, headers, carrierGetter)
    : propagator.extract(parent, headers, recordGetter);
}

// ---------------------------------------------------------------------------
// Spans around work that is not an RPC

/** Options of {@link withSpan}. */
export interface WithSpanOptions {
  /** Span kind (default internal). */
  kind?: "internal" | "producer" | "consumer" | "client" | "server";
  attributes?: Record<string, string | number | boolean>;
  /** Parent context (default: the active one). */
  parent?: Context;
}

const spanKinds = {
  internal: SpanKind.INTERNAL,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
  client: SpanKind.CLIENT,
  server: SpanKind.SERVER,
} as const;

/**
 * Run `fn` inside a new span, child of the active span (or `parent`), and end
 * the span when `fn` settles; a rejection marks it as an error. Use it for a
 * hop that is not an RPC (a turn, a routing decision, a backend run, a model
 * call) so it shows in the trace with the calls it makes beneath it.
 *
 * @example
 *   const result = await withSpan("trellis.route", { attributes: { "trellis.task_id": id } },
 *     (span) => router.execute(request));
 */
export async function withSpan<T>(
  name: string,
  options: WithSpanOptions,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = trace.getTracer(tracerName).startSpan(
    name,
    {
      kind: spanKinds[options.kind ?? "internal"],
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    parent,
  );
  try {
    const result = await context.with(trace.setSpan(parent, span), fn, undefined, span);
    span.end();
    return result;
  } catch (error) {
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    if (error instanceof Error) span.recordException(error);
    span.end();
    throw error;
  }
}

// ---------------------------------------------------------------------------
// Interceptors

const tracerName = "@trellis/runtime";

/** Options of the tracing interceptors. */
export interface TracingInterceptorOptions {
  /** Tracer to use; defaults to the global provider's `@trellis/runtime` tracer. */
  tracer?: Tracer;
}

type RpcSystem = "grpc" | "connectrpc";

// Span name and attributes depend only on (method, wire protocol): build them
// once per method and reuse them for every call (the SDK copies attributes).
interface MethodSpanInfo {
  readonly name: string;
  readonly attributes: Readonly<Record<RpcSystem, Readonly<Record<string, string>>>>;
}
const methodInfo = new WeakMap<object, MethodSpanInfo>();

function spanInfo(method: { parent: { typeName: string }; name: string }): MethodSpanInfo {
  let info = methodInfo.get(method);
  if (info === undefined) {
    // semconv (stable RPC conventions): rpc.method is "<package.Service>/<Method>".
    const name = `${method.parent.typeName}/${method.name}`;
    info = {
      name,
      attributes: {
        grpc: { [ATTR_RPC_SYSTEM_NAME]: "grpc", [ATTR_RPC_METHOD]: name },
        connectrpc: { [ATTR_RPC_SYSTEM_NAME]: "connectrpc", [ATTR_RPC_METHOD]: name },
      },
    };
    methodInfo.set(method, info);
  }
  return info;
}

// gRPC and gRPC-Web requests say so in their content type; everything else the
// Connect router accepts (application/json, application/proto, GET) is Connect.
function systemOf(headers: Headers): RpcSystem {
  const type = headers.get("content-type");
  return type?.startsWith("application/grpc") ? "grpc" : "connectrpc";
}

function finishOk(span: Span): void {
  span.setAttribute(ATTR_RPC_STATUS_CODE, "OK");
  span.end();
}

function finishError(span: Span, error: unknown, kind: SpanKind): void {
  const connectError = ConnectError.from(error);
  const codeName = codeNames[connectError.code] ?? "UNKNOWN";
  span.setAttribute(ATTR_RPC_STATUS_CODE, codeName);
  if (kind === SpanKind.CLIENT || serverErrorCodes.has(connectError.code)) {
    span.setAttribute(ATTR_ERROR_TYPE, codeName);
    span.setStatus({ code: SpanStatusCode.ERROR, message: connectError.rawMessage });
    const cause = connectError.cause;
    if (cause instanceof Error) span.recordException(cause);
  }
  span.end();
}

/**
 * Wrap a response stream so that the span ends when the stream does, and so
 * that the handler's generator body runs inside the call's context (an async
 * generator runs in the context of whoever calls `next()`, which is the
 * protocol layer, outside `context.with`).
 *
 * The span also ends when the call's `signal` aborts first: a consumer that
 * stops early is often never seen by the stream. On a server, Connect neither
 * resumes nor returns the handler's generator once the client has left (it
 * stays suspended at its last `yield`), and Connect's promise client hides
 * `return()` from the caller. Whichever comes first ends the span, once; the
 * abort listener goes when the stream ends (Connect-node aborts a server
 * call's signal when the HTTP/2 stream closes, after a normal end as well).
 */
function traceStream<T>(
  source: AsyncIterable<T>,
  span: Span,
  ctx: Context,
  kind: SpanKind,
  signal: AbortSignal,
): AsyncIterable<T> {
  let open = true;
  // The reason says who ended the call: an RST_STREAM CANCEL or a client abort
  // is CANCELLED, a deadline DEADLINE_EXCEEDED, the server's shutdown UNAVAILABLE.
  const onAbort = (): void => close(ConnectError.from(signal.reason, Code.Canceled));
  const close = (error?: unknown): void => {
    if (!open) return;
    open = false;
    signal.removeEventListener("abort", onAbort);
    if (error === undefined) finishOk(span);
    else finishError(span, error, kind);
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      const it = source[Symbol.asyncIterator]();
      return {
        next: async () => {
          try {
            const result = await context.with(ctx, it.next, it);
            if (result.done === true) close();
            return result;
          } catch (error) {
            close(error);
            throw error;
          }
        },
        return: async (value?: unknown) => {
          // The consumer stopped early (client went away): the call was cancelled.
          close(new ConnectError("stream closed by consumer", Code.Canceled));
          return it.return ? await context.with(ctx, it.return, it, value) : { done: true, value };
        },
        throw: async (error?: unknown) => {
          close(error);
          if (it.throw) return await context.with(ctx, it.throw, it, error);
          throw error;
        },
      };
    },
  };
}

/**
 * Make the call with its span active: the span ends with a unary call, or
 * with the response stream ({@link traceStream}), recording how it ended.
 */
async function callInSpan(
  next: Parameters<Interceptor>[0],
  req: UnaryRequest | StreamRequest,
  span: Span,
  ctx: Context,
  kind: SpanKind,
): Promise<UnaryResponse | StreamResponse> {
  let res: UnaryResponse | StreamResponse;
  try {
    res = await context.with(ctx, next, undefined, req);
  } catch (error) {
    finishError(span, error, kind);
    throw error;
  }
  if (!res.stream) {
    finishOk(span);
    return res;
  }
  return { ...res, message: traceStream(res.message, span, ctx, kind, req.signal) };
}

/**
 * Server interceptor: one SERVER span per RPC, child of the caller's
 * `traceparent` when present, active while the handler runs (so logs and
 * outgoing calls see it). Also puts the call's request id into the
 * OpenTelemetry context. Attributes follow the stable RPC semantic
 * conventions: `rpc.system.name` (grpc | connectrpc), `rpc.method`
 * (`pkg.Service/Method`), `rpc.status_code` (`OK`, `NOT_FOUND`, …).
 */
export function createServerTracingInterceptor(
  options: TracingInterceptorOptions = {},
): Interceptor {
  const tracer = options.tracer ?? trace.getTracer(tracerName);
  return (next) => async (req) => {
    const parent = propagator.extract(ROOT_CONTEXT, req.header, headersGetter);
    const info = spanInfo(req.method);
    const span = tracer.startSpan(
      info.name,
      { kind: SpanKind.SERVER, attributes: info.attributes[systemOf(req.header)] },
      parent,
    );
    let ctx = trace.setSpan(parent, span);
    const requestId = req.contextValues.get(requestIdKey);
    if (requestId !== "") ctx = contextWithRequestId(ctx, requestId);
    return callInSpan(next, req, span, ctx, SpanKind.SERVER);
  };
}

/**
 * Client interceptor: one CLIENT span per outgoing call, child of the active
 * span; injects its `traceparent` into the request headers, and forwards the
 * request id of the call being served (if any) as `x-request-id`, so one id
 * follows a request across services.
 */
export function createClientTracingInterceptor(
  options: TracingInterceptorOptions & { system?: RpcSystem } = {},
): Interceptor {
  const tracer = options.tracer ?? trace.getTracer(tracerName);
  const system = options.system ?? "connectrpc";
  return (next) => async (req) => {
    const parent = context.active();
    const info = spanInfo(req.method);
    const span = tracer.startSpan(
      info.name,
      { kind: SpanKind.CLIENT, attributes: info.attributes[system] },
      parent,
    );
    const ctx = trace.setSpan(parent, span);
    propagator.inject(ctx, req.header, headersSetter);
    const requestId = requestIdFromContext(parent);
    if (requestId !== undefined && !req.header.has(requestIdHeader)) {
      req.header.set(requestIdHeader, requestId);
    }
    return callInSpan(next, req, span, ctx, SpanKind.CLIENT);
  };
}

const headersGetter: TextMapGetter<Headers> = {
  keys: (h) => [...h.keys()],
  get: (h, key) => h.get(key) ?? undefined,
};
const headersSetter: TextMapSetter<Headers> = {
  set: (h, key, value) => {
    h.set(key, value);
  },
};
