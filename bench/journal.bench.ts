import { pathToFileURL } from "node:url";
import { create } from "@bufbuild/protobuf";
import { EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import {
  appendToOutbox,
  createJournal,
  createProjector,
  type Database,
  type Journal,
  journalMigrations,
  migrate,
  outboxMigrations,
} from "@trellis/storage";
import { sql } from "kysely";
import { type BenchDatabase, cpuByPid, cpuSince, openBenchDatabases } from "./lib/databases.js";
import { alternatingMedians } from "./lib/windows.js";

/** Options of {@link runJournalBench}. */
export interface JournalBenchOptions {
  /** Measured windows per point (default 3; the median is reported). */
  rounds?: number;
  /** Length of a window (default 1500 ms), after a 500 ms warm-up. */
  windowMs?: number;
  /** Appenders in flight (default [1, 32]). */
  concurrencies?: number[];
  /** PostgreSQL server URL (default TRELLIS_TEST_DATABASE_URL, then the local default). */
  databaseUrl?: string;
}

/** One measured point. */
export interface JournalBenchPoint {
  backend: "pglite" | "postgres";
  mode: string;
  concurrency: number;
  appendsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU of this process per append (ms). */
  clientCpuMs: number;
  /** CPU of the Postgres backends per append (ms; 0 on PGlite). */
  serverCpuMs: number;
  /** Database transactions per append (1 without group commit). */
  transactionsPerAppend: number;
}

const SCHEMA = "jbench";
const MODES = [
  "journal",
  "journal linger 1ms",
  "journal+projector",
  "tx per append",
  "outbox append",
] as const;
type Mode = (typeof MODES)[number];
const BODY = new Uint8Array(256).fill(7);

type Backend = BenchDatabase;

async function prepare(database: Database): Promise<void> {
  await migrate(database, {
    schema: SCHEMA,
    migrations: { ...outboxMigrations(SCHEMA), ...journalMigrations(SCHEMA) },
  });
  await sql`create table if not exists ${sql.id(SCHEMA, "plain")} (
    position bigserial primary key, stream text not null, kind text not null, body bytea not null,
    created_at timestamptz not null default now())`.execute(database.kysely);
  await sql`create table if not exists ${sql.id(SCHEMA, "projected")} (
    position bigint primary key, stream text not null, kind text not null)`.execute(
    database.kysely,
  );
  await sql`create index if not exists plain_stream_idx on ${sql.id(SCHEMA, "plain")} (stream, position)`.execute(
    database.kysely,
  );
}

/** One append of `mode` for appender `worker`, and how many transactions it took so far. */
async function appender(
  database: Database,
  mode: Mode,
): Promise<{
  append(worker: number, n: number): Promise<unknown>;
  transactions(): number;
  /** Waits until work behind the appends (a projector) has caught up. */
  settle(): Promise<void>;
  close(): Promise<void>;
}> {
  if (mode.startsWith("journal")) {
    const journal: Journal = createJournal(database, {
      schema: SCHEMA,
      lingerMs: mode === "journal linger 1ms" ? 1 : 0,
    });
    let batches = 0;
    const projector =
      mode === "journal+projector"
        ? await createProjector({
            database,
            schema: SCHEMA,
            name: "bench",
            journal,
            delayMs: 5,
            project: async (batch, trx) => {
              batches++;
              await sql`insert into ${sql.id(SCHEMA, "projected")} (position, stream, kind)
                values ${sql.join(batch.map((r) => sql`(${r.position}, ${r.stream}, ${r.kind})`))}`.execute(
                trx,
              );
            },
          })
        : undefined;
    return {
      append: (worker, n) =>
        journal.append(
          [0, 1, 2].map((i) => ({ stream: `ses_${worker}`, kind: `k${n}.${i}`, body: BODY })),
        ),
      transactions: () => journal.stats().batches + batches,
      settle: async () => projector?.waitFor(journal.head(), { timeoutMs: 60_000 }),
      async close() {
        await journal.close();
        // The projector catching up is part of the cost measured.
        await projector?.waitFor(journal.head(), { timeoutMs: 60_000 });
        await projector?.stop();
      },
    };
  }
  let count = 0;
  if (mode === "tx per append") {
    return {
      append: (worker, n) => {
        count++;
        return database.kysely
          .transaction()
          .execute((trx) =>
            sql`insert into ${sql.id(SCHEMA, "plain")} (stream, kind, body) values ${sql.join(
              [0, 1, 2].map((i) => sql`(${`ses_${worker}`}, ${`k${n}.${i}`}, ${BODY})`),
            )}`.execute(trx),
          );
      },
      transactions: () => count,
      settle: async () => {},
      close: async () => {},
    };
  }
  return {
    append: (worker) => {
      count++;
      const events = [0, 1, 2].map(() =>
        create(EventSchema, {
          workspaceId: "wsp_bench",
          sessionId: `ses_${worker}`,
          kind: "task.status",
          resource: create(ResourceRefSchema, { object: "task", id: `task_${worker}` }),
        }),
      );
      return database.kysely.transaction().execute((trx) => appendToOutbox(trx, SCHEMA, events));
    },
    transactions: () => count,
    settle: async () => {},
    close: async () => {},
  };
}

async function window(
  backend: Backend,
  mode: Mode,
  concurrency: number,
  ms: number,
): Promise<Omit<JournalBenchPoint, "backend" | "mode" | "concurrency">> {
  const run = await appender(backend.database, mode);
  const loop = async (until: number, latencies?: number[]) => {
    let n = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async (_, worker) => {
        while (performance.now() < until) {
          const started = performance.now();
          await run.append(worker, n++);
          latencies?.push(performance.now() - started);
        }
      }),
    );
  };
  await loop(performance.now() + 500);
  await run.settle();
  const pids = await backend.serverPids();
  const tx0 = run.transactions();
  const server0 = cpuByPid(pids);
  const cpu0 = process.cpuUsage();
  const latencies: number[] = [];
  const started = performance.now();
  await loop(started + ms, latencies);
  const elapsed = performance.now() - started;
  await run.close();
  const cpu = process.cpuUsage(cpu0);
  // A backend gone meanwhile (an idle connection closed) drops out.
  const server = cpuSince(server0, cpuByPid(pids));
  const transactions = run.transactions() - tx0;
  latencies.sort((a, b) => a - b);
  const appends = latencies.length;
  return {
    appendsPerSecond: (appends * 1000) / elapsed,
    p50Ms: latencies[Math.floor(appends * 0.5)] ?? 0,
    p99Ms: latencies[Math.floor(appends * 0.99)] ?? 0,
    clientCpuMs: (cpu.user + cpu.system) / 1000 / appends,
    serverCpuMs: server / appends,
    transactionsPerAppend: transactions / appends,
  };
}

/** Runs the journal benchmark (see the module comment). */
export async function runJournalBench(
  options: JournalBenchOptions = {},
): Promise<JournalBenchPoint[]> {
  const rounds = options.rounds ?? 3;
  const windowMs = options.windowMs ?? 1500;
  const concurrencies = options.concurrencies ?? [1, 32];
  const points: JournalBenchPoint[] = [];
  for (const backend of await openBenchDatabases({
    bench: "journal",
    poolSize: 10,
    databaseUrl: options.databaseUrl,
  })) {
    try {
      await prepare(backend.database);
      // A throwaway window first (JIT, caches), then the modes take turns
      // round by round, so the machine's drift falls on all of them alike.
      await window(backend, "journal", 1, windowMs);
      for (const concurrency of concurrencies) {
        const measured = await alternatingMedians(MODES, rounds, (mode) =>
          window(backend, mode, concurrency, windowMs),
        );
        for (const { mode, point } of measured) {
          points.push({ backend: backend.name, mode, concurrency, ...point });
        }
      }
    } finally {
      await backend.close();
    }
  }
  return points;
}

/** The points as the table `npm run bench` prints. */
export function formatJournalBench(points: readonly JournalBenchPoint[]): string {
  const header = [
    "backend ",
    "mode              ",
    "in flight",
    "appends/s",
    "p50 ms",
    "p99 ms",
    "client CPU ms",
    "server CPU ms",
    "tx/append",
  ];
  const rows = points.map((p) => [
    p.backend.padEnd(8),
    p.mode.padEnd(18),
    String(p.concurrency).padStart(9),
    p.appendsPerSecond.toFixed(0).padStart(9),
    p.p50Ms.toFixed(3).padStart(6),
    p.p99Ms.toFixed(3).padStart(6),
    p.clientCpuMs.toFixed(3).padStart(13),
    p.serverCpuMs.toFixed(3).padStart(13),
    p.transactionsPerAppend.toFixed(3).padStart(9),
  ]);
  return [
    "journal bench: one append = 3 entries × 256 B (a turn step); median of windows",
    ...[header, ...rows].map((cells) => cells.join("  ")),
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatJournalBench(await runJournalBench()));
}
