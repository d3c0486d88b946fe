/**
 * Routing benchmark.
 *
 * 1. Overhead per execution: a zero-latency backend called in process (the
 *    floor), the same backend behind the router in process (negotiate +
 *    policy), and behind the router on a worker process over JetStream
 *    (negotiate + queue + claim + worker + events + result). One in flight;
 *    ratios to the floor measured in the same run.
 * 2. Scale-out: executions/s through the router with 1, 2 and 4 worker
 *    processes (capacity 1 each) on a backend that takes `backendLatencyMs`
 *    per execution (a stand-in for model latency), `scaleConcurrency` in flight.
 *
 * Needs NATS (TRELLIS_TEST_NATS_URL or nats://127.0.0.1:4222). Medians of
 * `rounds` windows after a warm-up.
 */
import type { ExecutionAdapter, ExecutionRequest } from "@trellis/adapter-sdk";
import { BackendRegistry, Router } from "@trellis/execution";
import {
  probeAdapter,
  probeWorkerScript,
  startDistributedRouter,
  userTurn,
} from "@trellis/execution/testing";
import { deleteTestStreams, eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { startWorkerProcess, type WorkerProcess } from "@trellis/testkit/worker-process";
import { type LoadResult, median, runLoad } from "./lib/load.js";

/** Options of {@link runRoutingBench}. */
export interface RoutingBenchOptions {
  rounds?: number;
  windowMs?: number;
  warmupMs?: number;
  workerCounts?: readonly number[];
  scaleConcurrency?: number;
  backendLatencyMs?: number;
}

/** One measured point. */
export interface RoutingPoint {
  target: string;
  concurrency: number;
  p50Ms: number;
  p99Ms: number;
  perSecond: number;
  errors: number;
  rounds: LoadResult[];
}

/** Both parts of the benchmark. */
export interface RoutingBenchResult {
  overhead: RoutingPoint[];
  scale: RoutingPoint[];
  backendLatencyMs: number;
}

async function measure(
  target: string,
  concurrency: number,
  op: (worker: number, call: number) => Promise<void>,
  options: Required<RoutingBenchOptions>,
): Promise<RoutingPoint> {
  await runLoad(op, { concurrency, durationMs: options.warmupMs });
  const rounds: LoadResult[] = [];
  for (let i = 0; i < options.rounds; i++) {
    rounds.push(await runLoad(op, { concurrency, durationMs: options.windowMs }));
  }
  return {
    target,
    concurrency,
    p50Ms: median(rounds.map((r) => r.p50Ms)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    perSecond: median(rounds.map((r) => r.perSecond)),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
    rounds,
  };
}

/** An op that runs one execution and fails unless it completed. */
function opOf(
  execute: (r: ExecutionRequest) => Promise<{ status: string }>,
  backend: string,
  text: string,
) {
  let n = 0;
  return async () => {
    const result = await execute(userTurn(backend, text, { taskId: `tsk_bench_${++n}` }));
    if (result.status !== "completed") throw new Error(`execution ${result.status}`);
  };
}

/** Run the benchmark (workers are started per point and stopped after it). */
export async function runRoutingBench(
  options: RoutingBenchOptions = {},
): Promise<RoutingBenchResult> {
  const full: Required<RoutingBenchOptions> = {
    rounds: options.rounds ?? 3,
    windowMs: options.windowMs ?? 2000,
    warmupMs: options.warmupMs ?? 500,
    workerCounts: options.workerCounts ?? [1, 2, 4],
    scaleConcurrency: options.scaleConcurrency ?? 16,
    backendLatencyMs: options.backendLatencyMs ?? 20,
  };
  const prefix = uniqueName("benchrt").toLowerCase();
  const overhead: RoutingPoint[] = [];
  const scale: RoutingPoint[] = [];

  // 1. Overhead at one in flight.
  const adapter: ExecutionAdapter = probeAdapter({ backendId: "zero" });
  overhead.push(
    await measure(
      "in-process adapter call",
      1,
      opOf((r) => adapter.execute(r), "zero", "hi"),
      full,
    ),
  );
  const registry = new BackendRegistry();
  registry.addLocal(adapter);
  const local = new Router({ registry });
  overhead.push(
    await measure(
      "routed, in-process backend",
      1,
      opOf((r) => local.execute(r), "zero", "hi"),
      full,
    ),
  );

  const routed = await startDistributedRouter(testNatsUrl, prefix, { TRELLIS_LOG_LEVEL: "warn" });
  const workers: WorkerProcess[] = [];
  const startWorkers = async (backend: string, count: number) => {
    const started = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        startWorkerProcess(probeWorkerScript, {
          PROBE_BACKEND: backend,
          NATS_URL: testNatsUrl,
          TRELLIS_NATS_PREFIX: prefix,
          TRELLIS_WORKER_ID: `${backend}-${i}-${prefix}`,
        }),
      ),
    );
    workers.push(...started);
    await eventually(() => routed.registry.backend(backend)?.workers.length === count, {
      timeoutMs: 30_000,
      what: `${count} workers of ${backend}`,
    });
    return started;
  };
  try {
    const one = await startWorkers("remote-zero", 1);
    overhead.push(
      await measure(
        "routed, JetStream worker process",
        1,
        opOf((r) => routed.router.execute(r), "remote-zero", "hi"),
        full,
      ),
    );
    await Promise.all(one.map((w) => w.stop()));

    // 2. Scale-out with a backend that takes backendLatencyMs per execution.
    for (const count of full.workerCounts) {
      const backend = `scale-${count}`;
      const group = await startWorkers(backend, count);
      scale.push(
        await measure(
          `${count} worker(s), ${full.backendLatencyMs} ms backend`,
          full.scaleConcurrency,
          opOf((r) => routed.router.execute(r), backend, `sleep ${full.backendLatencyMs}`),
          full,
        ),
      );
      await Promise.all(group.map((w) => w.stop()));
    }
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await routed.stop();
    await deleteTestStreams(prefix);
  }
  return { overhead, scale, backendLatencyMs: full.backendLatencyMs };
}

/** Two tables: overhead ratios to the in-process call, throughput ratios to one worker. */
export function formatRoutingBench(result: RoutingBenchResult): string {
  const floor = result.overhead[0];
  const single = result.scale[0];
  const row = (p: RoutingPoint, ratio: string) =>
    `${p.target.padEnd(36)}${String(p.concurrency).padStart(9)}  ${p.p50Ms.toFixed(3).padStart(8)} ${p.p99Ms
      .toFixed(3)
      .padStart(
        8,
      )} ${p.perSecond.toFixed(0).padStart(9)}  ${ratio.padStart(8)}  ${String(p.errors).padStart(6)}`;
  const lines = [
    `routing overhead per execution (zero-latency backend; medians of ${floor?.rounds.length ?? 0} windows; ratio = p50 / in-process call)`,
    "target                              in-flight    p50 ms   p99 ms    exec/s     ratio  errors",
    ...result.overhead.map((p) => row(p, floor ? (p.p50Ms / floor.p50Ms).toFixed(1) : "-")),
    "",
    `scale-out (backend takes ${result.backendLatencyMs} ms per execution; ratio = exec/s / one worker)`,
    "target                              in-flight    p50 ms   p99 ms    exec/s     ratio  errors",
    ...result.scale.map((p) => row(p, single ? (p.perSecond / single.perSecond).toFixed(2) : "-")),
  ];
  return lines.join("\n");
}
