// gRPC worker sessions held by the router's own process (real NATS): the
// bridge is given that router as `local`, so its offers and the session's
// claims, reports and results pass in process — no NATS message per turn —
// through the same handlers, fences and retries; a router of another
// process still reaches the session over NATS.
import type * as http2 from "node:http2";
import type { NatsConnection } from "@nats-io/transport-node";
import { type AdapterWorker, runGrpcWorker } from "@trellis/adapter-sdk";
import {
  createRoutedExecutor,
  createWorkerHandlers,
  NatsWorkerBridge,
  type RoutedExecutor,
  routedNats,
  WorkerSessions,
} from "@trellis/execution";
import { probeAdapter } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import { deleteTestStreams, eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { WorkerProcess } from "./support/processes.js";
import {
  executionRequest,
  knownWorkers,
  routedEvents,
  safeTurnRunsAgainElsewhere,
  serveWorkerService,
} from "./support/worker-sessions.js";

describe("gRPC worker sessions held by the router's process", () => {
  const prefix = uniqueName("gwl").toLowerCase();
  const env = {
    NATS_URL: testNatsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
    TRELLIS_ADAPTERS_GRACE: "500ms",
  };
  let routed: RoutedExecutor;
  let sessions: WorkerSessions;
  let server: http2.Http2Server;
  let url: string;
  const workers: AdapterWorker[] = [];
  const processes: WorkerProcess[] = [];

  beforeAll(async () => {
    routed = createRoutedExecutor({ mode: "distributed", adapters: [], env });
    await routed.start();
    sessions = new WorkerSessions({
      port: new NatsWorkerBridge({
        nats: () => routedNats(routed),
        local: () => routed.remote,
        // A stalled offer would wait this long: the tests below would time out.
        claimTimeoutMs: 120_000,
      }),
    });
    ({ server, url } = await serveWorkerService(createWorkerHandlers(sessions)));
  });

  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop({ graceMs: 100 });
    for (const p of processes.splice(0)) await p.kill();
  });

  afterAll(async () => {
    sessions.close();
    server.close();
    await routed.stop();
    await deleteTestStreams(prefix);
  });

  it("runs turns back to back without a NATS message per turn", async () => {
    // No heartbeat within the test: nothing but the turn itself wakes the channel.
    workers.push(
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "gl1" }),
        url,
        heartbeatMs: 60_000,
      }),
    );
    await knownWorkers(routed, "gl1", 1);
    const [worker] = routed.registry.backend("gl1")?.workers ?? [];
    const remote = routed.remote as NonNullable<typeof routed.remote>;
    const nc = routed.connection as NatsConnection;
    let onTheWire = 0;
    const count = () => {
      onTheWire++;
    };
    const spies = [
      nc.subscribe(remote.names.offer(worker?.workerId as string), {
        callback: count,
      }),
      nc.subscribe(`${remote.names.routerInbox(remote.routerId)}.*`, {
        callback: count,
      }),
    ];
    // An offer queued while the previous turn's answer is being sent is sent
    // at once (it used to wait for the next wake-up of the channel).
    for (let i = 0; i < 20; i++) {
      const r = executionRequest("gl1", `turn ${i}`);
      const result = await routed.router.execute(r.value);
      expect(result.status, JSON.stringify(result)).toBe("completed");
      expect(result.messages[0] && textOf(result.messages[0])).toBe(`gl1 says: turn ${i}`);
      expect(r.events.map((e) => e.kind)).toEqual([
        "routed",
        "text_delta",
        "step_finished",
        "turn_finished",
      ]);
    }
    await nc.flush();
    for (const spy of spies) spy.unsubscribe();
    expect(onTheWire).toBe(0);
  }, 30_000);

  it("a router of another process places on the same session over NATS", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "gl2" }), url, heartbeatMs: 200 }),
    );
    const other = createRoutedExecutor({ mode: "distributed", adapters: [], env });
    await other.start();
    try {
      await knownWorkers(other, "gl2", 1);
      await knownWorkers(routed, "gl2", 1);
      const [a, b] = await Promise.all([
        other.router.execute(executionRequest("gl2", "from afar").value),
        routed.router.execute(executionRequest("gl2", "from here").value),
      ]);
      expect(a.status, JSON.stringify(a)).toBe("completed");
      expect(a.messages[0] && textOf(a.messages[0])).toBe("gl2 says: from afar");
      expect(b.status, JSON.stringify(b)).toBe("completed");
      expect(b.messages[0] && textOf(b.messages[0])).toBe("gl2 says: from here");
    } finally {
      await other.stop();
    }
  });

  it("a caller's cancel reaches the worker; after kill -9 a safe turn runs again elsewhere", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "gl3" }), url, heartbeatMs: 200 }),
    );
    await knownWorkers(routed, "gl3", 1);
    const r = executionRequest("gl3", "sleep 30000");
    const running = routed.router.execute(r.value);
    await eventually(() => routedEvents(r.events).length === 1, { what: "the claim" });
    r.abort.abort();
    expect((await running).status).toBe("cancelled");

    await safeTurnRunsAgainElsewhere(routed, {
      url,
      backend: "gl4",
      idSuffix: prefix,
      processes,
    });
  }, 90_000);
});
