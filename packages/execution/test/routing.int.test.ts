/**
 * Routing over real NATS JetStream with real worker processes: capability
 * routing across three differently able workers, blocking and degraded
 * negotiation, competing consumers, timeouts and cancels reaching the
 * worker, and workers killed mid-execution (re-run when safe, else
 * `worker_lost` — never a hang).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { ExecutionEvent, ExecutionRequest, RoutingPolicy } from "@trellis/adapter-sdk";
import { SecretsRequestSchema, SecretsResponseSchema } from "@trellis/contracts/adapters";
import { connectNats } from "@trellis/eventlog";
import { chatToMessage, textOf } from "@trellis/messages";
import { deleteTestStreams, eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { startWorkerProcess, type WorkerProcess } from "@trellis/testkit/worker-process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoutedExecutor } from "../src/routing/routed-executor.js";
import {
  probeWorkerScript,
  routedEvents,
  runCollecting,
  startDistributedRouter,
  userTurn,
} from "../src/testing/index.js";

const prefix = uniqueName("adp").toLowerCase();
const HEARTBEAT = "200";

let routed: RoutedExecutor;
const workers: Record<string, WorkerProcess> = {};
let taskCounter = 0;

function startProbe(
  name: string,
  backend: string,
  capabilities: object,
  extra: Record<string, string> = {},
) {
  return startWorkerProcess(probeWorkerScript, {
    PROBE_BACKEND: backend,
    PROBE_CAPABILITIES: JSON.stringify(capabilities),
    NATS_URL: testNatsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    TRELLIS_WORKER_HEARTBEAT: HEARTBEAT,
    TRELLIS_WORKER_ID: `${name}-${prefix}`,
    TRELLIS_WORKER_GRACE: "2000",
    ...extra,
  }).then((w) => {
    workers[name] = w;
    return w;
  });
}

/** A user turn to `backend` under `routing`, with a task id of its own. */
function request(
  backend: string,
  text: string,
  routing: RoutingPolicy = {},
  over: Partial<ExecutionRequest> = {},
): ExecutionRequest {
  return userTurn({ backend, routing }, text, {
    taskId: `tsk_${++taskCounter}_${prefix}`,
    ...over,
  });
}

const run = (r: ExecutionRequest) => runCollecting(routed.router, r);

beforeAll(async () => {
  routed = await startDistributedRouter(testNatsUrl, prefix, {
    TRELLIS_ADAPTERS_UNAVAILABLE_AFTER: "1500",
    TRELLIS_ADAPTERS_GRACE: "1000",
  });
  await Promise.all([
    startProbe("plain", "plain", { approvalInterrupts: "none" }, { TRELLIS_WORKER_COST: "1" }),
    startProbe(
      "gated",
      "gated",
      { approvalInterrupts: "adapter-mediated" },
      { TRELLIS_WORKER_COST: "2" },
    ),
    startProbe("native", "native", { approvalInterrupts: "native" }, { TRELLIS_WORKER_COST: "5" }),
    startProbe("pool-a", "pool", {}),
    startProbe("pool-b", "pool", {}),
    startProbe("fragile", "fragile", {}),
  ]);
  await eventually(
    () =>
      routed.registry.backends().length === 5 &&
      routed.registry.backend("pool")?.workers.length === 2,
    {
      what: "every worker registered",
    },
  );
}, 120_000);

afterAll(async () => {
  await Promise.all(Object.values(workers).map((w) => w.stop()));
  await routed?.stop();
  await deleteTestStreams(prefix);
});

const three: RoutingPolicy = { allowedBackends: ["plain", "gated", "native"] };

describe("routing over JetStream to worker processes", () => {
  it("registers each worker's backend, capabilities and capacity from its heartbeats", () => {
    const native = routed.registry.backend("native");
    expect(native).toMatchObject({ inProcess: false, capacity: 1 });
    expect(native?.capabilities.approvalInterrupts).toBe("native");
    expect(native?.workers.map((w) => w.workerId)).toEqual([workers.native?.workerId]);
    expect(routed.registry.backend("gated")?.capabilities.approvalInterrupts).toBe(
      "adapter-mediated",
    );
  });

  it("hands vault secrets to no one but the worker running the execution", async () => {
    const dispatcher = routed.remote;
    if (!dispatcher) throw new Error("no remote dispatcher");
    const nc = await connectNats({ servers: testNatsUrl, name: "vault-intruder" });
    try {
      // Garbage is ignored (no answer), and the router goes on answering.
      const garbage = await nc
        .request(
          `${dispatcher.names.routerInbox(dispatcher.routerId)}.secrets`,
          new Uint8Array([0xff, 0x00, 0x13, 0x37]),
          { timeout: 500 },
        )
        .then(
          () => "answered",
          () => "no answer",
        );
      expect(garbage).toBe("no answer");
      const answer = await nc.request(
        `${dispatcher.names.routerInbox(dispatcher.routerId)}.secrets`,
        toBinary(
          SecretsRequestSchema,
          create(SecretsRequestSchema, { executionId: "exe_nope", attempt: 1, workerId: "x" }),
        ),
        { timeout: 5_000 },
      );
      const response = fromBinary(SecretsResponseSchema, answer.data);
      expect(response.vaults).toEqual([]);
      expect(response.error).toBe("the worker is not running this execution");
    } finally {
      await nc.close();
    }
  });

  it("routes a request needing native approval interrupts only to the worker that has them", async () => {
    const { result, events } = await run(
      request("plain", "hello", three, { requirements: { approvalInterrupts: "required" } }),
    );
    expect(result).toMatchObject({ status: "completed", backendId: "native" });
    expect(textOf(result.messages[0]!)).toBe("native says: hello");
    expect(routedEvents(events)).toEqual([
      expect.objectContaining({
        backendId: "native",
        workerId: workers.native?.workerId,
        attempt: 1,
      }),
    ]);
    // Progress streamed back from the worker process, then exactly one end.
    expect(events.map((e) => e.kind)).toEqual([
      "routed",
      "text_delta",
      "step_finished",
      "turn_finished",
    ]);
    expect(workers.plain?.ran()).toEqual([]);
    expect(workers.gated?.ran()).toEqual([]);
  });

  it("without special needs, the cheapest worker runs it", async () => {
    const { result } = await run(request("plain", "cheap please", three));
    expect(result).toMatchObject({ status: "completed", backendId: "plain" });
  });

  it("fails with attachments_unsupported (blocking) when no worker takes attachments", async () => {
    const image = chatToMessage({
      role: "user",
      content: [{ type: "image", source: { type: "url", url: "https://example.test/x.png" } }],
    });
    const started = Date.now();
    const { result, events } = await run(request("plain", "", three, { input: image }));
    expect(Date.now() - started).toBeLessThan(2000);
    expect(result).toMatchObject({ status: "failed", category: "unsupported", retryable: false });
    if (result.status !== "failed") return;
    expect(new Set(result.reasons?.map((r) => `${r.code}/${r.severity}`))).toEqual(
      new Set(["attachments_unsupported/blocking"]),
    );
    expect(result.reasons).toHaveLength(3);
    expect(events.map((e) => e.kind)).toEqual(["turn_finished"]);
  });

  it("runs a request whose preferred capability is unmet degraded, and says so", async () => {
    const { result, events } = await run(
      request("plain", "degrade me", {}, { requirements: { approvalInterrupts: "preferred" } }),
    );
    expect(result).toMatchObject({ status: "completed", backendId: "plain" });
    expect(result.degradation?.map((r) => [r.code, r.severity])).toEqual([
      ["approval_interrupt_unsupported", "warning"],
    ]);
    expect(routedEvents(events)[0]).toMatchObject({ degraded: true });
  });

  it("shares load between the workers of one backend (competing consumers)", async () => {
    const runs = await Promise.all(
      [1, 2, 3, 4].map(async (i) => {
        const events: ExecutionEvent[] = [];
        let placedAt = 0;
        const result = await routed.router.execute({
          ...request("pool", `sleep ${400 + i}`),
          onEvent: (e) => {
            if (e.kind === "routed") placedAt = Date.now();
            events.push(e);
          },
        });
        return { result, events, placedAt, doneAt: Date.now() };
      }),
    );
    expect(runs.every((r) => r.result.status === "completed")).toBe(true);
    const workerOf = (r: (typeof runs)[number]) => routedEvents(r.events)[0]?.workerId;
    expect(new Set(runs.map(workerOf))).toEqual(
      new Set([workers["pool-a"]?.workerId, workers["pool-b"]?.workerId]),
    );
    // Both workers ran at the same time: some runs on different workers overlap.
    const overlapping = runs.some((a) =>
      runs.some(
        (b) => workerOf(a) !== workerOf(b) && a.placedAt < b.doneAt && b.placedAt < a.doneAt,
      ),
    );
    expect(overlapping).toBe(true);
  });

  it("stops a worker's execution at maxElapsedMs: failed, timeout, retryable", async () => {
    const started = Date.now();
    const { result } = await run(
      request("pool", "sleep 10000", {}, { requirements: { maxElapsedMs: 300 } }),
    );
    expect(Date.now() - started).toBeLessThan(4000);
    expect(result).toMatchObject({ status: "failed", category: "timeout", retryable: true });
    // The worker really stopped: nothing left in flight on it.
    await eventually(() => routed.registry.backend("pool")?.workers.every((w) => w.inFlight === 0));
  });

  it("cancels a running execution on its worker", async () => {
    const abort = new AbortController();
    const events: ExecutionEvent[] = [];
    const pending = routed.router.execute({
      ...request("pool", "sleep 10000", {}, { signal: abort.signal }),
      onEvent: (e) => events.push(e),
    });
    await eventually(() => routedEvents(events).length === 1, { what: "the execution placed" });
    const started = Date.now();
    abort.abort();
    expect((await pending).status).toBe("cancelled");
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("fails fast, retryably, when the agent's backend has no live worker", async () => {
    const { result } = await run(request("ghost", "anyone?"));
    expect(result).toMatchObject({
      status: "failed",
      category: "backend_unavailable",
      retryable: true,
    });
    if (result.status !== "failed") return;
    expect(result.reasons?.[0]).toMatchObject({
      code: "backend_unavailable",
      metadata: { backend: "ghost" },
    });
  });

  it("a worker killed mid-execution fails the run with worker_lost when it is not safe to retry", async () => {
    const fragile = workers.fragile as WorkerProcess;
    const events: ExecutionEvent[] = [];
    const pending = routed.router.execute({
      ...request("fragile", "sleep 30000"),
      onEvent: (e) => events.push(e),
    });
    await eventually(() => fragile.ran().length === 1, { what: "the worker started it" });
    const killed = Date.now();
    await fragile.kill();
    const result = await pending;
    expect(Date.now() - killed).toBeLessThan(5000);
    expect(result).toMatchObject({ status: "failed", category: "worker_lost", retryable: false });
    if (result.status === "failed") expect(result.message).toContain("not marked safe to retry");
    // And the dead worker is out of the registry.
    expect(routed.registry.backend("fragile")).toBeUndefined();
  });

  it("a worker killed mid-execution is replaced by another when the agent is safe to retry", async () => {
    const events: ExecutionEvent[] = [];
    const pending = routed.router.execute({
      ...request("pool", "sleep 1500"),
      agent: { id: "agt_int", backend: "pool", definition: {}, tools: [], safeToRetry: true },
      onEvent: (e) => events.push(e),
    });
    await eventually(() => routedEvents(events).length === 1, { what: "the execution placed" });
    const first = routedEvents(events)[0]?.workerId;
    const victim = Object.values(workers).find((w) => w.workerId === first) as WorkerProcess;
    await victim.kill();
    const result = await pending;
    expect(result).toMatchObject({ status: "completed", backendId: "pool" });
    const placements = routedEvents(events);
    expect(placements.map((p) => p.attempt)).toEqual([1, 2]);
    expect(placements[1]?.workerId).not.toBe(first);
    expect(events.filter((e) => e.kind === "turn_finished")).toHaveLength(1);
  });
});
