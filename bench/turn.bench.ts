import { join } from "node:path";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { health } from "@trellis/contracts/grpc";
import { AgentService, TaskService } from "@trellis/contracts/tasks";
import { freePort, uniqueName } from "@trellis/testkit";
import pg from "pg";
import { type LoadResult, median, runLoad } from "./lib/load.js";
import { defaultMeshTogether, parseTogether, startBenchMesh } from "./lib/mesh.js";
import {
  cpuMsIfRunning,
  limitsOutOfReach,
  repoRoot,
  startDev,
  startNode,
  stopChild,
  totalCpuMs,
} from "./lib/proc.js";
import { bearerTransport } from "./lib/transport.js";

/** Options of {@link runTurnBench}. */
export interface TurnBenchOptions {
  /** Measured windows per point (default 3). */
  rounds?: number;
  /** Length of one window (default 3000 ms). */
  windowMs?: number;
  /** Warm-up before measuring a target (default 1500 ms). */
  warmupMs?: number;
  concurrencies?: readonly number[];
  /** Which Trellis targets to run (default both). */
  modes?: readonly ("embedded" | "distributed")[];
  /** Task turns (SubmitTask + WatchTask) or chat turns (ChatService.Send). */
  kind?: TurnKind;
}

/** One measured point. */
export interface TurnPoint {
  target: string;
  concurrency: number;
  p50Ms: number;
  p99Ms: number;
  perSecond: number;
  cpuMsPerTurn: number;
  /** CPU per turn of the target's PostgreSQL backends (distributed only). */
  dbCpuMsPerTurn?: number;
  /** CPU per turn of each of the target's processes, by name (distributed only; medians). */
  processCpuMsPerTurn?: Record<string, number>;
  errors: number;
  rounds: LoadResult[];
}

/** A target: something that does one "turn" per call and runs in some processes. */
export interface BenchTarget {
  name: string;
  pids(): number[];
  /** Its processes by name, when it has several (the mesh): CPU is reported for each too. */
  processes?(): Record<string, number>;
  /** Its PostgreSQL server's backends serving it (distributed), measured apart. */
  dbPids?(): Promise<number[]>;
  /** Prepare worker `worker` (e.g. create its session); called before each load. */
  op(worker: number, call: number): Promise<void>;
  close(): Promise<void>;
}

const API_KEY = "trellis-bench-key-0123456789abcdef";

/** The zero-latency agent: one constant assistant reply. */
export const zeroLatencyGraph = {
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
};

async function rawTarget(): Promise<BenchTarget> {
  const port = await freePort();
  const child = await startNode(
    join(repoRoot, "bench/raw-connect-server.ts"),
    [String(port)],
    {},
    /ready/,
  );
  const client = createClient(
    health.Health,
    createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }),
  );
  return {
    name: "raw Connect unary",
    pids: () => [child.pid as number],
    op: async () => {
      await client.check({ service: "" });
    },
    close: () => stopChild(child),
  };
}

/** A Trellis task-turn target on `transport` (sessions are created per worker lazily). */
export async function taskTurnOps(
  transport: Transport,
): Promise<(worker: number, call: number) => Promise<void>> {
  const agents = createClient(AgentService, transport);
  const tasks: Client<typeof TaskService> = createClient(TaskService, transport);
  const { agent } = await agents.createAgent({
    agent: {
      workspaceId: "default",
      name: "bench-zero",
      backend: "scripted",
      definition: zeroLatencyGraph,
    },
  });
  const sessions = new Map<number, string>();
  const run = uniqueName("b");
  return async (worker) => {
    const known = sessions.get(worker);
    const { task } = await tasks.submitTask({
      sessionId: known ?? `ses_${run}_${worker}`,
      createSession: known === undefined,
      workspaceId: "default",
      agentId: agent?.id ?? "",
      input: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "hi" } } }] },
    });
    if (!task) throw new Error("no task");
    sessions.set(worker, task.sessionId);
    for await (const change of tasks.watchTask({ taskId: task.id })) {
      const status = change.task?.status ?? 0;
      if (status >= 5) break; // COMPLETED, FAILED, CANCELED
    }
  };
}

/** A chat-turn target: one `ChatService.Send` per call, one session per worker. */
export async function chatTurnOps(
  transport: Transport,
  options: { turnsPerSession?: number } = {},
): Promise<(worker: number, call: number) => Promise<void>> {
  const agents = createClient(AgentService, transport);
  const chat = createClient(ChatService, transport);
  const { agent } = await agents.createAgent({
    agent: {
      workspaceId: "default",
      name: "bench-chat-zero",
      backend: "scripted",
      definition: zeroLatencyGraph,
    },
  });
  const run = uniqueName("c");
  // With turnsPerSession, each worker moves to a fresh session that often.
  const turns: number[] = [];
  const sessionOf = (worker: number) => {
    if (options.turnsPerSession === undefined) return `ses_${run}_${worker}`;
    const mine = turns[worker] ?? 0;
    turns[worker] = mine + 1;
    return `ses_${run}_${worker}_${Math.floor(mine / options.turnsPerSession)}`;
  };
  return async (worker) => {
    const { outcome } = await chat.send({
      sessionId: sessionOf(worker),
      agentId: agent?.id ?? "",
      message: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "hi" } } }] },
    });
    if (outcome?.kind.case !== "completed")
      throw new Error(
        `turn did not complete: ${outcome?.kind.case} ${JSON.stringify(outcome?.kind.value ?? null, (_, v) => (typeof v === "bigint" ? String(v) : v))}`,
      );
  };
}

/** What a Trellis target runs per call. */
export type TurnKind = "task" | "chat";

const opsFor = (kind: TurnKind, transport: Transport) =>
  kind === "task" ? taskTurnOps(transport) : chatTurnOps(transport);

/**
 * `trellis dev` of the checkout at `root` (default this one) as a target: the
 * A/B bench runs another checkout's beside this one's.
 */
export async function embeddedTarget(kind: TurnKind, root = repoRoot): Promise<BenchTarget> {
  const dev = await startDev({
    apiKey: API_KEY,
    tmpPrefix: "trellis-bench-",
    // A loaded shared machine can take over a minute to start it.
    timeoutMs: Number(process.env.TRELLIS_BENCH_START_MS ?? 180_000),
    root,
    env: { ...limitsOutOfReach },
  });
  const transport = bearerTransport(dev.baseUrl, API_KEY);
  const op = await opsFor(kind, transport);
  return {
    name: `Trellis ${kind} turn, embedded`,
    pids: () => [dev.child.pid as number],
    op,
    close: () => dev.stop(),
  };
}

async function distributedTarget(kind: TurnKind): Promise<BenchTarget> {
  // Services sharing a process as `trellis mesh` runs them, or as
  // `TRELLIS_BENCH_TOGETHER` says (its TRELLIS_MESH_TOGETHER; `none`: apart).
  const together = parseTogether(process.env.TRELLIS_BENCH_TOGETHER || defaultMeshTogether);
  const { mesh, db, stop } = await startBenchMesh("bench", {
    env: { TRELLIS_API_KEY: API_KEY, TRELLIS_LOG_LEVEL: "warn", ...limitsOutOfReach },
    together,
  });
  const transport = bearerTransport(mesh.urls.gateway as string, API_KEY);
  const op = await opsFor(kind, transport);
  const processes = () => mesh.pids();
  return {
    name: `Trellis ${kind} turn, distributed${together.map((g) => ` (${g.join("+")})`).join("")}`,
    pids: () => Object.values(processes()),
    processes,
    // The backends of this database (the server must be on this machine).
    async dbPids() {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const result = await client.query<{ pid: number }>(
          "select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()",
          [db.name],
        );
        return result.rows.map((row) => row.pid);
      } finally {
        await client.end();
      }
    },
    op,
    close: stop,
  };
}

async function measure(
  target: BenchTarget,
  concurrency: number,
  options: Required<TurnBenchOptions>,
): Promise<TurnPoint> {
  await runLoad(target.op, { concurrency, durationMs: options.warmupMs });
  const rounds: LoadResult[] = [];
  const cpu: number[] = [];
  const dbCpu: number[] = [];
  const byProcess = new Map<string, number[]>();
  const sum = (pids: readonly number[]) =>
    pids.reduce((total, pid) => total + (cpuMsIfRunning(pid) ?? 0), 0);
  for (let i = 0; i < options.rounds; i++) {
    const dbPids = (await target.dbPids?.()) ?? [];
    const dbBefore = sum(dbPids);
    const processes = Object.entries(target.processes?.() ?? {});
    const processesBefore = processes.map(([, pid]) => cpuMsIfRunning(pid) ?? 0);
    const before = totalCpuMs(target.pids());
    const result = await runLoad(target.op, { concurrency, durationMs: options.windowMs });
    const calls = Math.max(1, result.calls);
    cpu.push((totalCpuMs(target.pids()) - before) / calls);
    if (target.dbPids) dbCpu.push((sum(dbPids) - dbBefore) / calls);
    processes.forEach(([name, pid], j) => {
      const spent = (cpuMsIfRunning(pid) ?? 0) - (processesBefore[j] ?? 0);
      byProcess.set(name, [...(byProcess.get(name) ?? []), spent / calls]);
    });
    rounds.push(result);
  }
  return {
    target: target.name,
    concurrency,
    p50Ms: median(rounds.map((r) => r.p50Ms)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    perSecond: median(rounds.map((r) => r.perSecond)),
    cpuMsPerTurn: median(cpu),
    ...(dbCpu.length > 0 ? { dbCpuMsPerTurn: median(dbCpu) } : {}),
    ...(byProcess.size > 0
      ? {
          processCpuMsPerTurn: Object.fromEntries(
            [...byProcess].map(([name, values]) => [name, median(values)]),
          ),
        }
      : {}),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
    rounds,
  };
}

/** Run the benchmark; targets are started one at a time so they never compete. */
export async function runTurnBench(options: TurnBenchOptions = {}): Promise<TurnPoint[]> {
  const full: Required<TurnBenchOptions> = {
    rounds: options.rounds ?? 3,
    windowMs: options.windowMs ?? 3000,
    warmupMs: options.warmupMs ?? 1500,
    concurrencies: options.concurrencies ?? [1, 32],
    modes: options.modes ?? ["embedded", "distributed"],
    kind: options.kind ?? "task",
  };
  const factories: (() => Promise<BenchTarget>)[] = [rawTarget];
  if (full.modes.includes("embedded")) factories.push(() => embeddedTarget(full.kind));
  if (full.modes.includes("distributed")) factories.push(() => distributedTarget(full.kind));
  const points: TurnPoint[] = [];
  for (const factory of factories) {
    const target = await factory();
    try {
      for (const concurrency of full.concurrencies)
        points.push(await measure(target, concurrency, full));
    } finally {
      await target.close();
    }
  }
  return points;
}

/** A table with ratios to the raw call at the same concurrency. */
export function formatTurnBench(points: readonly TurnPoint[], title = "turn bench"): string {
  const raw = new Map(
    points.filter((p) => p.target.startsWith("raw")).map((p) => [p.concurrency, p]),
  );
  const lines = [
    `${title} (medians of ${points[0]?.rounds.length ?? 0} windows; ratios to the raw Connect call at the same concurrency)`,
    "target                              in-flight   p50 ms  p99 ms   turns/s  cpu ms/turn  p50×raw  tput×raw  errors  pg ms/turn",
  ];
  for (const p of points) {
    const base = raw.get(p.concurrency);
    const r = (x: number | undefined) =>
      x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(2);
    lines.push(
      `${p.target.padEnd(36)}${String(p.concurrency).padStart(9)}  ${p.p50Ms.toFixed(2).padStart(7)} ${p.p99Ms
        .toFixed(2)
        .padStart(
          7,
        )} ${p.perSecond.toFixed(0).padStart(9)}  ${p.cpuMsPerTurn.toFixed(3).padStart(11)}  ${r(
        base ? p.p50Ms / base.p50Ms : undefined,
      ).padStart(
        7,
      )}  ${r(base ? p.perSecond / base.perSecond : undefined).padStart(8)}  ${String(p.errors).padStart(6)}  ${(p.dbCpuMsPerTurn === undefined ? "-" : p.dbCpuMsPerTurn.toFixed(3)).padStart(10)}`,
    );
    if (p.processCpuMsPerTurn) {
      const parts = Object.entries(p.processCpuMsPerTurn)
        .sort(([, a], [, b]) => b - a)
        .map(([name, ms]) => `${name} ${ms.toFixed(2)}`);
      lines.push(`${"".padEnd(38)}cpu ms/turn by process: ${parts.join(", ")}`);
    }
  }
  return lines.join("\n");
}
