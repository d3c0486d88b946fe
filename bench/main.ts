/**
 * `npm run bench`: every Trellis benchmark in one run, printed as ratios to a
 * baseline measured in the same run (absolute numbers drift 15–30 % between
 * runs on a 2-core machine; ratios measured side by side are what we compare).
 *
 *   npm run bench                 all benchmarks
 *   npm run bench -- event-log    only the named ones
 *   TRELLIS_BENCH_BASE=../base npm run bench -- turn-ab
 *                                 this checkout's turn against another's, side by side
 *   npm run bench -- heap         server heap over 100,000 chat turns (TRELLIS_HEAP_TURNS; TRELLIS_HEAP_MODE=distributed: every mesh process)
 *   npm run bench -- idle         CPU ms/s of each idle process, embedded and mesh
 *   npm run bench -- rpc-stack    server CPU of one RPC hop: bare Connect, runtime, internal
 *   npm run bench -- worker-grpc  a turn through a gRPC worker vs a JetStream worker
 *                                 (TRELLIS_BENCH_ROUNDS alternating rounds, default 3;
 *                                 TRELLIS_BENCH_WORKER_TURNS per path and round)
 *
 * Needs NATS (TRELLIS_TEST_NATS_URL or nats://127.0.0.1:4222); the receipts
 * bench uses PostgreSQL when one answers (TRELLIS_TEST_DATABASE_URL), else
 * PGlite. The streams bench holds 10,000 connections open: both processes
 * need that many descriptors (the npm script raises `ulimit -n` to the hard
 * limit). Results are
 * also written as JSON to .trellis/bench/<name>.json; docs/benchmarks.md
 * records them with the machine's load.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { formatAuthBench, runAuthBench } from "./auth.bench.js";
import { formatEventLogBench, runEventLogBench } from "./event-log.bench.js";
import { formatHeapBench, runHeapBench } from "./heap.bench.js";
import { formatHostileMetadataBench, runHostileMetadataBench } from "./hostile-metadata.bench.js";
import { formatIdleBench, runIdleBench } from "./idle.bench.js";
import { formatJournalBench, runJournalBench } from "./journal.bench.js";
import { formatLeaseBench, runLeaseBench } from "./lease.bench.js";
import { formatPublisherBench, runPublisherBench } from "./publisher.bench.js";
import { formatReceiptsBench, runReceiptsBench } from "./receipts.bench.js";
import { formatRoutingBench, runRoutingBench } from "./routing.bench.js";
import { formatRpcStackBench, runRpcStackBench } from "./rpc-stack.bench.js";
import { formatStreamsBench, runStreamsBench } from "./streams.bench.js";
import { formatTurnBench, runTurnBench } from "./turn.bench.js";
import { formatTurnAbBench, runTurnAbBench, turnAbOptionsFromEnv } from "./turn-ab.bench.js";
import { formatUiFanoutBench, runUiFanoutBench } from "./ui-fanout.bench.js";
import { formatWorkerGrpcBench, runWorkerGrpcBench } from "./worker-grpc.bench.js";

interface Bench {
  name: string;
  /** Left out of a run of every benchmark (needs set-up of its own). */
  onlyWhenNamed?: boolean;
  run(): Promise<{ text: string; data: unknown }>;
}

const natsUrl = process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222";

/** `TRELLIS_BENCH_MODES=embedded` (or `distributed`): the turn benches run only those targets. */
function turnModes(): { modes?: ("embedded" | "distributed")[] } {
  const raw = process.env.TRELLIS_BENCH_MODES;
  if (!raw) return {};
  const modes = raw.split(",").map((m) => m.trim());
  for (const mode of modes) {
    if (mode !== "embedded" && mode !== "distributed")
      throw new Error(`TRELLIS_BENCH_MODES: embedded and/or distributed, not ${mode}`);
  }
  return { modes: modes as ("embedded" | "distributed")[] };
}

const benches: Bench[] = [
  {
    name: "heap",
    onlyWhenNamed: true,
    async run() {
      const result = await runHeapBench();
      return { text: formatHeapBench(result), data: result };
    },
  },
  {
    name: "event-log",
    async run() {
      const result = await runEventLogBench({ servers: natsUrl });
      return { text: formatEventLogBench(result), data: result };
    },
  },
  {
    name: "task-turn",
    async run() {
      const points = await runTurnBench({ kind: "task", ...turnModes() });
      return {
        text: formatTurnBench(points, "task turn: submit → terminal, zero-latency agent"),
        data: points,
      };
    },
  },
  {
    name: "chat-turn",
    async run() {
      const points = await runTurnBench({ kind: "chat", ...turnModes() });
      return {
        text: formatTurnBench(points, "chat turn: ChatService.Send, zero-latency agent"),
        data: points,
      };
    },
  },
  {
    // Only when named, and only with TRELLIS_BENCH_BASE (see turn-ab.bench.ts).
    name: "turn-ab",
    onlyWhenNamed: true,
    async run() {
      const options = turnAbOptionsFromEnv(process.env);
      if (!options) {
        throw new Error(
          "turn-ab compares with another checkout: set TRELLIS_BENCH_BASE to its root (see bench/turn-ab.bench.ts)",
        );
      }
      const points = await runTurnAbBench(options);
      return {
        text: formatTurnAbBench(points, `${options.kind} turn A/B against ${options.base}`),
        data: points,
      };
    },
  },
  {
    // CPU of idle processes (CPU time from /proc: robust on a busy machine).
    name: "idle",
    async run() {
      const results = await runIdleBench();
      return { text: formatIdleBench(results), data: results };
    },
  },
  {
    name: "journal",
    async run() {
      const points = await runJournalBench();
      return { text: formatJournalBench(points), data: points };
    },
  },
  {
    // The journal's publisher against the outbox relay: CPU per event published.
    name: "publisher",
    async run() {
      const points = await runPublisherBench();
      return { text: formatPublisherBench(points), data: points };
    },
  },
  {
    name: "lease",
    async run() {
      const points = await runLeaseBench();
      return { text: formatLeaseBench(points), data: points };
    },
  },
  {
    name: "receipts",
    async run() {
      const result = await runReceiptsBench();
      return { text: formatReceiptsBench(result), data: result };
    },
  },
  {
    name: "routing",
    async run() {
      const result = await runRoutingBench();
      return { text: formatRoutingBench(result), data: result };
    },
  },
  {
    // One RPC hop's server CPU: bare Connect, the runtime, an internal service (issue 20).
    name: "rpc-stack",
    async run() {
      const rounds = Number(process.env.TRELLIS_BENCH_ROUNDS ?? 3);
      const windowMs = Number(process.env.TRELLIS_BENCH_WINDOW_MS ?? 3000);
      const result = await runRpcStackBench({ rounds, windowMs });
      return { text: formatRpcStackBench(result), data: result };
    },
  },
  {
    // The gRPC worker path against the JetStream one, CPU per turn (issue 23).
    name: "worker-grpc",
    async run() {
      const turns = Number(process.env.TRELLIS_BENCH_WORKER_TURNS ?? 400);
      const rounds = Number(process.env.TRELLIS_BENCH_ROUNDS ?? 3);
      const result = await runWorkerGrpcBench({ turns, rounds, warmup: Math.min(50, turns) });
      return { text: formatWorkerGrpcBench(result), data: result };
    },
  },
  {
    name: "ui-fanout",
    async run() {
      const result = await runUiFanoutBench();
      return { text: formatUiFanoutBench(result), data: result };
    },
  },
  {
    name: "auth",
    async run() {
      const result = await runAuthBench();
      return { text: formatAuthBench(result), data: result };
    },
  },
  {
    // Issue 22: a 200,000-key metadata refusal while GET /v1 is probed.
    name: "hostile-metadata",
    async run() {
      const result = await runHostileMetadataBench();
      return { text: formatHostileMetadataBench(result), data: result };
    },
  },
  {
    name: "streams",
    async run() {
      const result = await runStreamsBench();
      return { text: formatStreamsBench(result), data: result };
    },
  },
];

const wanted = process.argv.slice(2);
const selected = wanted.length
  ? benches.filter((b) => wanted.includes(b.name))
  : benches.filter((b) => !b.onlyWhenNamed);
if (selected.length === 0) {
  console.error(
    `no such benchmark: ${wanted.join(", ")} (have: ${benches.map((b) => b.name).join(", ")})`,
  );
  process.exit(2);
}
await mkdir(".trellis/bench", { recursive: true });
console.log(
  `load average before: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
for (const bench of selected) {
  const { text, data } = await bench.run();
  console.log(`\n${text}`);
  await writeFile(
    `.trellis/bench/${bench.name}.json`,
    JSON.stringify(data, (_k, v) => (typeof v === "bigint" ? String(v) : v), 2),
  );
}
console.log(
  `\nload average after: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
