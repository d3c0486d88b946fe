import { getEventListeners } from "node:events";
import { create } from "@bufbuild/protobuf";
import { createClient, createContextValues, createRouterTransport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { health } from "@trellis/contracts/grpc";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createServiceClient } from "../src/client.js";
import { requestIdOf } from "../src/request-id.js";
import { createService, type TrellisService } from "../src/server.js";
import {
  createServerTracingInterceptor,
  extractTraceContext,
  initTelemetry,
  injectTraceHeaders,
  type Telemetry,
} from "../src/telemetry.js";
import { captureLogger, sleep, testHealthImpl } from "./support.js";

const { SERVING } = health.HealthCheckResponse_ServingStatus;

describe("tracing", () => {
  let telemetry: Telemetry;
  const upstreamLog = captureLogger("upstream");
  let downstream: TrellisService;
  let upstream: TrellisService;
  let upstreamUrl: string;
  const seenDownstream: { requestId: string; traceId: string | undefined }[] = [];
  let handlerSpanId: string | undefined;
  let streamSpanIds: (string | undefined)[] = [];

  beforeAll(async () => {
    telemetry = initTelemetry({ serviceName: "trellis-test", exporter: "memory" });

    downstream = createService({
      name: "downstream",
      logger: captureLogger("downstream").logger,
      routes: (router) =>
        router.service(health.Health, {
          check(_req, ctx) {
            seenDownstream.push({
              requestId: requestIdOf(ctx),
              traceId: trace.getActiveSpan()?.spanContext().traceId,
            });
            return { status: SERVING };
          },
        }),
    });
    const { url: downstreamUrl } = await downstream.listen({ host: "127.0.0.1" });
    const next = createServiceClient(health.Health, downstreamUrl);

    const impl = testHealthImpl();
    upstream = createService({
      name: "upstream",
      logger: upstreamLog.logger,
      routes: (router) =>
        router.service(health.Health, {
          ...impl,
          async check(req, ctx) {
            if (req.service !== "forward") return impl.check!(req, ctx);
            handlerSpanId = trace.getActiveSpan()?.spanContext().spanId;
            upstreamLog.logger.info("forwarding");
            return await next.check({ service: "" });
          },
          async *watch(req) {
            if (req.service === "ticker") {
              // A stream that never ends on its own and ignores its signal.
              for (;;) {
                yield { status: SERVING };
                await sleep(5);
              }
            }
            // Each step of a streaming handler runs inside the server span.
            streamSpanIds.push(trace.getActiveSpan()?.spanContext().spanId);
            yield { status: SERVING };
            await new Promise((r) => setTimeout(r, 5));
            streamSpanIds.push(trace.getActiveSpan()?.spanContext().spanId);
            yield { status: SERVING };
          },
        }),
    });
    ({ url: upstreamUrl } = await upstream.listen({ host: "127.0.0.1" }));
  });

  afterAll(async () => {
    await upstream.close({ graceMs: 500 });
    await downstream.close({ graceMs: 500 });
    await telemetry.shutdown();
  });

  beforeEach(() => {
    telemetry.memoryExporter!.reset();
    seenDownstream.length = 0;
    streamSpanIds = [];
  });

  const spans = (): ReadableSpan[] => telemetry.memoryExporter!.getFinishedSpans();
  const byKind = (kind: SpanKind) => spans().filter((s) => s.kind === kind);

  it("continues the caller's trace: client span → server span → downstream call", async () => {
    const client = createServiceClient(health.Health, upstreamUrl);
    const tracer = trace.getTracer("test");
    const rootTraceId = await tracer.startActiveSpan("test root", async (root) => {
      await client.check({ service: "forward" }, { headers: { "x-request-id": "req-trace-1" } });
      root.end();
      return root.spanContext().traceId;
    });

    const all = spans();
    expect(new Set(all.map((s) => s.spanContext().traceId))).toEqual(new Set([rootTraceId]));
    expect(all[0]?.resource.attributes["service.name"]).toBe("trellis-test");
    const [outerClient, innerClient] = byKind(SpanKind.CLIENT).sort(
      (a, b) => a.startTime[1] - b.startTime[1] + (a.startTime[0] - b.startTime[0]) * 1e9,
    );
    const servers = byKind(SpanKind.SERVER);
    expect(servers).toHaveLength(2);
    const upstreamServer = servers.find(
      (s) => s.parentSpanContext?.spanId === outerClient?.spanContext().spanId,
    );
    expect(upstreamServer).toBeDefined();
    expect(upstreamServer!.spanContext().spanId).toBe(handlerSpanId);
    expect(upstreamServer!.name).toBe("grpc.health.v1.Health/Check");
    expect(upstreamServer!.attributes).toMatchObject({
      "rpc.system.name": "grpc",
      "rpc.method": "grpc.health.v1.Health/Check",
      "rpc.status_code": "OK",
    });
    // The downstream call is a child of the upstream server span.
    expect(innerClient?.parentSpanContext?.spanId).toBe(upstreamServer!.spanContext().spanId);

    // One request id follows the request across services; logs carry both ids.
    expect(seenDownstream).toEqual([{ requestId: "req-trace-1", traceId: rootTraceId }]);
    const line = upstreamLog.lines.find((l) => l.msg === "forwarding");
    expect(line).toMatchObject({
      request_id: "req-trace-1",
      trace_id: rootTraceId,
      span_id: handlerSpanId,
    });
  });

  it("starts a new trace when the caller sends none, and labels Connect calls", async () => {
    const res = await fetch(`${upstreamUrl}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    const [server] = byKind(SpanKind.SERVER);
    expect(server?.parentSpanContext).toBeUndefined();
    expect(server?.attributes["rpc.system.name"]).toBe("connectrpc");
  });

  it("records the status: caller errors leave the server span unset, server errors mark it", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: upstreamUrl }));
    await client.check({ service: "boom" }).catch(() => {});
    await client.check({ service: "crash" }).catch(() => {});
    const [notFound, internal] = byKind(SpanKind.SERVER);
    expect(notFound?.attributes["rpc.status_code"]).toBe("NOT_FOUND");
    expect(notFound?.status.code).toBe(SpanStatusCode.UNSET);
    expect(internal?.attributes["rpc.status_code"]).toBe("INTERNAL");
    expect(internal?.attributes["error.type"]).toBe("INTERNAL");
    expect(internal?.status.code).toBe(SpanStatusCode.ERROR);
    expect(internal?.events.some((e) => e.name === "exception")).toBe(true);
  });

  it("ends a streaming call's span when the stream ends, with the handler inside it", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: upstreamUrl }));
    let count = 0;
    for await (const _ of client.watch({ service: "" })) count++;
    expect(count).toBe(2);
    const [server] = byKind(SpanKind.SERVER);
    expect(server?.name).toBe("grpc.health.v1.Health/Watch");
    expect(server?.attributes["rpc.status_code"]).toBe("OK");
    expect(streamSpanIds).toEqual([server?.spanContext().spanId, server?.spanContext().spanId]);
  });

  it("ends the span of a stream the client leaves between messages as CANCELLED, not a server error", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: upstreamUrl }));
    const abort = new AbortController();
    const messages = client
      .watch({ service: "ticker" }, { signal: abort.signal })
      [Symbol.asyncIterator]();
    expect((await messages.next()).value?.status).toBe(SERVING);
    abort.abort();

    // The handler's next write fails on the reset stream and Connect throws
    // that ("The stream has been destroyed") into the stream, which would pass
    // for an UNKNOWN server error: the span must already have ended on the
    // call's signal, with the reason the client gave.
    await vi.waitFor(() => expect(byKind(SpanKind.SERVER)).toHaveLength(1));
    await sleep(50);
    const servers = byKind(SpanKind.SERVER);
    expect(servers).toHaveLength(1);
    expect(servers[0]?.name).toBe("grpc.health.v1.Health/Watch");
    // semconv: CANCELLED is the caller's doing, not a server error.
    expect(servers[0]?.attributes["rpc.status_code"]).toBe("CANCELLED");
    expect(servers[0]?.attributes["error.type"]).toBeUndefined();
    expect(servers[0]?.status.code).toBe(SpanStatusCode.UNSET);
    expect(servers[0]?.events).toEqual([]);
  });

  describe("in process, where Connect leaves a handler suspended at its yield", () => {
    let resumed = 0;
    const transport = createRouterTransport(
      (router) =>
        router.service(health.Health, {
          async *watch(req) {
            yield { status: SERVING };
            resumed++;
            if (req.service === "endless") for (;;) yield { status: SERVING };
          },
        }),
      { router: { interceptors: [createServerTracingInterceptor()] } },
    );
    const client = createClient(health.Health, transport);

    beforeEach(() => {
      resumed = 0;
    });

    it("ends the span once, as CANCELLED, when the client takes one message and aborts", async () => {
      const abort = new AbortController();
      const stream = client.watch({ service: "endless" }, { signal: abort.signal });
      for await (const res of stream) {
        expect(res.status).toBe(SERVING);
        break;
      }
      abort.abort();
      await sleep(20);
      // Connect never asked the handler for more, nor returned it: the
      // call's signal is the only thing that says the call is over.
      expect(resumed).toBe(0);
      const servers = byKind(SpanKind.SERVER);
      expect(servers).toHaveLength(1);
      expect(servers[0]?.attributes["rpc.status_code"]).toBe("CANCELLED");
      expect(servers[0]?.attributes["error.type"]).toBeUndefined();
      expect(servers[0]?.status.code).toBe(SpanStatusCode.UNSET);
    });

    it("ends the span once, as OK, when the stream finishes, and stops listening for an abort", async () => {
      // Driven directly: through a transport, Connect aborts the call's signal
      // as soon as the call is over, which would hide a listener left behind.
      const abort = new AbortController();
      const call = createServerTracingInterceptor()(async (req) => ({
        stream: true,
        service: req.service,
        method: health.Health.method.watch,
        header: new Headers(),
        trailer: new Headers(),
        message: (async function* () {
          yield create(health.HealthCheckResponseSchema, { status: SERVING });
        })(),
      }));
      const res = await call({
        stream: true,
        service: health.Health,
        method: health.Health.method.watch,
        requestMethod: "POST",
        url: "http://localhost/grpc.health.v1.Health/Watch",
        signal: abort.signal,
        header: new Headers(),
        contextValues: createContextValues(),
        message: (async function* () {
          yield create(health.HealthCheckRequestSchema);
        })(),
      });
      expect(res.stream).toBe(true);
      expect(getEventListeners(abort.signal, "abort")).toHaveLength(1);
      let count = 0;
      if (res.stream) for await (const _ of res.message) count++;
      expect(count).toBe(1);
      expect(getEventListeners(abort.signal, "abort")).toHaveLength(0);
      abort.abort();
      const servers = byKind(SpanKind.SERVER);
      expect(servers).toHaveLength(1);
      expect(servers[0]?.attributes["rpc.status_code"]).toBe("OK");
      expect(servers[0]?.status.code).toBe(SpanStatusCode.UNSET);
    });
  });

  it("does not trace the built-in health and reflection services", async () => {
    const plain = createService({ name: "plain", logger: captureLogger().logger });
    const { url } = await plain.listen({ host: "127.0.0.1" });
    try {
      const client = createClient(health.Health, createGrpcTransport({ baseUrl: url }));
      expect((await client.check({ service: "" })).status).toBe(SERVING);
      expect(byKind(SpanKind.SERVER)).toHaveLength(0);
    } finally {
      await plain.close({ graceMs: 500 });
    }
  });
});

describe("initTelemetry exporter choice", () => {
  for (const [env, expected] of [
    [{}, "none"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }, "otlp"],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }, "otlp"],
    [{ OTEL_TRACES_EXPORTER: "otlp" }, "otlp"],
    [{ OTEL_TRACES_EXPORTER: "console" }, "console"],
    [{ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }, "none"],
    [{ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }, "none"],
  ] as const) {
    it(`${JSON.stringify(env)} → ${expected}`, async () => {
      const t = initTelemetry({ serviceName: "x", env, register: false });
      expect(t.exporter).toBe(expected);
      await t.shutdown();
    });
  }
});

describe("trace context helpers", () => {
  it("round-trips through a get/set carrier (NATS headers) and a plain record", () => {
    const tracer = trace.getTracer("test");
    tracer.startActiveSpan("publish", (span) => {
      const natsLike = new Map<string, string>();
      injectTraceHeaders(natsLike);
      const traceparent = natsLike.get("traceparent");
      expect(traceparent).toBe(
        `00-${span.spanContext().traceId}-${span.spanContext().spanId}-0${span.spanContext().traceFlags}`,
      );

      const record: Record<string, string> = {};
      injectTraceHeaders(record);
      expect(record.traceparent).toBe(traceparent);

      for (const carrier of [natsLike, record]) {
        const extracted = trace.getSpanContext(extractTraceContext(carrier));
        expect(extracted?.traceId).toBe(span.spanContext().traceId);
        expect(extracted?.spanId).toBe(span.spanContext().spanId);
        expect(extracted?.isRemote).toBe(true);
      }
      span.end();
    });
  });

  it("treats missing headers as no parent", () => {
    expect(trace.getSpanContext(extractTraceContext(new Map()))).toBeUndefined();
    expect(trace.getSpanContext(extractTraceContext(undefined))).toBeUndefined();
    // NATS MsgHdrs.get returns "" for a missing key.
    const empty = { get: () => "", set: () => {} };
    expect(trace.getSpanContext(extractTraceContext(empty))).toBeUndefined();
  });
});
