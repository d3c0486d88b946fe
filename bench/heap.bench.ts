/**
 * Heap over many turns: `TRELLIS_HEAP_TURNS` (default 100,000) chat turns of
 * the zero-latency agent at `TRELLIS_HEAP_CONCURRENCY` (default 32) in
 * flight, each worker's session replaced by a fresh one every 100 turns (as
 * the peer harness does). Every process's heap after two forced GCs is read
 * every tenth of the run. "Flat" means the second half grows by no more than
 * noise: windows, caches and the owner's session map are bounded and fill in
 * the first part of the run.
 *
 * `TRELLIS_HEAP_MODE`: `embedded` (default) runs `trellis dev` of this
 * checkout, forked with `--expose-gc` (./lib/fanout-server.ts);
 * `distributed` runs `trellis mesh` on the test PostgreSQL and NATS, every
 * process with `--expose-gc` and ./lib/heap-probe.mjs (SIGUSR2 → its heap in
 * a file), and reports each process and their sum; `TRELLIS_HEAP_SNAPSHOTS=1`
 * also keeps a heap snapshot of every process at every reading (compare two
 * with `npx tsx bench/heap-diff.ts A B`).
 *
 *   npm run bench -- heap          # TRELLIS_TASKS_JOURNAL passes through
 */
import type { ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { freePort, uniqueName } from "@trellis/testkit";
import { gcMemory, startGcDev } from "./lib/gc-dev.js";
import { startBenchMesh } from "./lib/mesh.js";
import { limitsOutOfReach, repoRoot } from "./lib/proc.js";
import { choiceFromEnv, wholeFromEnv } from "./lib/settings.js";
import { bearerTransport } from "./lib/transport.js";
import { zeroLatencyGraph } from "./turn.bench.js";

const API_KEY = "trl_bench_heap_0123456789abcdefghijklmnopqrstuvw";
const TURNS_PER_SESSION = 100;

/** One heap reading. */
export interface HeapPoint {
  turns: number;
  /** All processes together. */
  heapMb: number;
  /** Each process (distributed: by service; embedded: `trellis dev`). */
  processes: Record<string, number>;
  seconds: number;
}

/** What the benchmark measured. */
export interface HeapResult {
  mode: "embedded" | "distributed";
  turns: number;
  concurrency: number;
  journal: string;
  points: HeapPoint[];
  /** Heap growth over the second half of the run, MB per 10,000 turns. */
  secondHalfMbPer10k: number;
  errors: number;
  loadBefore: number[];
  loadAfter: number[];
}

const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));

/** The settings of a run, refused by name when they are nonsense. */
export function heapSettings(env: Readonly<Record<string, string | undefined>>): {
  mode: "embedded" | "distributed";
  turns: number;
  concurrency: number;
} {
  return {
    mode: choiceFromEnv(env, "TRELLIS_HEAP_MODE", ["embedded", "distributed"]),
    turns: wholeFromEnv(env, "TRELLIS_HEAP_TURNS", 100_000),
    concurrency: wholeFromEnv(env, "TRELLIS_HEAP_CONCURRENCY", 32),
  };
}

/** A running Trellis whose heap is read. */
interface HeapTarget {
  url: string;
  /** Each process's heap (MB) after two forced GCs. */
  heaps(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

async function embeddedTarget(port: number): Promise<HeapTarget> {
  const dataDir = await mkdtemp(join(tmpdir(), "trellis-heap-"));
  const child: ChildProcess = await startGcDev({
    port,
    dataDir,
    apiKey: API_KEY,
    // Out of reach, as in the peer harness: this measures memory, not limits.
    env: { ...limitsOutOfReach },
    timeoutMs: 180_000,
  });
  return {
    url: `http://127.0.0.1:${port}`,
    heaps: async () => ({ "trellis dev": mb((await gcMemory(child)).heapUsed) }),
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function distributedTarget(): Promise<HeapTarget> {
  const probeDir = await mkdtemp(join(tmpdir(), "trellis-heap-probe-"));
  const { mesh, stop } = await startBenchMesh("heap", {
    env: {
      TRELLIS_API_KEY: API_KEY,
      TRELLIS_LOG_LEVEL: "warn",
      TRELLIS_HEAP_PROBE_DIR: probeDir,
      ...limitsOutOfReach,
    },
    nodeArgs: ["--expose-gc", "--import", join(repoRoot, "bench/lib/heap-probe.mjs")],
    readyTimeoutMs: 180_000,
  });
  const pids = mesh.pids();
  const readOne = async (pid: number): Promise<number> => {
    const file = join(probeDir, `${pid}.json`);
    await rm(file, { force: true });
    process.kill(pid, "SIGUSR2");
    for (let waited = 0; waited < 30_000; waited += 50) {
      const text = await readFile(file, "utf8").catch(() => undefined);
      if (text !== undefined) return mb((JSON.parse(text) as { heapUsed: number }).heapUsed);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`process ${pid} did not answer the heap probe in 30 s`);
  };
  return {
    url: mesh.urls.gateway as string,
    async heaps() {
      const out: Record<string, number> = {};
      for (const [name, pid] of Object.entries(mesh.pids())) out[name] = await readOne(pid);
      return out;
    },
    async stop() {
      await stop();
      if (process.env.TRELLIS_HEAP_SNAPSHOTS === "1") {
        console.log(`heap snapshots (<pid>-<reading>.heapsnapshot) kept in ${probeDir}`);
        console.log(`pids: ${JSON.stringify(pids)}`);
      } else await rm(probeDir, { recursive: true, force: true });
    },
  };
}

async function reading(target: HeapTarget, turns: number, seconds: number): Promise<HeapPoint> {
  const processes = await target.heaps();
  const sum = Object.values(processes).reduce((a, b) => a + b, 0);
  const heapMb = Number(sum.toFixed(1));
  return { turns, heapMb, processes, seconds };
}

/** Run the heap benchmark. */
export async function runHeapBench(
  options: {
    mode?: "embedded" | "distributed";
    turns?: number;
    concurrency?: number;
    port?: number;
  } = {},
): Promise<HeapResult> {
  const settings = heapSettings(process.env);
  const mode = options.mode ?? settings.mode;
  const turns = options.turns ?? settings.turns;
  const concurrency = options.concurrency ?? settings.concurrency;
  const loadBefore = loadavg();
  const target =
    mode === "distributed"
      ? await distributedTarget()
      : await embeddedTarget(options.port ?? (await freePort()));
  try {
    const transport = bearerTransport(target.url, API_KEY);
    const { agent } = await createClient(AgentService, transport).createAgent({
      agent: {
        workspaceId: "default",
        name: "bench-heap-zero",
        backend: "scripted",
        definition: zeroLatencyGraph,
      },
    });
    const chat = createClient(ChatService, transport);
    const run = uniqueName("h");
    const every = Math.max(1, Math.floor(turns / 10));
    const points: HeapPoint[] = [await reading(target, 0, 0)];
    const start = performance.now();
    let issued = 0;
    let done = 0;
    let errors = 0;
    let nextReading = every;
    let pending: Promise<void> = Promise.resolve();
    const worker = async (w: number) => {
      for (let mine = 0; issued < turns; mine += 1) {
        issued += 1;
        const session = `ses_${run}_${w}_${Math.floor(mine / TURNS_PER_SESSION)}`;
        try {
          const { outcome } = await chat.send({
            sessionId: session,
            agentId: agent?.id ?? "",
            message: {
              role: Role.USER,
              parts: [{ kind: { case: "text", value: { text: "hi" } } }],
            },
          });
          if (outcome?.kind.case !== "completed") errors += 1;
        } catch {
          errors += 1;
        }
        done += 1;
        if (done >= nextReading) {
          const at = nextReading;
          nextReading += every;
          const seconds = (performance.now() - start) / 1000;
          pending = pending.then(async () => {
            points.push(await reading(target, at, seconds));
          });
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
    await pending;
    points.sort((a, b) => a.turns - b.turns);
    const middle = points.find((p) => p.turns >= turns / 2) ?? points[0]!;
    const last = points.at(-1)!;
    const span = Math.max(1, last.turns - middle.turns);
    return {
      mode,
      turns,
      concurrency,
      journal: process.env.TRELLIS_TASKS_JOURNAL ?? "(default)",
      points,
      secondHalfMbPer10k: Number((((last.heapMb - middle.heapMb) / span) * 10_000).toFixed(2)),
      errors,
      loadBefore,
      loadAfter: loadavg(),
    };
  } finally {
    await target.stop();
  }
}

/** The result as text. */
export function formatHeapBench(result: HeapResult): string {
  const names = result.mode === "distributed" ? Object.keys(result.points[0]?.processes ?? {}) : [];
  const lines = [
    `heap over ${result.turns} chat turns (${result.mode}), ${result.concurrency} in flight, journal ${result.journal}, errors ${result.errors}`,
    `load ${result.loadBefore.map((l) => l.toFixed(2)).join("/")} → ${result.loadAfter.map((l) => l.toFixed(2)).join("/")}`,
    `turns      heap MB   seconds  ${names.map((n) => n.padStart(10)).join(" ")}`,
    ...result.points.map(
      (p) =>
        `${String(p.turns).padStart(7)}  ${p.heapMb.toFixed(1).padStart(8)}  ${p.seconds.toFixed(0).padStart(8)}  ${names.map((n) => (p.processes[n]?.toFixed(1) ?? "-").padStart(10)).join(" ")}`,
    ),
    `second half: ${result.secondHalfMbPer10k} MB per 10,000 turns`,
  ];
  return lines.join("\n");
}
