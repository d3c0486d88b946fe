/**
 * Lease benchmark: what does one renewal round of a session owner cost when
 * it holds 1,000 leases (next to 1)? A round is one `update … returning`
 * of every lease of the owner (`createLeases().renew()`).
 *
 * CPU is this process's (it runs PGlite, kysely and pg) plus, on Postgres,
 * the server backends serving it (from /proc), per round; wall time per
 * round beside it. Median of 3 windows of `rounds` rounds each. Runs on
 * PGlite on disk (as `trellis dev`) and on PostgreSQL when one answers
 * (TRELLIS_TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/postgres).
 * Run: `npm run bench -- lease` or `npx tsx bench/lease.bench.ts`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import {
  createDatabase,
  createLeases,
  type Database,
  journalMigrations,
  leaseMigrations,
  migrate,
  openPGlite,
} from "@trellis/storage";
import { sql } from "kysely";
import { totalCpuMs } from "./lib/proc.js";

/** Options of {@link runLeaseBench}. */
export interface LeaseBenchOptions {
  /** Held lease counts measured (default [1, 1000]). */
  counts?: number[];
  /** Rounds per window (default 20); 3 windows, the median is reported. */
  rounds?: number;
  databaseUrl?: string;
}

/** One measured point. */
export interface LeaseBenchPoint {
  backend: "pglite" | "postgres";
  leases: number;
  /** Wall time of one round (ms). */
  roundMs: number;
  /** CPU of this process per round (ms). */
  clientCpuMs: number;
  /** CPU of the Postgres backends per round (ms; 0 on PGlite). */
  serverCpuMs: number;
}

interface Backend {
  name: "pglite" | "postgres";
  database: Database;
  serverPids(): Promise<number[]>;
  close(): Promise<void>;
}

const APP = "trellis_lease_bench";

async function openBackends(url: string | undefined): Promise<Backend[]> {
  const backends: Backend[] = [];
  const dir = mkdtempSync(join(tmpdir(), "trellis-lease-bench-"));
  const pglite = await openPGlite({ dataDir: dir });
  const embedded = await createDatabase({ kind: "pglite", pglite });
  backends.push({
    name: "pglite",
    database: embedded,
    serverPids: async () => [],
    async close() {
      await embedded.close();
      await pglite.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
  try {
    const { createTestDatabase } = await import("@trellis/testkit");
    process.env.TRELLIS_TEST_DATABASE_URL ??= url ?? "postgres://postgres@127.0.0.1:5432/postgres";
    const test = await createTestDatabase("trellis_bench_lease");
    const database = await createDatabase({
      kind: "postgres",
      url: test.url,
      applicationName: APP,
      poolSize: 4,
    });
    await database.ping();
    backends.push({
      name: "postgres",
      database,
      async serverPids() {
        const rows = await sql<{ pid: number }>`
          select pid from pg_stat_activity where application_name = ${APP}`.execute(
          database.kysely,
        );
        return rows.rows.map((r) => Number(r.pid));
      },
      async close() {
        await database.close();
        await test.drop();
      },
    });
  } catch (error) {
    console.warn(`lease bench: no PostgreSQL (${String(error)}); PGlite only`);
  }
  return backends;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};

/** Runs the benchmark; one point per backend and lease count. */
export async function runLeaseBench(options: LeaseBenchOptions = {}): Promise<LeaseBenchPoint[]> {
  const counts = options.counts ?? [1, 1000];
  const rounds = options.rounds ?? 20;
  const points: LeaseBenchPoint[] = [];
  for (const backend of await openBackends(options.databaseUrl)) {
    try {
      for (const count of counts) {
        const schema = `lbench_${count}`;
        await migrate(backend.database, {
          schema,
          migrations: { ...journalMigrations(schema), ...leaseMigrations(schema) },
        });
        // Renewal only by hand: the timer's period is far past the run.
        const leases = createLeases({
          database: backend.database,
          schema,
          ttlMs: 3_600_000,
          renewEveryMs: 3_000_000,
          maxLeases: count,
        });
        for (let i = 0; i < count; i++) await leases.acquire(`ses_${i}`);
        await leases.renew(); // warm-up
        const windows: { roundMs: number; clientCpuMs: number; serverCpuMs: number }[] = [];
        for (let w = 0; w < 3; w++) {
          const pids = await backend.serverPids();
          const server0 = totalCpuMs(pids);
          const cpu0 = process.cpuUsage();
          const t0 = performance.now();
          for (let r = 0; r < rounds; r++) {
            const lost = await leases.renew();
            if (lost.length > 0) throw new Error(`lease bench lost ${lost.length} leases`);
          }
          const wall = performance.now() - t0;
          const cpu = process.cpuUsage(cpu0);
          const server = totalCpuMs(pids) - server0;
          windows.push({
            roundMs: wall / rounds,
            clientCpuMs: (cpu.user + cpu.system) / 1000 / rounds,
            serverCpuMs: server / rounds,
          });
        }
        points.push({
          backend: backend.name,
          leases: count,
          roundMs: median(windows.map((w) => w.roundMs)),
          clientCpuMs: median(windows.map((w) => w.clientCpuMs)),
          serverCpuMs: median(windows.map((w) => w.serverCpuMs)),
        });
        await leases.close();
      }
    } finally {
      await backend.close();
    }
  }
  return points;
}

/** The points as the table `npm run bench` prints. */
export function formatLeaseBench(points: readonly LeaseBenchPoint[]): string {
  const header = ["backend ", "leases", "round ms", "client CPU ms", "server CPU ms"];
  const rows = points.map((p) => [
    p.backend.padEnd(8),
    String(p.leases).padStart(6),
    p.roundMs.toFixed(2).padStart(8),
    p.clientCpuMs.toFixed(2).padStart(13),
    p.serverCpuMs.toFixed(2).padStart(13),
  ]);
  return [
    "lease bench: one renewal round of every held lease (one statement); per round, median of 3 windows",
    ...[header, ...rows].map((cells) => cells.join("  ")),
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatLeaseBench(await runLeaseBench()));
}
