/**
 * What one embedded chat turn leaves in the database, counted (not timed):
 * rows inserted, updated and deleted per table, the bytes each table and its
 * indexes grew by, the write-ahead log written, and the journal's entries by
 * kind — per turn. Counts do not depend on the machine's load, so a change
 * that removes a representation of the turn (a copy of its events, a row
 * image, an index) shows here exactly, where a CPU A/B (`turn-ab`) would
 * drown it in noise.
 *
 * Embedded Trellis runs in this process (`startEmbedded`, PGlite in a
 * temporary directory, rate limits out of reach); `ChatService.Send` turns of
 * the zero-latency scripted agent go through its port as in `turn.bench.ts`.
 * `TRELLIS_FOOTPRINT_MODE=distributed` counts the mesh instead (`startMesh`
 * on a fresh database of the test PostgreSQL and a fresh NATS prefix, every
 * service's schema in that database; the write-ahead log is the server's,
 * so it includes whatever else the server is doing).
 * After `TRELLIS_FOOTPRINT_WARMUP` turns (default 40) and again after
 * `TRELLIS_FOOTPRINT_TURNS` more (default 400), at
 * `TRELLIS_FOOTPRINT_CONCURRENCY` in flight (default 8, one session per
 * worker), it waits for the projectors and consumers to go quiet and reads
 * PostgreSQL's own counters (`pg_stat_user_tables`,
 * `pg_total_relation_size`, `pg_current_wal_lsn`); the difference, divided
 * by the turns, is printed. Relation sizes grow by whole 8 KiB pages, so a
 * table's bytes per turn are exact only over many turns.
 *
 *   npx tsx bench/turn-footprint.ts
 */
import { createDatabase } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
import { startBenchEmbedded } from "./lib/embedded.js";
import { footprintSettings } from "./lib/footprint-settings.js";
import { startBenchMesh } from "./lib/mesh.js";
import { limitsOutOfReach } from "./lib/proc.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis-footprint-key-0123456789abcdef";

const { warmup, turns, concurrency, mode } = footprintSettings(process.env);
// A server's idle backends report their counters up to 10 s after their
// last commit (PostgreSQL's PGSTAT_IDLE_INTERVAL): wait longer between the
// reads that decide the database is quiet.
const quietMs = mode === "distributed" ? 11_000 : 1000;

/** A running Trellis to count: its gateway and its database. */
interface Target {
  url: string;
  db: Kysely<unknown>;
  stop(): Promise<void>;
}

async function embeddedTarget(): Promise<Target> {
  const { trellis, stop } = await startBenchEmbedded(API_KEY, "trellis-footprint-");
  const context = trellis.contexts.get("tasks");
  if (!context) {
    await stop();
    throw new Error("embedded Trellis has no tasks service");
  }
  return {
    url: trellis.address.url,
    db: context.db.kysely as Kysely<unknown>,
    stop,
  };
}

async function distributedTarget(): Promise<Target> {
  const {
    mesh,
    db: testDb,
    stop,
  } = await startBenchMesh("footprint", {
    env: { TRELLIS_API_KEY: API_KEY, TRELLIS_LOG_LEVEL: "warn", ...limitsOutOfReach },
  });
  const database = await createDatabase({ kind: "postgres", url: testDb.url, poolSize: 1 });
  return {
    url: mesh.urls.gateway as string,
    db: database.kysely as Kysely<unknown>,
    async stop() {
      await database.close();
      await stop();
    },
  };
}

/** One table's counters at one moment. */
interface TableCounts {
  inserted: number;
  updated: number;
  hotUpdated: number;
  deleted: number;
  bytes: number;
}

/** The database's counters at one moment. */
interface Snapshot {
  tables: Map<string, TableCounts>;
  walBytes: bigint;
  journal: Map<string, number>;
}

async function snapshot(db: Kysely<unknown>): Promise<Snapshot> {
  const stats = await sql<{
    name: string;
    inserted: string;
    updated: string;
    hot: string;
    deleted: string;
    bytes: string;
  }>`select schemaname || '.' || relname as name,
            n_tup_ins::text as inserted, n_tup_upd::text as updated,
            n_tup_hot_upd::text as hot, n_tup_del::text as deleted,
            pg_total_relation_size(relid)::text as bytes
       from pg_stat_user_tables`.execute(db);
  const tables = new Map<string, TableCounts>();
  for (const row of stats.rows) {
    tables.set(row.name, {
      inserted: Number(row.inserted),
      updated: Number(row.updated),
      hotUpdated: Number(row.hot),
      deleted: Number(row.deleted),
      bytes: Number(row.bytes),
    });
  }
  const wal = await sql<{
    bytes: string;
  }>`select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text as bytes`.execute(db);
  const kinds = await sql<{
    kind: string;
    n: string;
  }>`select kind, count(*)::text as n from tasks.journal group by kind`.execute(db);
  return {
    tables,
    walBytes: BigInt(wal.rows[0]?.bytes ?? "0"),
    journal: new Map(kinds.rows.map((row) => [row.kind, Number(row.n)])),
  };
}

/** Waits until two reads a second apart see the same counters (projectors and consumers caught up). */
async function settle(db: Kysely<unknown>): Promise<Snapshot> {
  let last = await snapshot(db);
  for (let round = 0; round < 30; round++) {
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    const next = await snapshot(db);
    const same = [...next.tables].every(([name, counts]) => {
      const before = last.tables.get(name);
      return (
        before !== undefined &&
        before.inserted === counts.inserted &&
        before.updated === counts.updated &&
        before.deleted === counts.deleted
      );
    });
    last = next;
    if (same) return next;
  }
  throw new Error(
    `the database did not go quiet within ${(30 * quietMs) / 1000} s of the last turn`,
  );
}

async function sendTurns(op: (worker: number, call: number) => Promise<void>, count: number) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let call = 0; next < count; call++) {
        next++;
        await op(worker, call);
      }
    }),
  );
}

const per = (value: number) => (value / turns).toFixed(2).padStart(8);

const target = mode === "distributed" ? await distributedTarget() : await embeddedTarget();
try {
  const { db } = target;
  const transport = bearerTransport(target.url, API_KEY);
  const op = await chatTurnOps(transport);
  await sendTurns(op, warmup);
  const before = await settle(db);
  await sendTurns(op, turns);
  const after = await settle(db);

  console.log(
    `${mode}: ${turns} chat turns at ${concurrency} in flight (after ${warmup} to warm up); per turn:\n`,
  );
  console.log(
    `${"table".padEnd(34)}${"inserts".padStart(8)}${"updates".padStart(8)}${"(hot)".padStart(8)}${"deletes".padStart(8)}${"bytes".padStart(9)}`,
  );
  const sum = { inserted: 0, updated: 0, hotUpdated: 0, deleted: 0, bytes: 0 };
  const rows: [string, TableCounts][] = [];
  for (const [name, counts] of after.tables) {
    const was = before.tables.get(name) ?? {
      inserted: 0,
      updated: 0,
      hotUpdated: 0,
      deleted: 0,
      bytes: 0,
    };
    const delta = {
      inserted: counts.inserted - was.inserted,
      updated: counts.updated - was.updated,
      hotUpdated: counts.hotUpdated - was.hotUpdated,
      deleted: counts.deleted - was.deleted,
      bytes: counts.bytes - was.bytes,
    };
    if (delta.inserted + delta.updated + delta.deleted === 0) continue;
    rows.push([name, delta]);
    for (const key of Object.keys(sum) as (keyof typeof sum)[]) sum[key] += delta[key];
  }
  rows.sort((a, b) => b[1].inserted + b[1].updated - (a[1].inserted + a[1].updated));
  for (const [name, d] of [...rows, ["all tables", sum] as [string, TableCounts]]) {
    console.log(
      `${name.padEnd(34)}${per(d.inserted)}${per(d.updated)}${per(d.hotUpdated)}${per(d.deleted)}${(d.bytes / turns).toFixed(0).padStart(9)}`,
    );
  }
  console.log(
    `\nwrite-ahead log: ${(Number(after.walBytes - before.walBytes) / turns).toFixed(0)} bytes per turn`,
  );
  console.log("\ntasks journal entries per turn, by kind:");
  for (const [kind, n] of [...after.journal].sort((a, b) => b[1] - a[1])) {
    console.log(`  ${per(n - (before.journal.get(kind) ?? 0))}  ${kind}`);
  }
} finally {
  await target.stop();
}
