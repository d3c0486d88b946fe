import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import {
  openPGlite,
  type PGliteMaintenanceOperation,
  startPGliteMaintenance,
} from "../src/index.js";

// Embedded mode's checkpoints and vacuums (pglite-maintenance.ts): PGlite's
// single-user Postgres does neither by itself.

const MB = 1024 * 1024;

function walSegments(dataDir: string): string[] {
  return readdirSync(join(dataDir, "pg_wal")).filter((name) => /^[0-9A-F]{24}$/.test(name));
}

async function walSinceCheckpoint(pglite: PGlite): Promise<number> {
  const { rows } = await pglite.query<{ bytes: string }>(
    "select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::text as bytes from pg_control_checkpoint()",
  );
  return Number(rows[0]?.bytes);
}

// Statistics reach pg_stat_* at most once a second; flush them now.
async function flushStats(pglite: PGlite): Promise<void> {
  await pglite.query("select pg_stat_force_next_flush()");
  await pglite.query("select 1");
}

async function deadRows(pglite: PGlite, table: string): Promise<number> {
  await flushStats(pglite);
  const { rows } = await pglite.query<{ n: number }>(
    "select n_dead_tup::int as n from pg_stat_user_tables where relname = $1",
    [table],
  );
  return rows[0]?.n ?? -1;
}

// ~1 MB of WAL per call (rows and their index entries).
async function writeWal(pglite: PGlite, megabytes: number): Promise<void> {
  for (let i = 0; i < megabytes; i++) {
    await pglite.exec(
      "insert into filler (v, n) select repeat('x', 200), g from generate_series(1, 2500) g",
    );
  }
}

describe("PGlite maintenance", () => {
  const dir = mkdtempSync(join(tmpdir(), "trellis-pglite-maintenance-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("checkpoints past the WAL bound, and the WAL directory stops growing", async () => {
    const dataDir = join(dir, "wal");
    const pglite = await openPGlite({ dataDir });
    const operations: PGliteMaintenanceOperation[] = [];
    const maintenance = startPGliteMaintenance(pglite, {
      checkpointWalBytes: 20 * MB,
      checkpointIntervalMs: 0,
      vacuum: false,
      checkEveryMs: 3_600_000,
      onOperation: (operation) => operations.push(operation),
    });
    try {
      await pglite.exec("create table filler (id serial primary key, v text, n int)");
      await pglite.exec("create index on filler (n)");
      // Under the bound: nothing to do.
      await writeWal(pglite, 2);
      expect(await maintenance.runRound()).toBeUndefined();

      // Without checkpoints every 16 MB of WAL is one more segment, kept.
      await writeWal(pglite, 60);
      const grown = walSegments(dataDir).length;
      expect(await walSinceCheckpoint(pglite)).toBeGreaterThan(50 * MB);
      expect(grown).toBeGreaterThanOrEqual(4);

      const done = await maintenance.runRound();
      expect(done).toMatchObject({ kind: "checkpoint", reason: "wal" });
      expect(await walSinceCheckpoint(pglite)).toBeLessThan(MB);

      // From here on, with a checkpoint per bound, the old segments are
      // reused: another 3 × 60 MB of WAL does not add 3 × 4 segments.
      for (let i = 0; i < 6; i++) {
        await writeWal(pglite, 25);
        await maintenance.runRound();
      }
      expect(operations.filter((o) => o.kind === "checkpoint").length).toBeGreaterThanOrEqual(7);
      const after = walSegments(dataDir).length;
      // Postgres keeps for reuse ~2.1× the WAL of one checkpoint interval
      // (and never less than min_wal_size, 80 MB = 5 segments).
      expect(after).toBeLessThanOrEqual(grown + 1);
      // ... where all that WAL, kept, would have been 13+ segments.
      const written = operations.reduce(
        (sum, o) => sum + (o.kind === "checkpoint" ? o.walBytes : 0),
        0,
      );
      expect(written).toBeGreaterThan(200 * MB);
    } finally {
      await maintenance.stop();
      await pglite.close();
    }
  }, 120_000);

  it("checkpoints after the interval only if WAL was written", async () => {
    const pglite = await openPGlite({ dataDir: join(dir, "interval") });
    const maintenance = startPGliteMaintenance(pglite, {
      checkpointWalBytes: 0,
      checkpointIntervalMs: 50,
      vacuum: false,
      checkEveryMs: 3_600_000,
    });
    try {
      await pglite.exec("create table filler (id serial primary key, v text, n int)");
      // The first round sets where "written since" counts from.
      expect(await maintenance.runRound()).toBeUndefined();
      await writeWal(pglite, 1);
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(await maintenance.runRound()).toMatchObject({
        kind: "checkpoint",
        reason: "interval",
      });
      // Nothing written since: no checkpoint, however long it has been.
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(await maintenance.runRound()).toBeUndefined();
    } finally {
      await maintenance.stop();
      await pglite.close();
    }
  }, 60_000);

  it("vacuums a table with dead rows, one table per round", async () => {
    const pglite = await openPGlite({ dataDir: join(dir, "vacuum") });
    const maintenance = startPGliteMaintenance(pglite, {
      checkpointWalBytes: 0,
      checkpointIntervalMs: 0,
      checkEveryMs: 3_600_000,
    });
    try {
      await pglite.exec(`
        create table churn (id int primary key, n int);
        create index on churn (n);
        create table other (id int primary key);
        insert into churn select g, 0 from generate_series(1, 2000) g;
        insert into other select g from generate_series(1, 2000) g;`);
      // Let the inserts' vacuums and analyzes happen first (one table a round).
      await flushStats(pglite);
      for (let i = 0; i < 5 && (await maintenance.runRound()) !== undefined; i++);
      expect(await maintenance.runRound()).toBeUndefined();

      await pglite.exec("update churn set n = n + 1 where id <= 1000");
      expect(await deadRows(pglite, "churn")).toBe(1000);
      expect(await maintenance.runRound()).toMatchObject({ kind: "vacuum", table: "public.churn" });
      expect(await deadRows(pglite, "churn")).toBe(0);
      await flushStats(pglite);
      expect(await maintenance.runRound()).toBeUndefined();
    } finally {
      await maintenance.stop();
      await pglite.close();
    }
  }, 60_000);

  it("vacuums a large table after vacuumMaxRows dead rows; analyzes after a table's worth of changes", async () => {
    const pglite = await openPGlite();
    const options = { checkpointWalBytes: 0, checkpointIntervalMs: 0, checkEveryMs: 3_600_000 };
    const capped = startPGliteMaintenance(pglite, { ...options, vacuumMaxRows: 1_000 });
    const uncapped = startPGliteMaintenance(pglite, { ...options, vacuumMaxRows: 1_000_000 });
    try {
      await pglite.exec(`
        create table big (id int primary key, n int);
        insert into big select g, 0 from generate_series(1, 20000) g;`);
      await flushStats(pglite);
      await pglite.exec("vacuum analyze big");
      await pglite.exec("update big set n = 1 where id <= 1500");
      expect(await deadRows(pglite, "big")).toBe(1500);
      // Autovacuum's thresholds here: 50 + 20 % of 20,000 rows = 4,050 dead
      // rows for a vacuum; an analyze waits for 50 + 20,000 changed rows.
      expect(await uncapped.runRound()).toBeUndefined();
      expect(await capped.runRound()).toMatchObject({
        kind: "vacuum",
        table: "public.big",
        analyzed: false,
      });
      expect(await deadRows(pglite, "big")).toBe(0);
      // 2,500 rows changed since the analyze: past autovacuum's 10 % (2,050),
      // not yet a whole table's worth, so no analyze.
      await pglite.exec("update big set n = 1 where id > 19000");
      await flushStats(pglite);
      expect(await uncapped.runRound()).toBeUndefined();
      // As many rows changed as the table holds: now it is analyzed too.
      await pglite.exec("update big set n = 2");
      await flushStats(pglite);
      expect(await capped.runRound()).toMatchObject({ table: "public.big", analyzed: true });
    } finally {
      await capped.stop();
      await uncapped.stop();
      await pglite.close();
    }
  }, 60_000);

  it("runs on its timer, logs a failed round and tries again", async () => {
    const pglite = await openPGlite();
    const errors: unknown[] = [];
    const operations: PGliteMaintenanceOperation[] = [];
    // A real failure: the session's role may not checkpoint.
    await pglite.exec("create role plain; set role plain");
    const maintenance = startPGliteMaintenance(pglite, {
      checkpointWalBytes: 1,
      checkpointIntervalMs: 0,
      vacuum: false,
      checkEveryMs: 20,
      onError: (error) => errors.push(error),
      onOperation: (operation) => operations.push(operation),
    });
    try {
      await expect.poll(() => errors.length, { timeout: 10_000 }).toBeGreaterThan(0);
      expect(String(errors[0])).toMatch(/permission denied/);
      expect(operations).toEqual([]);
      await pglite.exec("reset role");
      await expect.poll(() => operations.length, { timeout: 10_000 }).toBeGreaterThan(0);
      expect(operations[0]).toMatchObject({ kind: "checkpoint", reason: "wal" });
    } finally {
      await maintenance.stop();
      await pglite.close();
    }
  }, 90_000);

  it("stops: waits for the statement in progress, runs no more after stop() or close", async () => {
    const pglite = await openPGlite();
    await pglite.exec(
      "create table churn (id int primary key, n int); insert into churn select g, 0 from generate_series(1, 500) g",
    );
    await flushStats(pglite);
    const operations: PGliteMaintenanceOperation[] = [];
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timers();
    const maintenance = startPGliteMaintenance(pglite, {
      checkpointWalBytes: 0,
      checkpointIntervalMs: 0,
      checkEveryMs: 3_600_000,
      onOperation: (operation) => operations.push(operation),
    });
    // Its timer does not keep the process alive.
    expect(timers()).toBe(before);
    // A transaction holds the instance; the round's first statement waits for it.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const transaction = pglite.transaction(async (tx) => {
      await tx.query("select 1");
      await held;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const inProgress = maintenance.runRound();
    await new Promise((resolve) => setTimeout(resolve, 20));
    let stopped = false;
    const stopping = maintenance.stop().then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped).toBe(false);
    release();
    await transaction;
    await stopping;
    // The table needed a vacuum, but none started once stop() was called.
    await expect(inProgress).resolves.toBeUndefined();
    expect(operations).toEqual([]);
    expect(await maintenance.runRound()).toBeUndefined();
    await pglite.close();

    // Closed without stop(): the timer finds the instance closed and does nothing.
    const other = await openPGlite();
    const errors: unknown[] = [];
    const unstopped = startPGliteMaintenance(other, {
      checkEveryMs: 5,
      onError: (error) => errors.push(error),
    });
    await other.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await unstopped.runRound()).toBeUndefined();
    expect(errors).toEqual([]);
    await unstopped.stop();
  }, 90_000);

  it("refuses bad options by name", async () => {
    const pglite = await openPGlite();
    try {
      expect(() => startPGliteMaintenance(pglite, { checkpointWalBytes: -1 })).toThrow(
        /checkpointWalBytes/,
      );
      expect(() => startPGliteMaintenance(pglite, { checkpointIntervalMs: 1.5 })).toThrow(
        /checkpointIntervalMs/,
      );
      expect(() => startPGliteMaintenance(pglite, { checkEveryMs: 0 })).toThrow(/checkEveryMs/);
      expect(() => startPGliteMaintenance(pglite, { busyEveryMs: -5 })).toThrow(/busyEveryMs/);
      expect(() => startPGliteMaintenance(pglite, { vacuumMaxRows: 0 })).toThrow(/vacuumMaxRows/);
    } finally {
      await pglite.close();
    }
  });
});
