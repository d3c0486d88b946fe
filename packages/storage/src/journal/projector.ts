import { type Meter, metrics, type ObservableCallback } from "@opentelemetry/api";
import { type Kysely, type QueryCreator, sql, type Transaction } from "kysely";
import { sleep } from "../async.js";
import { type Database, warnBackgroundError } from "../database.js";
import { assertSchemaName } from "../schema-name.js";
import type { Journal } from "./journal.js";
import { invalidJournalInput, journalUnavailable, projectorTimeout } from "./journal-errors.js";
import { type JournalRecord, journalHead, readJournal } from "./journal-read.js";
import {
  type JournalDatabase,
  type JournalDeadLetterTable,
  journalChannel,
  journalTables,
} from "./journal-schema.js";
import {
  type ProjectionStages,
  type ProjectionWrite,
  writesStatement,
} from "./projection-writes.js";

/** The reason wake-ups abort with: a value, so no DOMException (and its stack) per commit. */
const WOKEN = "woken";
/** The OpenTelemetry gauge of every projector's lag, in entries (attribute `trellis.projector`). */
export const projectorLagMetric = "trellis.journal.projector.lag";
/**
 * The OpenTelemetry counter of entries a projector dead-lettered
 * (attributes `trellis.projector`, `trellis.projector.reason`: the SQLSTATE).
 */
export const projectorDeadLetterMetric = "trellis.journal.projector.dead_letters";

/** SQLSTATE classes whose refusal does not change on a retry of the same rows. */
const DETERMINISTIC_CLASSES = new Set([
  "22", // data exception: text the database cannot hold, a value out of range
  "23", // integrity constraint violation: unique, check, foreign key, not null
  "54", // program limit exceeded: a value or statement too large
]);

/**
 * Whether the database refused a statement for a reason a retry of the same
 * rows cannot change (SQLSTATE classes 22, 23, 54). Anything else — a lost
 * connection, a shutdown, a serialization failure, a timeout, an error
 * without a SQLSTATE — is taken as transient.
 */
export function isDeterministicFailure(error: unknown): boolean {
  const code = sqlState(error);
  return code !== undefined && DETERMINISTIC_CLASSES.has(code.slice(0, 2));
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * An entry a projector could not apply and moved past (see
 * {@link ProjectorOptions.isPoison}): its `journal_dead_letter` row, less
 * the time it was written.
 */
export type ProjectorDeadLetter = Omit<JournalDeadLetterTable, "created_at">;

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
   * effects commit exactly once. Throwing rolls both back. A transient
   * failure is retried with backoff from the same position (never skipped)
   * and shows in `status().lastError`. A deterministic one (`isPoison`) is
   * narrowed down by applying halves of the batch, each in its own
   * transaction, until the one entry the database refuses alone is found:
   * that entry is dead-lettered (`journal_dead_letter`, counter
   * {@link projectorDeadLetterMetric}, `onPoison`) and the rest applied.
   */
  project(batch: readonly JournalRecord[], trx: Transaction<DB>): Promise<void>;
  /**
   * A cheaper way to apply a batch, where its effects are plain writes: the
   * writes of `batch`, which the projector runs as data-modifying CTEs of ONE
   * statement that also claims the batch — no transaction (one statement
   * instead of begin, claim, writes, commit). The writes run after the claim
   * and only when it holds; when it does not (another instance moved the
   * position) the statement fails and nothing of it stays. Writes that
   * must run before the others are given as {@link ProjectionStages}.
   * Return `undefined` for a batch that needs `project` (e.g. a read
   * first). A batch the statement fails for is applied by `project`
   * (failures and poison handled as there).
   */
  writes?(
    batch: readonly JournalRecord[],
  ): readonly ProjectionWrite[] | ProjectionStages | undefined;
  /**
   * Whether a failure of `project` is the entries' own, the same on every
   * retry (default {@link isDeterministicFailure}: SQLSTATE classes 22, 23, 54).
   */
  isPoison?: (error: unknown) => boolean;
  /**
   * Records a substitute for an entry the database refuses alone (e.g. the
   * typed failure of the task it belonged to), inside the transaction that
   * writes its dead letter and moves the position past it. If it throws a
   * deterministic failure too, the dead letter is written without it.
   */
  onPoison?: (entry: JournalRecord, error: unknown, trx: Transaction<DB>) => Promise<void>;
  /** Each dead letter once committed (default: a console warning); counted either way. */
  onDeadLetterEntry?: (dead: ProjectorDeadLetter) => void;
  /** Entries per batch (default 500). */
  batchSize?: number;
  /** How often to look for entries when nothing woke it (default 1000 ms). */
  pollIntervalMs?: number;
  /**
   * After a wake-up, wait up to this long for more entries so one
   * transaction applies several appends (default 0). A `waitFor` cuts the
   * wait short, and so does a backlog of `delayUntilBacklog` entries.
   */
  delayMs?: number;
  /**
   * The rule "only a small backlog waits" (default 32 entries): a wake-up
   * that finds at least this many entries committed past the position
   * skips `delayMs`, and a delay under way ends as soon as this many are
   * committed. At a low rate the delay gathers a few appends into one
   * transaction; under load a batch is large already, and waiting would
   * only add latency. The backlog is known from the in-process `journal`'s
   * commits; a wake-up by NOTIFY alone (another process's writer) waits the
   * delay in full.
   */
  delayUntilBacklog?: number;
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
  /** Batches applied as one statement (`writes`). */
  statementBatches: number;
  /** Batches applied in a transaction (`project`: no `writes`, declined, or the statement failed). */
  transactionBatches: number;
  /** Entries this instance dead-lettered since it started. */
  deadLetters: number;
  /** The latest of them, with when it was written (`Date.now()`). */
  lastDeadLetter?: ProjectorDeadLetter & { at: number };
}

/**
 * Applies `<schema>.journal` to read models, batch by batch, behind the
 * writers.
 *
 * | rule | how |
 * |---|---|
 * | exactly-once effect, also across restarts and crashes | `project` and the position update commit in one transaction (or `writes` and the position update are one statement) |
 * | never skips, never reorders | reads by position; journal positions are gapless and visible in order |
 * | one applier per name, even with several instances | the position row is locked, then re-checked |
 * | survives the database going away | a failed round is retried with backoff from the durable position |
 * | survives an entry the database refuses for good | the batch is bisected down to the entry; it is dead-lettered (row, counter, status, `onPoison`), the others applied in order |
 * | read-your-writes | `waitFor(position)` resolves once the position is applied |
 * | batches at a low rate, no wait under load | `delayMs` after a wake-up, only while fewer than `delayUntilBacklog` entries wait; a `waitFor` ends it |
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
  const backlog = options.delayUntilBacklog ?? 32;
  if (!Number.isSafeInteger(backlog) || backlog < 1) {
    throw invalidJournalInput(
      `a projector's delayUntilBacklog must be a whole number ≥ 1, not ${backlog}`,
      "delayUntilBacklog",
    );
  }
  const delayUntilBacklog = BigInt(backlog);
  const retryMs = options.retryMs ?? 50;
  const maxRetryMs = options.maxRetryMs ?? 5000;
  const onError = options.onError ?? warnBackgroundError;
  const isPoison = options.isPoison ?? isDeterministicFailure;
  const onDeadLetter =
    options.onDeadLetterEntry ??
    ((dead: ProjectorDeadLetter) =>
      warnBackgroundError(
        new Error(`${dead.reason}: ${dead.message}`),
        `projector ${dead.projector} dead-lettered ${dead.kind} at position ${dead.position} (stream ${dead.stream})`,
      ));
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
  // Aborted when the backlog reaches delayUntilBacklog: the batch is large enough.
  let gathered = new AbortController();
  const stopping = new AbortController();
  const waiters: Waiter[] = [];

  const wake = (): void => wakeUp.abort(WOKEN);
  // Entries the in-process journal committed, not yet applied (bounded: a
  // projector that falls behind drops them and reads instead).
  let handed: JournalRecord[] = [];
  let readBack = 0;
  let fromMemory = 0;
  let statementBatches = 0;
  let transactionBatches = 0;
  let deadLetters = 0;
  let lastDeadLetter: (ProjectorDeadLetter & { at: number }) | undefined;
  const meter = options.meter ?? metrics.getMeter("@trellis/storage");
  const deadLetterCounter = meter.createCounter(projectorDeadLetterMetric, {
    description: "Journal entries a projector could not apply and moved past",
    unit: "{entry}",
  });
  const unhand = options.journal?.onEntries((records) => {
    if (handed.length + records.length > batchSize * 4) handed = [];
    for (const record of records) if (record.position > position) handed.push(record);
  });
  const unsubscribe = options.journal?.onCommit((committed) => {
    if (committed > head) head = committed;
    if (head - position >= delayUntilBacklog) gathered.abort(WOKEN);
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

  /** Moves the position row to `to`, only if it is still ours: the claim of a batch. */
  const claim = (on: QueryCreator<JournalDatabase>, to: bigint) =>
    on
      .updateTable("journal_projection")
      .set({ position: to, updated_at: sql<Date>`now()` })
      .where("name", "=", name)
      .where("position", "=", position);

  /**
   * Claims `batch` (the position row, conditional on ours) and applies it:
   * as one statement when `writes` gives its writes, else in one
   * transaction; `poison` instead dead-letters its one entry. Returns
   * the position after it: the batch's last, or where another instance
   * moved it (then nothing was applied).
   */
  const apply = async (
    batch: readonly JournalRecord[],
    poison?: { error: unknown; substitute: boolean },
  ): Promise<bigint> => {
    const last = batch[batch.length - 1] as JournalRecord;
    let dead: ProjectorDeadLetter | undefined;
    const inTransaction = (): Promise<bigint> =>
      database.kysely.transaction().execute(async (trx) => {
        const tablesOf = journalTables(trx as Kysely<DB>, schema);
        // Claim the batch first: the conditional update row-locks the
        // position and matches only if no other instance has moved it.
        const claimed = await claim(tablesOf, last.position).executeTakeFirst();
        // Another instance got there first: go on from where it is.
        if (claimed.numUpdatedRows === 0n) return currentPosition(tablesOf);
        if (poison === undefined) {
          await options.project(batch, trx);
          transactionBatches++;
          return last.position;
        }
        dead = {
          projector: name,
          position: last.position,
          stream: last.stream,
          kind: last.kind,
          reason: sqlState(poison.error) ?? "refused",
          message: printable(
            poison.error instanceof Error ? poison.error.message : String(poison.error),
          ),
        };
        await tablesOf
          .insertInto("journal_dead_letter")
          .values({ ...dead, created_at: new Date() })
          .onConflict((oc) => oc.columns(["projector", "position"]).doNothing())
          .execute();
        if (poison.substitute && options.onPoison) await options.onPoison(last, poison.error, trx);
        return last.position;
      });
    const writes = poison === undefined ? options.writes?.(batch) : undefined;
    const moved =
      writes === undefined
        ? await inTransaction()
        : await applyAsOne(batch, writes).catch(async (error: unknown) => {
            // Lost to another instance (its claim came first), or refused:
            // the transaction says which, and handles a refusal as always.
            const now = await currentPosition();
            if (now !== position) return now;
            const applied = await inTransaction();
            // Applied by the transaction where the statement failed: say so.
            onError(error, `projector ${name}: a one-statement batch at ${position} failed`);
            return applied;
          });
    if (moved !== position) {
      position = moved;
      settle();
    }
    if (moved !== last.position) return moved;
    if (dead !== undefined) {
      deadLetters++;
      lastDeadLetter = { ...dead, at: Date.now() };
      deadLetterCounter.add(1, {
        "trellis.projector": name,
        "trellis.projector.reason": dead.reason,
      });
      try {
        onDeadLetter(dead);
      } catch (error) {
        onError(error, `projector ${name}: onDeadLetterEntry failed`);
      }
    }
    if (options.onApplied) {
      try {
        options.onApplied(dead === undefined ? batch : []);
      } catch (error) {
        onError(error, `projector ${name}: onApplied failed`);
      }
    }
    return moved;
  };

  /**
   * Claims `batch` and runs its `writes` in ONE statement: the claim is
   * a CTE the main query reads, so it runs while the main query does; a
   * claim that matched no row (another instance moved the position)
   * divides by zero, which undoes the statement. The main query reads the
   * `first` stage too, so those writes have run by then; the rest, which no
   * one reads, run after the main query.
   */
  const applyAsOne = async (
    batch: readonly JournalRecord[],
    writes: readonly ProjectionWrite[] | ProjectionStages,
  ): Promise<bigint> => {
    const last = batch[batch.length - 1] as JournalRecord;
    await writesStatement(
      tables.with("claim", (qc) => claim(qc, last.position).returning("position")),
      writes,
      [sql<number>`1 / (select count(*)::int from claim)`.as("claimed")],
    ).execute();
    statementBatches++;
    return last.position;
  };

  const currentPosition = async (on: Kysely<JournalDatabase> = tables): Promise<bigint> => {
    const row = await on
      .selectFrom("journal_projection")
      .select("position")
      .where("name", "=", name)
      .executeTakeFirstOrThrow();
    return BigInt(row.position);
  };

  /**
   * Applies `batch`, which the database refused as a whole (`error`), in
   * halves, down to the entries it refuses alone: those are dead-lettered.
   * Transient failures propagate (the round is retried from the durable
   * position, which may have moved part of the way). At most about
   * 2·log2(batch) transactions per refused entry.
   */
  const bisect = async (batch: readonly JournalRecord[], error: unknown): Promise<bigint> => {
    const last = batch[batch.length - 1] as JournalRecord;
    if (batch.length === 1) {
      try {
        return await apply(batch, { error, substitute: true });
      } catch (failed) {
        if (!isPoison(failed)) throw failed;
        onError(failed, `projector ${name}: onPoison refused at position ${last.position}`);
        return apply(batch, { error, substitute: false });
      }
    }
    const half = Math.ceil(batch.length / 2);
    for (const part of [batch.slice(0, half), batch.slice(half)]) {
      let moved: bigint;
      try {
        moved = await apply(part);
      } catch (failed) {
        if (!isPoison(failed)) throw failed;
        moved = await bisect(part, failed);
      }
      // Another instance moved past us: it goes on from there.
      if (moved !== (part[part.length - 1] as JournalRecord).position) return moved;
    }
    return last.position;
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
    let moved: bigint;
    try {
      moved = await apply(batch);
    } catch (error) {
      if (!isPoison(error)) throw error;
      onError(
        error,
        `projector ${name}: a batch at position ${position} refused; narrowing it down`,
      );
      await bisect(batch, error);
      // Whatever is left of the handed run (or the table) is looked at next.
      return true;
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
          // Only a small backlog waits (delayUntilBacklog); a commit that
          // makes it large enough ends the wait.
          if (head - position < delayUntilBacklog) {
            gathered = new AbortController();
            await sleep(delayMs, urgent.signal, gathered.signal, stopping.signal);
          }
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
      statementBatches,
      transactionBatches,
      deadLetters,
      ...(lastDeadLetter === undefined ? {} : { lastDeadLetter }),
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

/** A message a text column takes: no NUL, no lone surrogate, at most 1000 characters. */
function printable(message: string): string {
  const clean = message
    .replaceAll("\u0000", "\\u0000")
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
  return clean.length > 1000 ? `${clean.slice(0, 997)}...` : clean;
}
