import { type Meter, metrics, type ObservableCallback } from "@opentelemetry/api";
import { type Kysely, sql, type Transaction } from "kysely";
import { sleep } from "../async.js";
import { type Database, warnBackgroundError } from "../database.js";
import { assertSchemaName } from "../schema-name.js";
import type { Journal } from "./journal.js";
import { invalidJournalInput, journalUnavailable, projectorTimeout } from "./journal-errors.js";
import { type JournalRecord, journalHead, readJournal } from "./journal-read.js";
import { journalChannel, journalTables } from "./journal-schema.js";

/** The reason wake-ups abort with: a value, so no DOMException (and its stack) per commit. */
const WOKEN = "woken";
/** The OpenTelemetry gauge of every projector's lag, in entries (attribute `trellis.projector`). */
export const projectorLagMetric = "trellis.journal.projector.lag";

/** Options of {@link createProjector}. */
export interface ProjectorOptions<DB> {
  database: Database<DB>;
  /** The schema holding the journal and the projector's position. */
  schema: string;
  /** The projector's durable name (its row in `journal_projection`); 1–200 characters. */
  name: string;
  /**
   * Applies a batch of entries (position order) inside `trx`, the
   * transaction that also moves the projector's position past them: its
   * effects commit exactly once. Throwing rolls both back; the batch is
   * retried with backoff (never skipped), so a persistent failure stops the
   * projector where it is and shows in `status().lastError`.
   */
  project(batch: readonly JournalRecord[], trx: Transaction<DB>): Promise<void>;
  /** Entries per batch (default 500). */
  batchSize?: number;
  /** How often to look for entries when nothing woke it (default 1000 ms). */
  pollIntervalMs?: number;
  /**
   * After a wake-up, wait this long for more entries so one transaction
   * applies several appends (default 0). A `waitFor` cuts the wait short.
   */
  delayMs?: number;
  /**
   * A journal in this process: each committed batch wakes the projector at
   * once and hands it its entries, which it applies without reading them
   * back while they continue from its position (a gap — entries of other
   * writers, a restart, a backlog over the buffer — is read from the table).
   */
  journal?: Journal;
  /** LISTEN for the journal's NOTIFY (writers in other processes with `notify: true`; default false). */
  listen?: boolean;
  /** First retry delay after a failure (default 50 ms), doubling up to `maxRetryMs`. */
  retryMs?: number;
  /** Longest retry delay (default 5000 ms). */
  maxRetryMs?: number;
  /** Meter for the lag gauge (default: the global provider's `@trellis/storage` meter). */
  meter?: Meter;
  /** Where failures are reported while it retries (default: a console warning). */
  onError?: (error: unknown, context: string) => void;
  /**
   * Called after a batch this instance applied has committed (e.g. to wake
   * an outbox relay for rows `project` wrote). Errors are reported to `onError`.
   */
  onApplied?: (batch: readonly JournalRecord[]) => void;
}

/** Options of {@link Projector.waitFor}. */
export interface WaitForOptions {
  /** Give up after this long with a `deadline_exceeded` TrellisError (default 5000 ms). */
  timeoutMs?: number;
}

/** What a projector is doing; what `trellis health` shows of it. */
export interface ProjectorStatus {
  name: string;
  /** The last position applied (durable). */
  position: bigint;
  /** The highest journal position it has seen. */
  head: bigint;
  /** `head - position`: entries committed but not yet projected. */
  lag: bigint;
  running: boolean;
  /** Consecutive failed rounds (0 when healthy). */
  failures: number;
  lastError?: string;
  /** Entries applied as the in-process journal handed them over (not read back). */
  handedEntries: number;
  /** Entries applied after reading them from the journal table. */
  readEntries: number;
}

/**
 * Applies `<schema>.journal` to read models, batch by batch, behind the
 * writers.
 *
 * | rule | how |
 * |---|---|
 * | exactly-once effect, also across restarts and crashes | `project` and the position update commit in one transaction |
 * | never skips, never reorders | reads by position; journal positions are gapless and visible in order |
 * | one applier per name, even with several instances | the position row is locked, then re-checked |
 * | survives the database going away | a failed round is retried with backoff from the durable position |
 * | read-your-writes | `waitFor(position)` resolves once the position is applied |
 */
export interface Projector {
  /** The last position applied. */
  position(): bigint;
  /**
   * Resolves once every entry up to `position` is applied (at once when it
   * is). Rejects with `deadline_exceeded` after `timeoutMs`, with
   * `service_unavailable` when the projector stops first.
   */
  waitFor(position: bigint, options?: WaitForOptions): Promise<void>;
  /** Looks for new entries now (a writer elsewhere committed). */
  wake(): void;
  status(): ProjectorStatus;
  /** Stops after the batch in progress; pending `waitFor`s reject. */
  stop(): Promise<void>;
}

interface Waiter {
  position: bigint;
  resolve(): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout;
}

/**
 * Starts a projector from its durable position (0 for a new name) and
 * returns once that position is loaded. Works on PostgreSQL and PGlite.
 *
 * @example
 *   const outcomes = await createProjector({
 *     database, schema: "tasks", name: "outcomes", journal,
 *     project: (batch, trx) => writeOutcomeRows(trx, batch),
 *   });
 *   const { positions } = await journal.append(entries);
 *   await outcomes.waitFor(positions.at(-1)!);
 */
export async function createProjector<DB>(options: ProjectorOptions<DB>): Promise<Projector> {
  const { database, schema, name } = options;
  assertSchemaName(schema);
  if (typeof name !== "string" || name.length === 0 || name.length > 200) {
    throw invalidJournalInput("a projector's name must be 1–200 characters", "name");
  }
  const batchSize = options.batchSize ?? 500;
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const delayMs = options.delayMs ?? 0;
  const retryMs = options.retryMs ?? 50;
  const maxRetryMs = options.maxRetryMs ?? 5000;
  const onError = options.onError ?? warnBackgroundError;
  const tables = journalTables(database.kysely, schema);

  await tables
    .insertInto("journal_projection")
    .values({ name, position: 0n, updated_at: new Date() })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  const loaded = await tables
    .selectFrom("journal_projection")
    .select("position")
    .where("name", "=", name)
    .executeTakeFirstOrThrow();

  let position = BigInt(loaded.position);
  let head = position;
  let failures = 0;
  let lastError: string | undefined;
  let running = true;
  let wakeUp = new AbortController();
  // Aborted by waitFor: someone is waiting, so no delay for batching.
  let urgent = new AbortController();
  const stopping = new AbortController();
  const waiters: Waiter[] = [];

  const wake = (): void => wakeUp.abort(WOKEN);
  // Entries the in-process journal committed, not yet applied (bounded: a
  // projector that falls behind drops them and reads instead).
  let handed: JournalRecord[] = [];
  let readBack = 0;
  let fromMemory = 0;
  const unhand = options.journal?.onEntries((records) => {
    if (handed.length + records.length > batchSize * 4) handed = [];
    for (const record of records) if (record.position > position) handed.push(record);
  });
  const unsubscribe = options.journal?.onCommit((committed) => {
    if (committed > head) head = committed;
    wake();
  });
  /** The handed entries that continue from `position` (none: read the table). */
  const takeHanded = (): JournalRecord[] => {
    let first = 0;
    while (first < handed.length && (handed[first] as JournalRecord).position <= position) first++;
    let run = 0;
    while (
      first + run < handed.length &&
      run < batchSize &&
      (handed[first + run] as JournalRecord).position === position + BigInt(run) + 1n
    ) {
      run++;
    }
    const taken = handed.slice(first, first + run);
    // A gap: what follows it is read from the table; keep only the later entries.
    handed = run === 0 && first < handed.length ? handed.slice(first) : handed.slice(first + run);
    return taken;
  };
  const unlisten = options.listen ? await database.listen(journalChannel(schema), wake) : undefined;

  const settle = (): void => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const waiter = waiters[i] as Waiter;
      if (waiter.position <= position) {
        waiters.splice(i, 1);
        clearTimeout(waiter.timer);
        waiter.resolve();
      }
    }
  };

  /** One batch; true when the position moved (look again at once). */
  const round = async (): Promise<boolean> => {
    const taken = takeHanded();
    const inMemory = taken.length > 0;
    const batch = inMemory
      ? taken
      : await readJournal(database.kysely, schema, {
          afterPosition: position,
          limit: batchSize,
        });
    const last = batch[batch.length - 1];
    if (last === undefined) return false;
    if (inMemory) fromMemory += batch.length;
    else readBack += batch.length;
    if (last.position > head) head = last.position;
    // A full batch may not be the end: learn the real head for the lag
    // (before applying, so a batch that keeps failing still shows it).
    if (batch.length === batchSize && !inMemory) {
      const seen = await journalHead(database.kysely, schema);
      if (seen > head) head = seen;
    }
    const moved = await database.kysely.transaction().execute(async (trx) => {
      // Claim the batch first: the conditional update row-locks the
      // position and matches only if no other instance has moved it.
      const claimed = await journalTables(trx as Kysely<DB>, schema)
        .updateTable("journal_projection")
        .set({ position: last.position, updated_at: sql<Date>`now()` })
        .where("name", "=", name)
        .where("position", "=", position)
        .executeTakeFirst();
      if (claimed.numUpdatedRows === 0n) {
        // Another instance got there first: go on from where it is.
        const row = await journalTables(trx as Kysely<DB>, schema)
          .selectFrom("journal_projection")
          .select("position")
          .where("name", "=", name)
          .executeTakeFirstOrThrow();
        return BigInt(row.position);
      }
      await options.project(batch, trx);
      return last.position;
    });
    position = moved;
    settle();
    if (moved === last.position && options.onApplied) {
      try {
        options.onApplied(batch);
      } catch (error) {
        onError(error, `projector ${name}: onApplied failed`);
      }
    }
    // Look again at once only when there may be more than was read, or
    // another instance moved the position; otherwise wait for a wake-up.
    return batch.length === batchSize || moved !== last.position || (inMemory && handed.length > 0);
  };

  const loop = (async () => {
    while (!stopping.signal.aborted) {
      // A wake before this round is covered by the round's read.
      if (wakeUp.signal.aborted) wakeUp = new AbortController();
      if (urgent.signal.aborted && waiters.length === 0) urgent = new AbortController();
      const idle = wakeUp.signal;
      try {
        const moved = await round();
        failures = 0;
        lastError = undefined;
        if (moved) continue;
        if (head < position) head = position;
        await sleep(pollIntervalMs, idle, stopping.signal);
        if (delayMs > 0 && idle.aborted) {
          // The waiters that made the last round urgent are settled: a new
          // wake-up batches again (a waitFor during the delay still cuts it).
          if (urgent.signal.aborted && waiters.length === 0) urgent = new AbortController();
          await sleep(delayMs, urgent.signal, stopping.signal);
        }
      } catch (error) {
        failures++;
        lastError = error instanceof Error ? error.message : String(error);
        onError(error, `projector ${name} failed at position ${position}; retrying`);
        const delay = Math.min(maxRetryMs, retryMs * 2 ** Math.min(failures - 1, 16));
        await sleep(delay, stopping.signal);
      }
    }
  })();

  const meter = options.meter ?? metrics.getMeter("@trellis/storage");
  const gauge = meter.createObservableGauge(projectorLagMetric, {
    description: "Journal entries committed but not yet applied by a projector",
    unit: "{entry}",
  });
  const observe: ObservableCallback = (result) => {
    result.observe(Number(head > position ? head - position : 0n), { "trellis.projector": name });
  };
  gauge.addCallback(observe);

  return {
    position: () => position,
    waitFor(target, waitOptions = {}) {
      if (target <= position) return Promise.resolve();
      if (!running) return Promise.reject(journalUnavailable(`projector ${name} is stopped`));
      const timeoutMs = waitOptions.timeoutMs ?? 5000;
      return new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          position: target,
          resolve,
          reject,
          timer: setTimeout(() => {
            const at = waiters.indexOf(waiter);
            if (at >= 0) waiters.splice(at, 1);
            reject(projectorTimeout(name, target, position, timeoutMs));
          }, timeoutMs),
        };
        waiters.push(waiter);
        // Someone expects the position: it was committed, maybe elsewhere.
        if (target > head) head = target;
        urgent.abort(WOKEN);
        wake();
      });
    },
    wake,
    status: () => ({
      name,
      position,
      head: head > position ? head : position,
      lag: head > position ? head - position : 0n,
      running,
      failures,
      ...(lastError === undefined ? {} : { lastError }),
      handedEntries: fromMemory,
      readEntries: readBack,
    }),
    async stop() {
      if (!running) return;
      running = false;
      stopping.abort();
      await loop;
      unsubscribe?.();
      unhand?.();
      handed = [];
      await unlisten?.();
      gauge.removeCallback(observe);
      for (const waiter of waiters.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.reject(
          journalUnavailable(`projector ${name} stopped before position ${waiter.position}`),
        );
      }
    },
  };
}
