// gRPC workers in one process (no NATS): the router places executions on a
// worker connected over a real h2c WorkerService (the SDK's runGrpcWorker),
// with the JetStream path's semantics — claim fences, cancels, lost workers.
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import {
  type AdapterWorker,
  type ExecutionEvent,
  type ExecutionRequest,
  runGrpcWorker,
} from "@trellis/adapter-sdk";
import { WorkerService } from "@trellis/contracts/adapters";
import { probeAdapter } from "@trellis/execution/testing";
import { chatToMessage, textOf } from "@trellis/messages";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkerHub } from "../../../packages/execution/src/grpc-workers/hub.js";
import type {
  WorkerPort,
  WorkerSession,
} from "../../../packages/execution/src/grpc-workers/session.js";
import { BackendRegistry } from "../../../packages/execution/src/routing/registry.js";
import { Router } from "../../../packages/execution/src/routing/router.js";
import { createWorkerHandlers } from "../src/grpc-workers/handlers.js";
import { WorkerSessions } from "../src/grpc-workers/sessions.js";
import { withErrorDetails } from "../src/handlers/errors.js";

function request(backend: string, text: string, over: Partial<ExecutionRequest> = {}) {
  const events: ExecutionEvent[] = [];
  const abort = new AbortController();
  const value: ExecutionRequest = {
    taskId: `tsk_${Math.random().toString(36).slice(2)}`,
    sessionId: "ses_1",
    workspaceId: "wsp_1",
    agent: { id: "agt_1", backend, definition: {}, tools: [] },
    history: [],
    input: chatToMessage({ role: "user", content: text }),
    signal: abort.signal,
    onEvent: (event) => events.push(event),
    ...over,
  };
  return { value, events, abort };
}

describe("gRPC workers (embedded hub)", () => {
  let server: http2.Http2Server;
  let url: string;
  const hub = new LocalWorkerHub({ graceMs: 500, unavailableAfterMs: 1000 });
  // The hub, with the sessions it is given kept (to cut one as a crash would).
  const attached = new Map<string, WorkerSession>();
  const port: WorkerPort = {
    attach: (session) => {
      hub.attach(session);
      attached.set(session.workerId, session);
    },
    beat: (session) => hub.beat(session),
    detach: (session, how) => hub.detach(session, how),
    claim: (session, work, negotiation) => hub.claim(session, work, negotiation),
    events: (session, work, events) => hub.events(session, work, events),
    complete: (session, work, result) => hub.complete(session, work, result),
  };
  const sessions = new WorkerSessions({ port });
  const registry = new BackendRegistry();
  hub.addRegistry(registry);
  const router = new Router({ registry, remote: hub });
  const workers: AdapterWorker[] = [];

  beforeAll(async () => {
    server = http2.createServer(
      connectNodeAdapter({
        routes: (r) => {
          r.service(WorkerService, withErrorDetails(WorkerService, createWorkerHandlers(sessions)));
        },
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop({ graceMs: 100 });
  });

  afterAll(async () => {
    sessions.close();
    hub.close();
    server.close();
  });

  it("runs an execution on a connected worker: routed, progress, one result", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "g1" }), url, heartbeatMs: 200 }),
    );
    expect(router.backends()).toContain("g1");
    const r = request("g1", "hello");
    const result = await router.execute(r.value);
    expect(result.status, JSON.stringify(result)).toBe("completed");
    expect(result.messages[0] && textOf(result.messages[0])).toBe("g1 says: hello");
    expect(r.events[0]).toMatchObject({ kind: "routed", backendId: "g1", attempt: 1 });
    expect(r.events.some((e) => e.kind === "text_delta")).toBe(true);
    expect(r.events.filter((e) => e.kind === "turn_finished")).toHaveLength(1);
  });

  it("refuses a bad registration with InvalidArgument naming the field", async () => {
    await expect(
      runGrpcWorker({
        adapter: probeAdapter({ backendId: "g2" }),
        url,
        heartbeatMs: 5,
      }),
    ).rejects.toThrow(/worker.heartbeat_interval_ms/);
  });

  it("a requirement the worker declares it lacks never reaches it", async () => {
    let runs = 0;
    workers.push(
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "g3", onRun: () => runs++ }),
        url,
        heartbeatMs: 200,
      }),
    );
    const r = request("g3", "hi", { requirements: { toolUse: "required" } });
    const result = await router.execute(r.value);
    expect(result).toMatchObject({ status: "failed", category: "unsupported" });
    expect(runs).toBe(0);
  });

  it("a caller's cancel reaches the worker, which ends the run", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "g4" }), url, heartbeatMs: 200 }),
    );
    const r = request("g4", "sleep 10000");
    const running = router.execute(r.value);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    r.abort.abort();
    const result = await running;
    expect(result.status).toBe("cancelled");
    expect(Date.now() - started).toBeLessThan(450);
  });

  it("a stale or foreign call is refused by the fence", async () => {
    const worker = await runGrpcWorker({
      adapter: probeAdapter({ backendId: "g5" }),
      url,
      heartbeatMs: 200,
    });
    workers.push(worker);
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    await expect(
      client.claimWork({
        work: { workerId: worker.workerId, session: "forged", executionId: "exe_1", attempt: 1 },
      }),
    ).rejects.toThrow(/no live session/);
  });

  it.each([
    { safeToRetry: true, expected: "completed" },
    { safeToRetry: false, expected: "worker_lost" },
  ])(
    "a lost worker (lease gone mid-run): safe to retry $safeToRetry → $expected",
    async ({ safeToRetry }) => {
      const backendId = safeToRetry ? "g6" : "g7";
      const adapter = probeAdapter({ backendId });
      const first = await runGrpcWorker({ adapter, url, heartbeatMs: 100 });
      workers.push(first);
      const r = request(backendId, "sleep 600", {
        agent: { id: "agt_2", backend: backendId, definition: {}, tools: [], safeToRetry },
      });
      const running = router.execute(r.value);
      await new Promise((resolve) => setTimeout(resolve, 200));
      workers.push(await runGrpcWorker({ adapter, url, heartbeatMs: 100 }));
      // As after a crash or a missed lease: the first worker's session ends mid-run.
      const lost = attached.get(first.workerId) as WorkerSession;
      sessions.end(lost, "lost");
      const result = await running;
      const routed = r.events.filter((e) => e.kind === "routed");
      if (safeToRetry) {
        expect(result.status, JSON.stringify(result)).toBe("completed");
        expect(routed.map((e) => e.kind === "routed" && e.attempt)).toEqual([1, 2]);
        expect(routed[1]).not.toMatchObject({ workerId: first.workerId });
      } else {
        expect(result).toMatchObject({ status: "failed", category: "worker_lost" });
        expect(routed).toHaveLength(1);
      }
      // The SDK worker connects again, as a new session of the same worker id.
      for (let i = 0; i < 50 && attached.get(first.workerId) === lost; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const again = attached.get(first.workerId);
      expect(again && again !== lost && !again.ended).toBe(true);
    },
  );
});
