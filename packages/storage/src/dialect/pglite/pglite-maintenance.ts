import type { PGlite } from "@electric-sql/pglite";
import { type BackgroundErrorHandler, warnBackgroundError } from "../../database.js";
import { DEFAULT_CHECKPOINT_INTERVAL_MS, DEFAULT_CHECKPOINT_WAL_BYTES } from "../../defaults.js";
import { storageError } from "../../errors.js";

/**
 * Checkpoints and vacuums for a long-running PGlite, which does neither by
 * itself: PGlite runs Postgres single-user, where WAL growth requests no
 * checkpoint (only a postmaster's checkpointer acts on `max_wal_size` or
 * `checkpoint_timeout`) and no autovacuum runs. Without this the write-ahead
 * log grows for the life of the process (an embedded chat turn writes ~22 KB;
 * all of it is replayed after a crash) and updated tables keep their dead
 * rows and index entries, with no planner statistics
 * (docs/benchmarks.md, session 19).
 *
 * Each round is one statement at most, so the event loop is blocked by one
 * operation at a time:
 *
 * - `CHECKPOINT` when the WAL since the last checkpoint's redo point reached
 *   {@link PGliteMaintenanceOptions.checkpointWalBytes}, or when
 *   {@link PGliteMaintenanceOptions.checkpointIntervalMs} passed since the last
 *   checkpoint and WAL was written since. Postgres then recycles the segments
 *   before the redo point (renamed for reuse, up to ~2× the WAL between
 *   checkpoints, never more than `max_wal_size`) and removes the rest, so the
 *   WAL directory stays bounded.
 * - otherwise `VACUUM`, `ANALYZE` or both of the one table most past the
 *   thresholds autovacuum would use (`autovacuum_*` settings, from
 *   `pg_stat_user_tables`; the statistics work single-user): for a vacuum,
 *   dead rows or rows inserted since the last vacuum (each capped at
 *   {@link PGliteMaintenanceOptions.vacuumMaxRows}, so a large table is
 *   vacuumed a bounded piece at a time) or transaction ID age past
 *   `autovacuum_freeze_max_age`; for an analyze, rows changed since the last
 *   as many as the table holds ({@link ANALYZE_SCALE_FACTOR}), not
 *   autovacuum's 10 %: an analyze samples up to 30,000 rows spread over the
 *   whole table, so on a large table it blocks the event loop for up to ~1 s
 *   (a 240 MB journal, session 19) — once per doubling of an insert-only
 *   table, not once per tenth of it.
 */
export interface PGliteMaintenanceOptions {
  /**
   * Checkpoint once this many bytes of WAL were written since the last
   * checkpoint (default {@link DEFAULT_CHECKPOINT_WAL_BYTES}); 0: no size bound.
   */
  checkpointWalBytes?: number;
  /**
   * Checkpoint once this long passed since the last one, if any WAL was
   * written since (default {@link DEFAULT_CHECKPOINT_INTERVAL_MS}); 0: no time bound.
   */
  checkpointIntervalMs?: number;
  /** Vacuum and analyze tables that need it (default true). */
  vacuum?: boolean;
  /**
   * A table is vacuumed by this many dead or inserted rows at the latest,
   * however large it is (default {@link DEFAULT_VACUUM_MAX_ROWS}).
   * Autovacuum's thresholds grow with the table (20 % of its rows), and so
   * would each vacuum's stall on the event loop: a vacuum's work is the
   * pages changed since the last one.
   */
  vacuumMaxRows?: number;
  /** How often a round looks (default {@link DEFAULT_MAINTENANCE_CHECK_MS}). */
  checkEveryMs?: number;
  /**
   * The next round after one that ran an operation, so that a backlog of
   * tables is worked through one table at a time (default
   * {@link DEFAULT_MAINTENANCE_BUSY_MS}).
   */
  busyEveryMs?: number;
  /** A failed round is reported here and tried again at the next (default: a console warning). */
  onError?: BackgroundErrorHandler;
  /** Told of each operation a round ran. */
  onOperation?: (operation: PGliteMaintenanceOperation) => void;
}

/** One statement a maintenance round ran, with how long it took. */
export type PGliteMaintenanceOperation =
  | { kind: "checkpoint"; reason: "wal" | "interval"; walBytes: number; ms: number }
  | { kind: "vacuum" | "analyze"; table: string; analyzed: boolean; ms: number };

/** A running maintenance loop; see {@link startPGliteMaintenance}. */
export interface PGliteMaintenance {
  /**
   * Run one round now (after a round in progress); resolves with what it did
   * (nothing when stopped). Rejects when the round failed.
   */
  runRound(): Promise<PGliteMaintenanceOperation | undefined>;
  /** No more rounds; resolves once a round in progress has finished. */
  stop(): Promise<void>;
}

/** Default time between maintenance rounds: 10 s. */
export const DEFAULT_MAINTENANCE_CHECK_MS = 10_000;
/** Default time to the next round after one that ran an operation: 1 s. */
export const DEFAULT_MAINTENANCE_BUSY_MS = 1_000;
/** Default cap of autovacuum's vacuum thresholds: 10,000 rows. */
export const DEFAULT_VACUUM_MAX_ROWS = 10_000;
/** An analyze once the rows changed since the last reach this share of the table (autovacuum: 0.1). */
export const ANALYZE_SCALE_FACTOR = 1;

interface WalRow {
  since_redo: string;
  insert_lsn: string;
}

interface TableRow {
  name: string;
  vacuum: boolean;
  analyze: boolean;
}

// The table most past autovacuum's thresholds (its settings, as autovacuum
// would read them; per-table storage options are not consulted): for a
// vacuum, dead rows or rows inserted since the last vacuum (each capped at $1
// rows) or transaction ID age; for an analyze, rows changed since the last
// ($2 of the table's rows).
const neediestTable = `
  with s as (
    select current_setting('autovacuum_vacuum_threshold')::float8 as vt,
           current_setting('autovacuum_vacuum_scale_factor')::float8 as vs,
           current_setting('autovacuum_vacuum_insert_threshold')::float8 as it,
           current_setting('autovacuum_vacuum_insert_scale_factor')::float8 as vis,
           current_setting('autovacuum_freeze_max_age')::float8 as fa,
           current_setting('autovacuum_analyze_threshold')::float8 as at,
           $2::float8 as vas
  ), t as (
    select format('%I.%I', st.schemaname, st.relname) as name,
           greatest(
             st.n_dead_tup / least(s.vt + s.vs * greatest(c.reltuples, 0), $1),
             st.n_ins_since_vacuum / least(s.it + s.vis * greatest(c.reltuples, 0), $1),
             age(c.relfrozenxid) / s.fa) as for_vacuum,
           st.n_mod_since_analyze / (s.at + s.vas * greatest(c.reltuples, 0)) as for_analyze
    from pg_stat_user_tables st join pg_class c on c.oid = st.relid cross join s
  )
  select name, for_vacuum > 1 as vacuum, for_analyze > 1 as analyze
  from t where greatest(for_vacuum, for_analyze) > 1
  order by greatest(for_vacuum, for_analyze) desc limit 1`;

/**
 * Starts the maintenance loop of a PGlite instance (see
 * {@link PGliteMaintenanceOptions}): an unref'd timer, one round at a time,
 * the next one {@link PGliteMaintenanceOptions.checkEveryMs} after the last
 * ended ({@link PGliteMaintenanceOptions.busyEveryMs} after one that ran an
 * operation). Stop it before closing the instance; a round never starts after
 * `stop()` or once the instance is closed.
 */
export function startPGliteMaintenance(
  pglite: PGlite,
  options: PGliteMaintenanceOptions = {},
): PGliteMaintenance {
  const walBound = options.checkpointWalBytes ?? DEFAULT_CHECKPOINT_WAL_BYTES;
  const intervalMs = options.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
  const vacuum = options.vacuum ?? true;
  const vacuumMaxRows = options.vacuumMaxRows ?? DEFAULT_VACUUM_MAX_ROWS;
  const checkEveryMs = options.checkEveryMs ?? DEFAULT_MAINTENANCE_CHECK_MS;
  const busyEveryMs = options.busyEveryMs ?? Math.min(DEFAULT_MAINTENANCE_BUSY_MS, checkEveryMs);
  const onError = options.onError ?? warnBackgroundError;
  for (const [param, value] of [
    ["checkpointWalBytes", walBound],
    ["checkpointIntervalMs", intervalMs],
    ["vacuumMaxRows", vacuumMaxRows],
    ["checkEveryMs", checkEveryMs],
    ["busyEveryMs", busyEveryMs],
  ] as const) {
    const positive = param !== "checkpointWalBytes" && param !== "checkpointIntervalMs";
    if (!Number.isSafeInteger(value) || value < (positive ? 1 : 0)) {
      throw storageError({
        reason: "invalid_request",
        message: `${param} must be a ${positive ? "positive" : "non-negative"} integer, got ${value}`,
        param,
      });
    }
  }

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PGliteMaintenanceOperation | undefined> | undefined;
  // The time bound counts from the last checkpoint this loop ran (or its
  // start); "WAL written since" is the insert position having moved on from
  // where that checkpoint (or the start) left it.
  let lastCheckpointAt = Date.now();
  let lastCheckpointLsn: string | undefined;

  const active = () => !stopped && !pglite.closed;

  async function checkpointDue(): Promise<
    { reason: "wal" | "interval"; walBytes: number } | undefined
  > {
    if (walBound === 0 && intervalMs === 0) return undefined;
    const { rows } = await pglite.query<WalRow>(
      `select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::text as since_redo,
              pg_current_wal_insert_lsn()::text as insert_lsn
       from pg_control_checkpoint()`,
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const walBytes = Number(row.since_redo);
    lastCheckpointLsn ??= row.insert_lsn;
    if (walBound > 0 && walBytes >= walBound) return { reason: "wal", walBytes };
    if (
      intervalMs > 0 &&
      Date.now() - lastCheckpointAt >= intervalMs &&
      row.insert_lsn !== lastCheckpointLsn
    ) {
      return { reason: "interval", walBytes };
    }
    return undefined;
  }

  async function round(): Promise<PGliteMaintenanceOperation | undefined> {
    if (!active()) return undefined;
    const due = await checkpointDue();
    if (due && active()) {
      const started = performance.now();
      await pglite.exec("checkpoint");
      const ms = performance.now() - started;
      lastCheckpointAt = Date.now();
      const { rows } = await pglite.query<{ lsn: string }>(
        "select pg_current_wal_insert_lsn()::text as lsn",
      );
      lastCheckpointLsn = rows[0]?.lsn;
      return { kind: "checkpoint", ...due, ms };
    }
    if (!vacuum || !active()) return undefined;
    const { rows } = await pglite.query<TableRow>(neediestTable, [
      vacuumMaxRows,
      ANALYZE_SCALE_FACTOR,
    ]);
    const table = rows[0];
    if (table === undefined || !active()) return undefined;
    const started = performance.now();
    const statement = !table.vacuum ? "analyze" : table.analyze ? "vacuum (analyze)" : "vacuum";
    await pglite.exec(`${statement} ${table.name}`);
    return {
      kind: table.vacuum ? "vacuum" : "analyze",
      table: table.name,
      analyzed: table.analyze,
      ms: performance.now() - started,
    };
  }

  function runRound(): Promise<PGliteMaintenanceOperation | undefined> {
    const previous = running ?? Promise.resolve(undefined);
    const next = previous
      .catch(() => undefined)
      .then(round)
      .then((operation) => {
        if (operation) options.onOperation?.(operation);
        return operation;
      });
    running = next;
    void next
      .catch(() => undefined)
      .finally(() => {
        if (running === next) running = undefined;
      });
    return next;
  }

  function schedule(delayMs: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      timer = undefined;
      runRound().then(
        (operation) => schedule(operation ? busyEveryMs : checkEveryMs),
        (error: unknown) => {
          if (active()) onError(error, "PGlite maintenance round failed; trying again next round");
          schedule(checkEveryMs);
        },
      );
    }, delayMs);
    timer.unref();
  }
  schedule(checkEveryMs);

  return {
    runRound,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await running?.catch(() => undefined);
    },
  };
}
