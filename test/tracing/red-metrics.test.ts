// RED metrics per RPC (packages/runtime/src/metrics.ts) without a mesh: the
// interceptor on an in-memory Connect router, read back through the SDK's
// in-memory exporter; and the OTEL_* selection of the exporter.
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import {
  AggregationTemporality,
  type HistogramMetricData,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { health } from "@trellis/contracts/grpc";
import {
  createServerMetricsInterceptor,
  metricExporterFromEnv,
  rpcServerDurationMetric,
} from "@trellis/runtime";
import { describe, expect, it } from "vitest";

const { HealthCheckResponse_ServingStatus: Status } = health;

function setup() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  const provider = new MeterProvider({ readers: [reader] });
  const transport = createRouterTransport(
    ({ service }) =>
      service(health.Health, {
        check(req) {
          if (req.service === "broken") throw new ConnectError("boom", Code.Internal);
          if (req.service === "missing") throw new ConnectError("no such", Code.NotFound);
          return { status: Status.SERVING };
        },
        async *watch(req) {
          yield { status: Status.SERVING };
          // "hang": a stream that waits for good (the client leaves meanwhile).
          if (req.service === "hang") await new Promise(() => {});
          yield { status: Status.NOT_SERVING };
        },
      }),
    {
      router: { interceptors: [createServerMetricsInterceptor({ meter: provider.getMeter("t") })] },
    },
  );
  const points = async () => {
    await provider.forceFlush();
    const last = exporter.getMetrics().at(-1);
    const metric = last?.scopeMetrics[0]?.metrics.find(
      (m) => m.descriptor.name === rpcServerDurationMetric,
    ) as HistogramMetricData | undefined;
    return metric?.dataPoints ?? [];
  };
  return { client: createClient(health.Health, transport), points, metric: exporter };
}

describe("RED metrics interceptor", () => {
  it("counts calls per method and status, marks server faults, measures duration", async () => {
    const { client, points } = setup();
    await client.check({ service: "" });
    await client.check({ service: "" });
    await expect(client.check({ service: "missing" })).rejects.toThrow();
    await expect(client.check({ service: "broken" })).rejects.toThrow();
    const byStatus = new Map(
      (await points()).map((p) => [String(p.attributes["rpc.status_code"]), p]),
    );
    expect([...byStatus.keys()].sort()).toEqual(["INTERNAL", "NOT_FOUND", "OK"]);
    const ok = byStatus.get("OK");
    expect(ok?.value.count).toBe(2);
    expect(ok?.attributes["rpc.method"]).toBe("grpc.health.v1.Health/Check");
    expect(ok?.attributes["rpc.system.name"]).toBe("connectrpc");
    expect(ok?.value.sum).toBeGreaterThan(0);
    // Only a server fault carries error.type; a caller's mistake does not.
    expect(byStatus.get("INTERNAL")?.attributes["error.type"]).toBe("INTERNAL");
    expect(byStatus.get("NOT_FOUND")?.attributes["error.type"]).toBeUndefined();
  });

  it("measures a server stream until it ends", async () => {
    const { client, points } = setup();
    const seen = [];
    for await (const r of client.watch({ service: "" })) seen.push(r.status);
    expect(seen).toEqual([Status.SERVING, Status.NOT_SERVING]);
    const [point] = await points();
    expect(point?.attributes["rpc.method"]).toBe("grpc.health.v1.Health/Watch");
    expect(point?.attributes["rpc.status_code"]).toBe("OK");
    expect(point?.value.count).toBe(1);
  });

  it("records a stream whose client left while it waited, as cancelled, once", async () => {
    const { client, points } = setup();
    const abort = new AbortController();
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const r of client.watch({ service: "hang" }, { signal: abort.signal })) {
          seen.push(r.status);
          abort.abort();
        }
      })(),
    ).rejects.toThrow();
    expect(seen).toEqual([Status.SERVING]);
    // The handler is still suspended and will never end: the abort recorded it.
    const recorded = await points();
    expect(recorded).toHaveLength(1);
    expect(recorded[0]?.attributes["rpc.status_code"]).toBe("CANCELLED");
    expect(recorded[0]?.attributes["error.type"]).toBeUndefined();
    expect(recorded[0]?.value.count).toBe(1);
  });

  it("records nothing and costs nothing without a meter provider", async () => {
    // No global provider was installed in this process: the API's no-op meter.
    const transport = createRouterTransport(
      ({ service }) => service(health.Health, { check: () => ({ status: Status.SERVING }) }),
      { router: { interceptors: [createServerMetricsInterceptor()] } },
    );
    const res = await createClient(health.Health, transport).check({ service: "" });
    expect(res.status).toBe(Status.SERVING);
  });
});

describe("metric exporter from the OTEL_* variables", () => {
  it("follows OTEL_METRICS_EXPORTER, the OTLP endpoints and OTEL_SDK_DISABLED", () => {
    expect(metricExporterFromEnv({})).toBe("none");
    expect(metricExporterFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toBe("otlp");
    expect(
      metricExporterFromEnv({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://c:4318/v1/metrics" }),
    ).toBe("otlp");
    expect(metricExporterFromEnv({ OTEL_METRICS_EXPORTER: "console" })).toBe("console");
    expect(
      metricExporterFromEnv({
        OTEL_METRICS_EXPORTER: "none",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c",
      }),
    ).toBe("none");
    expect(metricExporterFromEnv({ OTEL_METRICS_EXPORTER: " OTLP , console" })).toBe("otlp");
    expect(
      metricExporterFromEnv({ OTEL_SDK_DISABLED: "true", OTEL_METRICS_EXPORTER: "otlp" }),
    ).toBe("none");
  });
});
