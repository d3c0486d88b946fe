/**
 * The databases a storage benchmark runs on: PGlite on disk (as `trellis
 * dev`) always, and PostgreSQL when one answers (TRELLIS_TEST_DATABASE_URL,
 * else postgres://postgres@127.0.0.1:5432/postgres), with the pids of the
 * server backends serving it so their CPU is measured too (`cpuByPid`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase, type Database, openPGlite } from "@trellis/storage";
import { sql } from "kysely";
import { cpuMsIfRunning } from "./proc.js";

/** One database a benchmark runs on. */
export interface BenchDatabase {
  name: "pglite" | "postgres";
  database: Database;
  /** Pids of the server processes serving `database` (none on PGlite). */
  serverPids(): Promise<number[]>;
  close(): Promise<void>;
}

/** Options of {@link openBenchDatabases}. */
export interface BenchDatabaseOptions {
  /** The bench's name: the temporary directory, test database and `application_name` say it. */
  bench: string;
  /** Connections of the PostgreSQL pool. */
  poolSize: number;
  /** PostgreSQL server URL (default TRELLIS_TEST_DATABASE_URL, then the local default). */
  databaseUrl?: string | undefined;
}

/** PGlite on disk, then PostgreSQL when one answers (a warning, not an error, when none does). */
export async function openBenchDatabases(options: BenchDatabaseOptions): Promise<BenchDatabase[]> {
  const { bench } = options;
  const out: BenchDatabase[] = [];
  const dir = mkdtempSync(join(tmpdir(), `trellis-${bench}-bench-`));
  const pglite = await openPGlite({ dataDir: dir });
  const embedded = await createDatabase({ kind: "pglite", pglite });
  out.push({
    name: "pglite",
    database: embedded,
    serverPids: async () => [],
    async close() {
      await embedded.close();
      await pglite.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
  const app = `trellis_${bench}_bench`;
  try {
    const { createTestDatabase } = await import("@trellis/testkit");
    process.env.TRELLIS_TEST_DATABASE_URL ??=
      options.databaseUrl ?? "postgres://postgres@127.0.0.1:5432/postgres";
    const test = await createTestDatabase(`trellis_bench_${bench}`);
    const database = await createDatabase({
      kind: "postgres",
      url: test.url,
      applicationName: app,
      poolSize: options.poolSize,
    });
    await database.ping();
    out.push({
      name: "postgres",
      database,
      async serverPids() {
        const rows = await sql<{ pid: number }>`
          select pid from pg_stat_activity where application_name = ${app}`.execute(
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
    console.warn(`${bench} bench: no PostgreSQL (${String(error)}); PGlite only`);
  }
  return out;
}

/** CPU ms so far of each process still running (a process gone is left out). */
export function cpuByPid(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    const cpu = cpuMsIfRunning(pid);
    if (cpu !== undefined) out.set(pid, cpu);
  }
  return out;
}

/** CPU ms the processes in `after` used since `before` (a process new since then counts from 0). */
export function cpuSince(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>) {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}
