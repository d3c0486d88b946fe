/**
 * Whole-process stalls of a long embedded run, and what each one was.
 *
 * Embedded Trellis runs in this process (`startEmbedded`, PGlite in a
 * temporary directory, rate limits out of reach, its maintenance loop on);
 * `ChatService.Send` turns of the zero-latency agent go through its port at
 * `TRELLIS_STALL_CONCURRENCY` in flight (default 8), each worker's session
 * replaced every 100 turns, until `TRELLIS_STALL_TURNS` (default 40,000).
 *
 * A 10 ms interval timer watches the event loop: a gap longer than
 * `TRELLIS_STALL_MS` (default 250) is a stall. For each it records what the
 * process did meanwhile — its user and system CPU over the gap (busy: the
 * loop ran code; neither: the process was blocked in a system call or not
 * scheduled), its voluntary / involuntary context switches, file-system
 * writes — and what overlapped it: garbage-collection pauses
 * (`PerformanceObserver`), maintenance statements (the loop's debug lines:
 * checkpoint, vacuum, analyze). Progress every 2,500 turns: turns/s, heap,
 * array buffers (PGlite's WebAssembly memory is one), RSS, the data
 * directory's size, the longest gap.
 *
 *   npx tsx bench/embedded-stalls.ts
 *   TRELLIS_EMBEDDED_VACUUM=off npx tsx bench/embedded-stalls.ts   # without vacuum/analyze
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { allServices } from "../src/services.js";
import { runLoad } from "./lib/load.js";
import { limitsOutOfReach } from "./lib/proc.js";
import { wholeFromEnv } from "./lib/settings.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis-stalls-key-0123456789abcdef";
const TURNS_PER_SESSION = 100;
const PROGRESS_EVERY = 2500;
const TICK_MS = 10;

const totalTurns = wholeFromEnv(process.env, "TRELLIS_STALL_TURNS", 40_000);
const concurrency = wholeFromEnv(process.env, "TRELLIS_STALL_CONCURRENCY", 8);
const stallMs = wholeFromEnv(process.env, "TRELLIS_STALL_MS", 250);

/** Something that took time on the loop or beside it, with when it ended. */
interface Span {
  kind: "gc" | "maintenance";
  what: string;
  end: number;
  ms: number;
}

/** One stall and what the process did during it. */
interface Stall {
  ms: number;
  turns: number;
  userMs: number;
  systemMs: number;
  voluntary: number;
  involuntary: number;
  fsWrites: number;
  overlaps: string[];
}

const spans: Span[] = [];
const gc = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.duration >= 20) {
      spans.push({
        kind: "gc",
        what: `gc ${entry.duration.toFixed(0)} ms`,
        end: entry.startTime + entry.duration,
        ms: entry.duration,
      });
    }
  }
});
gc.observe({ entryTypes: ["gc"] });

// Maintenance statements arrive as debug lines; keep those, print warnings.
const write = (chunk: string) => {
  if (chunk.includes('"database maintenance"')) {
    const line = JSON.parse(chunk) as { kind: string; table?: string; ms: number };
    spans.push({
      kind: "maintenance",
      what: `${line.kind}${line.table ? ` ${line.table}` : ""} ${line.ms} ms`,
      end: performance.now(),
      ms: line.ms,
    });
  } else if (!chunk.includes('"level":"debug"')) {
    process.stderr.write(chunk);
  }
};

const dataDir = await mkdtemp(join(tmpdir(), "trellis-stalls-"));
const trellis = await startEmbedded({
  services: allServices,
  dataDir,
  port: 0,
  logger: createLogger({ service: "trellis", level: "debug", write }),
  env: {
    ...process.env,
    TRELLIS_API_KEY: API_KEY,
    TRELLIS_LOG_LEVEL: "warn",
    ...limitsOutOfReach,
  },
});

let turns = 0;
const stalls: Stall[] = [];
let longestInChunk = 0;
let last = performance.now();
let lastCpu = process.cpuUsage();
let lastUsage = process.resourceUsage();
const watch = setInterval(() => {
  const now = performance.now();
  const gap = now - last - TICK_MS;
  const cpu = process.cpuUsage();
  const usage = process.resourceUsage();
  if (gap > longestInChunk) longestInChunk = gap;
  if (gap >= stallMs) {
    const from = now - gap;
    stalls.push({
      ms: gap,
      turns,
      userMs: (cpu.user - lastCpu.user) / 1000,
      systemMs: (cpu.system - lastCpu.system) / 1000,
      voluntary: usage.voluntaryContextSwitches - lastUsage.voluntaryContextSwitches,
      involuntary: usage.involuntaryContextSwitches - lastUsage.involuntaryContextSwitches,
      fsWrites: usage.fsWrite - lastUsage.fsWrite,
      // Ended within the gap, or ran across it (a span is logged at its end).
      overlaps: spans.filter((s) => s.end >= from && s.end - s.ms <= now).map((s) => s.what),
    });
  }
  last = now;
  lastCpu = cpu;
  lastUsage = usage;
}, TICK_MS);

const du = () => execFileSync("du", ["-sm", dataDir]).toString().split("\t")[0];
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
const started = performance.now();
console.log(
  `embedded stalls: ${totalTurns} chat turns at ${concurrency} in flight, stall ≥ ${stallMs} ms, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}, TRELLIS_EMBEDDED_VACUUM=${process.env.TRELLIS_EMBEDDED_VACUUM ?? "(default)"}`,
);
console.log("turns\tturns/s\theap MB\tarray buffers MB\trss MB\tdata MB\tlongest gap ms\tload");
let errors = 0;
try {
  const transport = bearerTransport(trellis.address.url, API_KEY);
  const send = await chatTurnOps(transport, { turnsPerSession: TURNS_PER_SESSION });
  const op = async (worker: number, call: number) => {
    await send(worker, call);
    turns++;
  };
  while (turns < totalTurns) {
    const chunkStart = performance.now();
    const before = turns;
    // Short load windows; progress once a chunk of turns is done.
    while (turns - before < PROGRESS_EVERY && turns < totalTurns) {
      const result = await runLoad(op, { concurrency, durationMs: 2000 });
      errors += result.errors;
    }
    const seconds = (performance.now() - chunkStart) / 1000;
    const memory = process.memoryUsage();
    console.log(
      [
        turns,
        ((turns - before) / seconds).toFixed(0),
        mb(memory.heapUsed),
        mb(memory.arrayBuffers),
        mb(memory.rss),
        du(),
        longestInChunk.toFixed(0),
        loadavg()[0]?.toFixed(1),
      ].join("\t"),
    );
    longestInChunk = 0;
  }
} finally {
  clearInterval(watch);
  gc.disconnect();
  await trellis.close({ graceMs: 5000 });
  await rm(dataDir, { recursive: true, force: true });
}

const minutes = (performance.now() - started) / 60_000;
console.log(
  `\n${turns} turns in ${minutes.toFixed(1)} min, ${errors} errors, ${stalls.length} stalls ≥ ${stallMs} ms (${stalls
    .reduce((sum, s) => sum + s.ms, 0)
    .toFixed(0)} ms in all)`,
);
console.log("at turn\tms\tuser ms\tsys ms\tvol cs\tinvol cs\tfs writes\toverlapping");
for (const s of stalls) {
  console.log(
    [
      s.turns,
      s.ms.toFixed(0),
      s.userMs.toFixed(0),
      s.systemMs.toFixed(0),
      s.voluntary,
      s.involuntary,
      s.fsWrites,
      s.overlaps.join("; ") || "—",
    ].join("\t"),
  );
}
const maintenance = spans.filter((s) => s.kind === "maintenance");
const gcs = spans.filter((s) => s.kind === "gc");
console.log(
  `maintenance: ${maintenance.length} statements, ${maintenance
    .reduce((sum, s) => sum + s.ms, 0)
    .toFixed(
      0,
    )} ms; gc pauses ≥ 20 ms: ${gcs.length}, longest ${Math.max(0, ...gcs.map((g) => g.ms)).toFixed(0)} ms`,
);
