// Tracing and RED metrics end to end (issue 9): the mesh in distributed mode —
// every service its own process, and chat in the tasks process as `trellis
// mesh` runs it, on the real Postgres and NATS — exports spans
// and metrics over OTLP/HTTP (protobuf), configured only by the standard
// OTEL_* variables, to a receiver in this test. One chat turn sent to the
// gateway must come back as one trace whose spans form one tree across
// gateway → chat → tasks → turn → routing → adapter; every RPC must be counted
// with its status and duration.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService, TaskService } from "@trellis/contracts/tasks";
import { bearer, eventually, uniqueName } from "@trellis/testkit";
import { testGround } from "@trellis/testkit/ground";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  SpanKind,
  startOtlpReceiver,
} from "@trellis/testkit/otlp-receiver";
import { startWorkerProcess, type WorkerProcess } from "@trellis/testkit/worker-process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Mesh, startMesh } from "../../src/mesh.js";
import { turnTrace } from "./turn-tree.js";

const workerScript = new URL("./traced-worker.ts", import.meta.url).pathname;

const apiKey = "trellis-tracing-admin-key-0123456789";

const { SERVER, CLIENT, CONSUMER } = SpanKind;

/** How the mesh's processes are laid out, and the `service.name` each service's spans carry. */
interface Layout {
  name: string;
  together: string[][];
  chat: string;
  tasks: string;
}

const layouts: Layout[] = [
  { name: "every service apart", together: [], chat: "trellis-chat", tasks: "trellis-tasks" },
  // As `trellis mesh` runs it: one process, one resource, both services' spans.
  {
    name: "chat in the tasks process",
    together: [["tasks", "chat"]],
    chat: "trellis-tasks+chat",
    tasks: "trellis-tasks+chat",
  },
];

describe.each(layouts)("a turn's trace and the RPC metrics, distributed mode, $name", (layout) => {
  let receiver: OtlpReceiver;
  let mesh: Mesh;
  let worker: WorkerProcess | undefined;
  const ground = testGround("trace");
  const otelEnv = (url: string) => ({
    // Only standard variables: where, what, and how often.
    OTEL_EXPORTER_OTLP_ENDPOINT: url,
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_METRICS_EXPORTER: "otlp",
    OTEL_METRIC_EXPORT_INTERVAL: "500",
    OTEL_BSP_SCHEDULE_DELAY: "100",
    OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${ground.prefix}`,
  });

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    mesh = await startMesh({
      ...(await ground.prepare()),
      together: layout.together,
      env: {
        TRELLIS_API_KEY: apiKey,
        TRELLIS_LOG_LEVEL: "warn",
        ...otelEnv(receiver.url),
      },
    });
  }, 120_000);

  afterAll(async () => {
    await worker?.stop();
    await mesh?.stop();
    await ground.remove();
    await receiver?.close();
  });

  const has = (service: string, name: string, kind?: number) => (s: ReceivedSpan) =>
    s.service === service && s.name === name && (kind === undefined || s.kind === kind);
  // gateway → chat → tasks → turn → routing, the hops every turn makes.
  const commonHops = [
    has("trellis-gateway", "trellis.chat.v1.ChatService/Send", SERVER),
    has("trellis-gateway", "trellis.chat.v1.ChatService/Send", CLIENT),
    has(layout.chat, "trellis.chat.v1.ChatService/Send", SERVER),
    has(layout.chat, "trellis.tasks.v1.TaskService/SubmitTask", CLIENT),
    has(layout.tasks, "trellis.tasks.v1.TaskService/SubmitTask", SERVER),
    has(layout.tasks, "trellis.turn"),
    has(layout.tasks, "trellis.route"),
  ];

  /** Create an agent on `backend`, send one chat turn through the gateway; its session id. */
  async function chatTurn(
    backend: string,
    text: string,
  ): Promise<{ sessionId: string; reply: string }> {
    const transport = createGrpcTransport({
      baseUrl: mesh.urls.gateway as string,
      interceptors: [bearer(apiKey)],
    });
    const agents = createClient(AgentService, transport);
    const chat = createClient(ChatService, transport);
    const { agent } = await agents.createAgent({
      agent: {
        workspaceId: "default",
        name: `traced-${backend}`,
        backend,
        definition:
          backend === "scripted"
            ? {
                entry: "reply",
                nodes: {
                  reply: { update: { messages: [{ role: "assistant", content: "traced" }] } },
                },
              }
            : {},
      },
    });
    const sessionId = `ses_${uniqueName("t")}`;
    const { outcome } = await chat.send({
      sessionId,
      agentId: agent?.id ?? "",
      message: { role: Role.USER, parts: [{ kind: { case: "text", value: { text } } }] },
    });
    if (outcome?.kind.case !== "completed") {
      throw new Error(`turn not completed: ${JSON.stringify(outcome?.kind)}`);
    }
    const part = outcome.kind.value.replies[0]?.parts[0]?.kind;
    return { sessionId, reply: part?.case === "text" ? part.value.text : "" };
  }

  it("exports one trace per chat turn whose spans form one tree across every hop", async () => {
    const { sessionId } = await chatTurn("scripted", "hi");
    const adapterRun = has(layout.tasks, "trellis.adapter.run");
    const spans = await turnTrace(receiver, sessionId, [...commonHops, adapterRun]);
    const route = spans.find(commonHops[6] as (s: ReceivedSpan) => boolean) as ReceivedSpan;
    expect(route.attributes["trellis.execution_status"]).toBe("completed");
    expect((spans.find(adapterRun) as ReceivedSpan).attributes["trellis.backend_id"]).toBe(
      "scripted",
    );
    // Each process names itself in its resource.
    expect(new Set(spans.map((s) => s.service))).toEqual(
      new Set(["trellis-gateway", layout.chat, layout.tasks]),
    );
    expect(receiver.rejected).toEqual([]);
  }, 60_000);

  it("follows a turn through NATS to a remote adapter worker in the same trace", async () => {
    worker = await startWorkerProcess(workerScript, {
      NATS_URL: ground.natsUrl,
      TRELLIS_NATS_PREFIX: ground.prefix,
      TRELLIS_WORKER_HEARTBEAT: "200",
      PROBE_BACKEND: "traced-probe",
      ...otelEnv(receiver.url),
    });
    // The router in the tasks process learns of the worker from its heartbeats:
    // a first turn tells when it has.
    await eventually(() => chatTurn("traced-probe", "warm up").then(() => true), {
      timeoutMs: 15_000,
      what: "a turn routed to the worker",
    });
    const { sessionId, reply } = await chatTurn("traced-probe", "over nats");
    expect(reply).toBe("traced-probe says: over nats");
    const workerRun = has("trellis-adapter-worker", "trellis.adapter.run", CONSUMER);
    const spans = await turnTrace(receiver, sessionId, [...commonHops, workerRun]);
    const run = spans.find(workerRun) as ReceivedSpan;
    expect(run.attributes["trellis.backend_id"]).toBe("traced-probe");
    // Its parent is the routing span of the tasks process: linked only by the
    // traceparent in the work item's NATS headers.
    const parent = spans.find((s) => s.spanId === run.parentSpanId) as ReceivedSpan;
    expect([parent.service, parent.name]).toEqual([layout.tasks, "trellis.route"]);
    expect(receiver.rejected).toEqual([]);
  }, 90_000);

  it("exports RED metrics per RPC: calls, errors by status code, duration", async () => {
    const transport = createGrpcTransport({
      baseUrl: mesh.urls.gateway as string,
      interceptors: [bearer(apiKey)],
    });
    const tasks = createClient(TaskService, transport);
    // Three failing calls: a task that does not exist is NOT_FOUND.
    for (let i = 0; i < 3; i++) {
      await expect(tasks.getTask({ taskId: `tsk_missing_${i}` })).rejects.toThrow();
    }
    const method = "trellis.tasks.v1.TaskService/GetTask";
    const points = () =>
      receiver.histograms.filter(
        (p) =>
          p.metric === "rpc.server.call.duration" &&
          p.service === layout.tasks &&
          p.attributes["rpc.method"] === method,
      );
    // Cumulative temporality: the latest point of a series holds its totals.
    const latest = (status: string) =>
      points()
        .filter((p) => p.attributes["rpc.status_code"] === status)
        .sort((a, b) => Number(b.timeNs - a.timeNs))[0];
    const notFound = await eventually(
      () => {
        const point = latest("NOT_FOUND");
        return point !== undefined && point.count >= 3 ? point : undefined;
      },
      { timeoutMs: 15_000, what: "GetTask NOT_FOUND counted by the tasks service" },
    );
    expect(notFound.unit).toBe("s");
    expect(notFound.temporality).toBe(2);
    expect(notFound.count).toBe(3);
    // The gateway forwards over the Connect protocol (TRELLIS_SERVICE_PROTOCOL's default).
    expect(notFound.attributes["rpc.system.name"]).toBe("connectrpc");
    // A client mistake is not a server error.
    expect(notFound.attributes["error.type"]).toBeUndefined();
    expect(notFound.sum).toBeGreaterThan(0);
    expect(notFound.bucketCounts.reduce((a, b) => a + b, 0)).toBe(3);
    expect(notFound.bounds.length + 1).toBe(notFound.bucketCounts.length);

    // The earlier turn's RPCs were counted as OK in each service that served them.
    const ok = (service: string, rpc: string) =>
      receiver.histograms.some(
        (p) =>
          p.service === service &&
          p.attributes["rpc.method"] === rpc &&
          p.attributes["rpc.status_code"] === "OK" &&
          p.count >= 1,
      );
    await eventually(
      () =>
        ok("trellis-gateway", "trellis.chat.v1.ChatService/Send") &&
        ok(layout.chat, "trellis.chat.v1.ChatService/Send") &&
        ok(layout.tasks, "trellis.tasks.v1.TaskService/SubmitTask"),
      { timeoutMs: 15_000, what: "the turn's RPCs counted OK" },
    );
    // Health probes are not RPCs of the service: never measured.
    expect(
      receiver.histograms.some((p) => String(p.attributes["rpc.method"]).startsWith("grpc.health")),
    ).toBe(false);
    expect(receiver.rejected).toEqual([]);
  }, 60_000);
});
