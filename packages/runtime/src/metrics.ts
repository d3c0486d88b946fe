/**
 * RED metrics of a Trellis service: per RPC, how many calls (rate), how many
 * failed (errors, by status code) and how long they took (duration), exported
 * over OTLP the same way as traces and chosen by the standard `OTEL_*`
 * variables.
 *
 * One instrument carries all three: the stable RPC semantic conventions'
 * `rpc.server.call.duration` histogram (seconds), with `rpc.system.name`,
 * `rpc.method`, `rpc.status_code` and, for server faults, `error.type`. Its
 * count per method is the rate, its count per non-OK status the errors, its
 * buckets the duration.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { type Histogram, type Meter, metrics } from "@opentelemetry/api";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import type { Resource } from "@opentelemetry/resources";
import {
  AggregationTemporality,
  ConsoleMetricExporter,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricReader,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from "@opentelemetry/sdk-metrics";
import {
  ATTR_ERROR_TYPE,
  ATTR_RPC_METHOD,
  ATTR_RPC_STATUS_CODE,
  ATTR_RPC_SYSTEM_NAME,
} from "@opentelemetry/semantic-conventions";

/** Where metrics go. `memory` keeps them in an {@link InMemoryMetricExporter} (tests). */
export type MetricExporterKind = "otlp" | "console" | "memory" | "none";

/** Options of {@link initMetrics}. */
export interface MetricsOptions {
  resource: Resource;
  /** Exporter, overriding the environment (see {@link metricExporterFromEnv}). */
  exporter?: MetricExporterKind | PushMetricExporter;
  env?: Readonly<Record<string, string | undefined>>;
  /** Register as the global meter provider (default true). */
  register?: boolean;
}

/** The running metrics pipeline of a process. */
export interface Metrics {
  readonly provider: MeterProvider | undefined;
  readonly exporter: MetricExporterKind | "custom";
  readonly memoryExporter: InMemoryMetricExporter | undefined;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * The exporter the standard variables ask for: `OTEL_SDK_DISABLED=true` →
 * none; `OTEL_METRICS_EXPORTER` (`otlp` | `console` | `none`); else OTLP when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` is
 * set; else none.
 */
export function metricExporterFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): MetricExporterKind {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return "none";
  const listed = env.OTEL_METRICS_EXPORTER?.split(",").map((s) => s.trim().toLowerCase());
  if (listed !== undefined && listed.length > 0 && listed[0] !== "") {
    if (listed.includes("otlp")) return "otlp";
    if (listed.includes("console")) return "console";
    return "none";
  }
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) return "otlp";
  return "none";
}

function positiveInt(value: string | undefined, fallback: number): number {
  const n = value === undefined ? Number.NaN : Number(value.trim());
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/**
 * Set up the meter provider of this process. With no exporter nothing is
 * installed (instruments stay the API's no-ops and cost nothing). The OTLP
 * exporter (HTTP, protobuf) reads its endpoint, headers, timeout and
 * temporality from the `OTEL_EXPORTER_OTLP_*` variables; the export interval
 * is `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60 000) and its timeout
 * `OTEL_METRIC_EXPORT_TIMEOUT` (default 30 000).
 */
export function initMetrics(options: MetricsOptions): Metrics {
  const env = options.env ?? process.env;
  const choice = options.exporter ?? metricExporterFromEnv(env);
  let exporter: PushMetricExporter | undefined;
  let memoryExporter: InMemoryMetricExporter | undefined;
  let kind: Metrics["exporter"];
  if (typeof choice === "string") {
    kind = choice;
    if (choice === "otlp") exporter = new OTLPMetricExporter();
    else if (choice === "console") exporter = new ConsoleMetricExporter();
    else if (choice === "memory")
      exporter = memoryExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  } else {
    kind = "custom";
    exporter = choice;
  }
  if (exporter === undefined) {
    return {
      provider: undefined,
      exporter: kind,
      memoryExporter,
      forceFlush: async () => {},
      shutdown: async () => {},
    };
  }
  const interval = positiveInt(env.OTEL_METRIC_EXPORT_INTERVAL, 60_000);
  const readers: MetricReader[] = [
    new PeriodicExportingMetricReader({
      exporter,
      exportIntervalMillis: interval,
      exportTimeoutMillis: Math.min(positiveInt(env.OTEL_METRIC_EXPORT_TIMEOUT, 30_000), interval),
    }),
  ];
  const provider = new MeterProvider({ resource: options.resource, readers });
  if (options.register !== false) metrics.setGlobalMeterProvider(provider);
  return {
    provider,
    exporter: kind,
    memoryExporter,
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

// ---------------------------------------------------------------------------
// The RED interceptor

const meterName = "@trellis/runtime";

/** Name of the per-RPC duration histogram (stable RPC semantic conventions). */
export const rpcServerDurationMetric = "rpc.server.call.duration";

/** gRPC spelling of each Connect code (the index): rpc.status_code of spans and metrics. */
export const grpcCodeNames: readonly string[] = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/**
 * Codes that mean the server failed (semconv): they mark a server span as an
 * error and get `error.type` on metrics; a NotFound or InvalidArgument is the
 * caller's problem.
 */
export const serverErrorCodes: ReadonlySet<Code> = new Set<Code>([
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
]);

// Boundaries in seconds recommended by the RPC conventions for call duration.
const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/** Options of {@link createServerMetricsInterceptor}. */
export interface MetricsInterceptorOptions {
  /** Meter to use; defaults to the global provider's `@trellis/runtime` meter. */
  meter?: Meter;
}

/**
 * Server interceptor recording one `rpc.server.call.duration` point per RPC.
 * A streaming call is measured until its response stream ends, or until the
 * call's signal aborts first (a client that left: Connect neither resumes
 * nor returns the handler's stream then, so its end would never be seen; the
 * point carries the abort's reason, CANCELLED for a client gone). Put it
 * outside the error interceptor so it sees the mapped status code.
 */
export function createServerMetricsInterceptor(
  options: MetricsInterceptorOptions = {},
): Interceptor {
  // Resolved on first use: the global provider may be installed after the
  // server is built (the API has no proxy meter provider).
  let histogram: Histogram | undefined;
  const instrument = (): Histogram => {
    histogram ??= (options.meter ?? metrics.getMeter(meterName)).createHistogram(
      rpcServerDurationMetric,
      {
        description: "Duration of RPCs served, by method and status code",
        unit: "s",
        advice: { explicitBucketBoundaries: durationBuckets },
      },
    );
    return histogram;
  };
  return (next) => async (req) => {
    const started = performance.now();
    const type = req.header.get("content-type");
    const base = {
      [ATTR_RPC_SYSTEM_NAME]: type?.startsWith("application/grpc") ? "grpc" : "connectrpc",
      [ATTR_RPC_METHOD]: `${req.method.parent.typeName}/${req.method.name}`,
    };
    let recorded = false;
    const onAbort = (): void => record(ConnectError.from(req.signal.reason, Code.Canceled));
    const record = (error?: unknown): void => {
      if (recorded) return;
      recorded = true;
      req.signal.removeEventListener("abort", onAbort);
      const seconds = (performance.now() - started) / 1000;
      if (error === undefined) {
        instrument().record(seconds, { ...base, [ATTR_RPC_STATUS_CODE]: "OK" });
        return;
      }
      const code = ConnectError.from(error).code;
      const name = grpcCodeNames[code] ?? "UNKNOWN";
      instrument().record(seconds, {
        ...base,
        [ATTR_RPC_STATUS_CODE]: name,
        ...(serverErrorCodes.has(code) ? { [ATTR_ERROR_TYPE]: name } : {}),
      });
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (error) {
      record(error);
      throw error;
    }
    if (!res.stream) {
      record();
      return res;
    }
    if (req.signal.aborted) onAbort();
    else req.signal.addEventListener("abort", onAbort, { once: true });
    const source = res.message;
    const wrapped: AsyncIterable<unknown> = {
      [Symbol.asyncIterator]() {
        const it = source[Symbol.asyncIterator]();
        return {
          next: async () => {
            try {
              const result = await it.next();
              if (result.done === true) record();
              return result;
            } catch (error) {
              record(error);
              throw error;
            }
          },
          return: async (value?: unknown) => {
            record(new ConnectError("stream closed by consumer", Code.Canceled));
            return it.return ? await it.return(value) : { done: true as const, value };
          },
          throw: async (error?: unknown) => {
            record(error);
            if (it.throw) return await it.throw(error);
            throw error;
          },
        };
      },
    };
    return { ...res, message: wrapped } as typeof res;
  };
}
