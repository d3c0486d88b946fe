// gRPC worker sessions held by the router's own process (real NATS): the
// bridge is given that router as `local`, so its offers and the session's
// claims, reports and results pass in process — no NATS message per turn —
// through the same handlers, fences and retries; a router of another
// process still reaches the session over NATS.
import type { NatsConnection } from "@nats-io/transport-node";
import { runGrpcWorker } from "@trellis/adapter-sdk";
import { probeAdapter, routedEvents, startDistributedRouter } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import { eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import {
  executionRequest,
  knownWorkers,
  safeTurnRunsAgainElsewhere,
  useBridgedSessions,
} from "./support/worker-sessions.js";

describe("gRPC worker sessions held by the router's process", () => {
  const prefix = uniqueName("gwl").toLowerCase();
  /** Both routers' settings (this process's, and another process's in one test). */
  const grace = { TRELLIS_ADAPTERS_GRACE: "500ms" };
  const held = useBridgedSessions(prefix, {
    env: grace,
    local: true,
    // A stalled offer would wait this long: the tests below would time out.
    claimTimeoutMs: 120_000,
  });
  const { workers, processes } = held;

  it("runs turns back to back without a NATS message per turn", async () => {
    // No heartbeat within the test: nothing but the turn itself wakes the channel.
    workers.push(
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "gl1" }),
        url: held.url,
        heartbeatMs: 60_000,
      }),
    );
    await knownWorkers(held.routed, "gl1", 1);
    const [worker] = held.routed.registry.backend("gl1")?.workers ?? [];
    const remote = held.routed.remote as NonNullable<typeof held.routed.remote>;
    const nc = held.routed.connection as NatsConnection;
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
      const result = await held.routed.router.execute(r.value);
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
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "gl2" }),
        url: held.url,
        heartbeatMs: 200,
      }),
    );
    const other = await startDistributedRouter(testNatsUrl, prefix, grace);
    try {
      await knownWorkers(other, "gl2", 1);
      await knownWorkers(held.routed, "gl2", 1);
      const [a, b] = await Promise.all([
        other.router.execute(executionRequest("gl2", "from afar").value),
        held.routed.router.execute(executionRequest("gl2", "from here").value),
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
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "gl3" }),
        url: held.url,
        heartbeatMs: 200,
      }),
    );
    await knownWorkers(held.routed, "gl3", 1);
    const r = executionRequest("gl3", "sleep 30000");
    const running = held.routed.router.execute(r.value);
    await eventually(() => routedEvents(r.events).length === 1, { what: "the claim" });
    r.abort.abort();
    expect((await running).status).toBe("cancelled");

    await safeTurnRunsAgainElsewhere(held.routed, {
      url: held.url,
      backend: "gl4",
      idSuffix: prefix,
      processes,
    });
  }, 90_000);
});
