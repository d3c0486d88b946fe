/**
 * Heap over many turns: `trellis dev` of this checkout (forked with
 * `--expose-gc`, ./lib/fanout-server.ts) runs `TRELLIS_HEAP_TURNS` (default
 * 100,000) chat turns of the zero-latency agent at `TRELLIS_HEAP_CONCURRENCY`
 * (default 32) in flight, each worker's session replaced by a fresh one every
 * 100 turns (as the peer harness does). The server's heap after two forced GCs
 * is read every tenth of the run. "Flat" means the second half grows by no
 * more than noise: windows, caches and the owner's session map are bounded
 * and fill in the first part of the run.
 *
 *   npm run bench -- heap          # TRELLIS_TASKS_JOURNAL passes through
 */
import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { uniqueName } from "@trellis/testkit";
import { gcMemory, startGcDev } from "./lib/gc-dev.js";
import { freePort, limitsOutOfReach } from "./lib/proc.js";
import { bearerTransport } from "./lib/transport.js";
import { zeroLatencyGraph } from "./turn.bench.js";

const API_KEY = "trl_bench_heap_0123456789abcdefghijklmnopqrstuvw";
const TURNS_PER_SESSION = 100;

/** One heap reading. */
export interface HeapPoint {
  turns: number;
  heapMb: number;
  seconds: number;
}

/** What the benchmark measured. */
export interface HeapResult {
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

async function heapMb(child: ChildProcess): Promise<number> {
  return Number(((await gcMemory(child)).heapUsed / 1024 / 1024).toFixed(1));
}

/** Run the heap benchmark. */
export async function runHeapBench(
  options: { turns?: number; concurrency?: number; port?: number } = {},
): Promise<HeapResult> {
  const turns = options.turns ?? Number(process.env.TRELLIS_HEAP_TURNS ?? 100_000);
  const concurrency = options.concurrency ?? Number(process.env.TRELLIS_HEAP_CONCURRENCY ?? 32);
  const port = options.port ?? (await freePort());
  const dataDir = await mkdtemp(join(tmpdir(), "trellis-heap-"));
  const loadBefore = loadavg();
  const child = await startGcDev({
    port,
    dataDir,
    apiKey: API_KEY,
    // Out of reach, as in the peer harness: this measures memory, not limits.
    env: { ...limitsOutOfReach },
    timeoutMs: 180_000,
  });
  try {
    const transport = bearerTransport(`http://127.0.0.1:${port}`, API_KEY);
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
    const points: HeapPoint[] = [{ turns: 0, heapMb: await heapMb(child), seconds: 0 }];
    const start = performance.now();
    let issued = 0;
    let done = 0;
    let errors = 0;
    let nextReading = every;
    let reading: Promise<void> = Promise.resolve();
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
          reading = reading.then(async () => {
            points.push({ turns: at, heapMb: await heapMb(child), seconds });
          });
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
    await reading;
    points.sort((a, b) => a.turns - b.turns);
    const middle = points.find((p) => p.turns >= turns / 2) ?? points[0]!;
    const last = points.at(-1)!;
    const span = Math.max(1, last.turns - middle.turns);
    return {
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
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The result as text. */
export function formatHeapBench(result: HeapResult): string {
  const lines = [
    `heap over ${result.turns} chat turns, ${result.concurrency} in flight, journal ${result.journal}, errors ${result.errors}`,
    `load ${result.loadBefore.map((l) => l.toFixed(2)).join("/")} → ${result.loadAfter.map((l) => l.toFixed(2)).join("/")}`,
    "turns      heap MB   seconds",
    ...result.points.map(
      (p) =>
        `${String(p.turns).padStart(7)}  ${p.heapMb.toFixed(1).padStart(8)}  ${p.seconds.toFixed(0).padStart(8)}`,
    ),
    `second half: ${result.secondHalfMbPer10k} MB per 10,000 turns`,
  ];
  return lines.join("\n");
}
