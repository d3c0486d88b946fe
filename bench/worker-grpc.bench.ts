/**
 * gRPC worker path vs JetStream worker path: CPU per turn, same run.
 *
 * One router (a Router over the JetStream dispatcher, as the tasks service
 * runs it) places sequential executions (one in flight) on a zero-latency
 * probe backend served
 *
 * - by a JetStream worker process (`runWorker`: NATS client), and
 * - by a gRPC worker process (`runGrpcWorker`: WorkerService over h2c),
 *   whose session this process holds and relays as the adapters service
 *   does in a mesh (the router places work on it directly over core NATS);
 * - by a second gRPC worker process whose session is held by the router's
 *   own process (`grpc-local`: the bridge is given the router as `local`,
 *   so the router's offers and the session's claims and results pass in
 *   process — what a router holding its workers' streams costs);
 * - by a third gRPC worker process reaching that same session table through
 *   a gateway forwarder (`grpc-gw`: `createForwardingImpl`, in this process,
 *   without the gateway's auth and quota interceptors) — a mesh's path
 *   since session 14: the worker connects to the gateway, which forwards
 *   WorkerService to the tasks service whose router places the turns.
 *
 * CPU is read from /proc for this process (router, and the bridge on the gRPC
 * path) and the worker process, per turn, over `turns` executions after a
 * warm-up, in `rounds` rounds that alternate the paths (J G, G J, …) so a
 * machine whose load drifts weighs on both alike; figures are the medians
 * of the rounds. NATS messages per turn are this process's connection's
 * (router and relay; the worker's own are not counted). The issue's
 * target: the gRPC path ≤ 1.2× the JetStream path.
 * Needs NATS (TRELLIS_TEST_NATS_URL or nats://127.0.0.1:4222).
 */
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { WorkerService } from "@trellis/contracts/adapters";
import {
  createWorkerHandlers,
  NatsWorkerBridge,
  routedNats,
  WorkerSessions,
} from "@trellis/execution";
import {
  probeGrpcWorkerScript,
  probeWorkerScript,
  startDistributedRouter,
  userTurn,
} from "@trellis/execution/testing";
import { createForwardingImpl } from "@trellis/gateway/testing";
import { withErrorDetails } from "@trellis/runtime";
import { deleteTestStreams, eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { startWorkerProcess, type WorkerProcess } from "@trellis/testkit/worker-process";
import { quantile } from "./lib/load.js";
import { cpuMs } from "./lib/proc.js";

/** Options of {@link runWorkerGrpcBench}. */
export interface WorkerGrpcBenchOptions {
  /** Measured executions per path and round (default 400). */
  turns?: number;
  /** Rounds, each measuring both paths (default 1). */
  rounds?: number;
  /** Warm-up executions per path (default 50). */
  warmup?: number;
}

/** One path's figures. */
export interface WorkerPathPoint {
  path: WorkerPath;
  turns: number;
  routerCpuMsPerTurn: number;
  workerCpuMsPerTurn: number;
  totalCpuMsPerTurn: number;
  p50Ms: number;
  p99Ms: number;
  /** NATS messages sent and received per turn by this process (router, relay). */
  natsMsgsPerTurn: number;
  errors: number;
}

/** The paths measured, in this order in every round's list. */
export type WorkerPath = "jetstream" | "grpc" | "grpc-local" | "grpc-gw";
const PATHS: readonly WorkerPath[] = ["jetstream", "grpc", "grpc-local", "grpc-gw"];

/** Every path (medians of the rounds), every round, and gRPC / JetStream total CPU per turn. */
export interface WorkerGrpcBenchResult {
  points: WorkerPathPoint[];
  rounds: WorkerPathPoint[][];
  /** Median over the rounds of each round's ratio, relayed gRPC path (the mesh's). */
  cpuRatio: number;
  /** The same for the session held by the router's process. */
  cpuRatioLocal: number;
  /** The same, the worker reaching that process through a gateway forwarder (a mesh since session 14). */
  cpuRatioGateway: number;
}

/** The `n`th turn of the benchmark, to `backend`. */
const requestFor = (backend: string, n: number) =>
  userTurn(backend, "hi", { taskId: `tsk_bench_${n}` });

/** Run the benchmark. */
export async function runWorkerGrpcBench(
  options: WorkerGrpcBenchOptions = {},
): Promise<WorkerGrpcBenchResult> {
  const turns = options.turns ?? 400;
  const rounds = Math.max(1, options.rounds ?? 1);
  const warmup = options.warmup ?? 50;
  const prefix = uniqueName("benchwg").toLowerCase();
  const routed = await startDistributedRouter(testNatsUrl, prefix);
  const sessions = new WorkerSessions({
    port: new NatsWorkerBridge({
      nats: () => routedNats(routed),
    }),
  });
  // The same, but the bridge exchanges the router's messages with it in process.
  const localSessions = new WorkerSessions({
    port: new NatsWorkerBridge({
      nats: () => routedNats(routed),
      local: () => routed.remote,
    }),
  });
  const serve = async (table: WorkerSessions) => {
    const server = http2.createServer(
      connectNodeAdapter({
        routes: (r) => {
          r.service(WorkerService, withErrorDetails(WorkerService, createWorkerHandlers(table)));
        },
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  };
  const relayed = await serve(sessions);
  const held = await serve(localSessions);
  // A gateway's forwarder in front of `held` (the gateway forwards WorkerService to tasks).
  const gateway = http2.createServer(
    connectNodeAdapter({
      routes: (r) => {
        r.service(
          WorkerService,
          createForwardingImpl(
            WorkerService,
            createClient(WorkerService, createGrpcTransport({ baseUrl: held.url })),
          ),
        );
      },
    }),
  );
  await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
  const gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  const workers: WorkerProcess[] = [];
  let n = 0;
  const measure = async (
    path: WorkerPath,
    backend: string,
    worker: WorkerProcess,
  ): Promise<WorkerPathPoint> => {
    await eventually(() => routed.registry.backend(backend)?.workers.length === 1, {
      timeoutMs: 30_000,
      what: `the ${path} worker of ${backend}`,
    });
    for (let i = 0; i < warmup; i++) await routed.router.execute(requestFor(backend, ++n));
    const pid = worker.child.pid as number;
    const stats = () => {
      const s = routed.connection?.stats();
      return s ? s.inMsgs + s.outMsgs : 0;
    };
    const msgsBefore = stats();
    const routerBefore = process.cpuUsage();
    const workerBefore = cpuMs(pid);
    const latencies: number[] = [];
    let errors = 0;
    for (let i = 0; i < turns; i++) {
      const started = performance.now();
      const result = await routed.router.execute(requestFor(backend, ++n));
      latencies.push(performance.now() - started);
      if (result.status !== "completed") errors++;
    }
    const routerUsage = process.cpuUsage(routerBefore);
    const routerCpu = (routerUsage.user + routerUsage.system) / 1000 / turns;
    const workerCpu = (cpuMs(pid) - workerBefore) / turns;
    const natsMsgsPerTurn = (stats() - msgsBefore) / turns;
    return {
      path,
      turns,
      routerCpuMsPerTurn: routerCpu,
      workerCpuMsPerTurn: workerCpu,
      totalCpuMsPerTurn: routerCpu + workerCpu,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      natsMsgsPerTurn,
      errors,
    };
  };
  try {
    const js = await startWorkerProcess(probeWorkerScript, {
      PROBE_BACKEND: "bench-js",
      NATS_URL: testNatsUrl,
      TRELLIS_NATS_PREFIX: prefix,
      TRELLIS_WORKER_ID: `bench-js-${prefix}`,
    });
    workers.push(js);
    const grpc = await startWorkerProcess(probeGrpcWorkerScript, {
      PROBE_BACKEND: "bench-grpc",
      TRELLIS_WORKER_URL: relayed.url,
      TRELLIS_WORKER_ID: `bench-grpc-${prefix}`,
    });
    workers.push(grpc);
    const grpcLocal = await startWorkerProcess(probeGrpcWorkerScript, {
      PROBE_BACKEND: "bench-grpc-local",
      TRELLIS_WORKER_URL: held.url,
      TRELLIS_WORKER_ID: `bench-grpc-local-${prefix}`,
    });
    workers.push(grpcLocal);
    const grpcGateway = await startWorkerProcess(probeGrpcWorkerScript, {
      PROBE_BACKEND: "bench-grpc-gw",
      TRELLIS_WORKER_URL: gatewayUrl,
      TRELLIS_WORKER_ID: `bench-grpc-gw-${prefix}`,
    });
    workers.push(grpcGateway);
    const run: Record<WorkerPath, () => Promise<WorkerPathPoint>> = {
      jetstream: () => measure("jetstream", "bench-js", js),
      grpc: () => measure("grpc", "bench-grpc", grpc),
      "grpc-local": () => measure("grpc-local", "bench-grpc-local", grpcLocal),
      "grpc-gw": () => measure("grpc-gw", "bench-grpc-gw", grpcGateway),
    };
    const all: WorkerPathPoint[][] = [];
    for (let round = 0; round < rounds; round++) {
      // Forward in even rounds, backward in odd ones; stored in PATHS order.
      const order = round % 2 === 0 ? PATHS : [...PATHS].reverse();
      const points = new Map<WorkerPath, WorkerPathPoint>();
      for (const path of order) points.set(path, await run[path]());
      all.push(PATHS.map((path) => points.get(path) as WorkerPathPoint));
    }
    const median = (values: number[]) => quantile(values, 0.5);
    const point = (i: number): WorkerPathPoint => {
      const of = all.map((r) => r[i] as WorkerPathPoint);
      const m = (f: (p: WorkerPathPoint) => number) => median(of.map(f));
      return {
        path: (of[0] as WorkerPathPoint).path,
        turns: turns * rounds,
        routerCpuMsPerTurn: m((p) => p.routerCpuMsPerTurn),
        workerCpuMsPerTurn: m((p) => p.workerCpuMsPerTurn),
        totalCpuMsPerTurn: m((p) => p.totalCpuMsPerTurn),
        p50Ms: m((p) => p.p50Ms),
        p99Ms: m((p) => p.p99Ms),
        natsMsgsPerTurn: m((p) => p.natsMsgsPerTurn),
        errors: of.reduce((sum, p) => sum + p.errors, 0),
      };
    };
    const ratio = (i: number) =>
      median(
        all.map(
          (r) =>
            (r[i] as WorkerPathPoint).totalCpuMsPerTurn /
            (r[0] as WorkerPathPoint).totalCpuMsPerTurn,
        ),
      );
    return {
      points: PATHS.map((_, i) => point(i)),
      rounds: all,
      cpuRatio: ratio(1),
      cpuRatioLocal: ratio(2),
      cpuRatioGateway: ratio(3),
    };
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    sessions.close();
    localSessions.close();
    relayed.server.close();
    held.server.close();
    gateway.close();
    await routed.stop();
    await deleteTestStreams(prefix);
  }
}

/** The result as a table. */
export function formatWorkerGrpcBench(result: WorkerGrpcBenchResult): string {
  const rows = result.points.map(
    (p) =>
      `  ${p.path.padEnd(10)} ${String(p.turns).padStart(5)}  ${p.routerCpuMsPerTurn.toFixed(3).padStart(8)}  ${p.workerCpuMsPerTurn.toFixed(3).padStart(8)}  ${p.totalCpuMsPerTurn.toFixed(3).padStart(8)}  ${p.p50Ms.toFixed(2).padStart(7)}  ${p.p99Ms.toFixed(2).padStart(7)}  ${p.natsMsgsPerTurn.toFixed(1).padStart(9)}  ${p.errors}`,
  );
  const perRound = (i: number) =>
    result.rounds
      .map((r) => ((r[i]?.totalCpuMsPerTurn ?? 0) / (r[0]?.totalCpuMsPerTurn ?? 1)).toFixed(2))
      .join(" ");
  return [
    `worker paths: CPU per turn, one in flight, zero-latency probe backend (medians of ${result.rounds.length} alternating round(s))`,
    "  path       turns  router ms  worker ms  total ms   p50 ms   p99 ms  nats msgs  errors",
    ...rows,
    `  gRPC (relayed by another process) / JetStream total CPU per turn: ${result.cpuRatio.toFixed(2)}× (rounds: ${perRound(1)}; target ≤ 1.2×)`,
    `  gRPC (session held by the router's process) / JetStream: ${result.cpuRatioLocal.toFixed(2)}× (rounds: ${perRound(2)})`,
    `  gRPC (held by the router's process, through a gateway forwarder: a mesh) / JetStream: ${result.cpuRatioGateway.toFixed(2)}× (rounds: ${perRound(3)})`,
  ].join("\n");
}
