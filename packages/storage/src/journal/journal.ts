import type { Event } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Database } from "../database.js";
import { storageError } from "../errors.js";
import {
  outboxEntries,
  type SequencedOutboxRows,
  sequencedOutboxCtes,
  sequencedOutboxRows,
} from "../outbox/outbox.js";
import { assertSchemaName } from "../schema-name.js";
import { appendByFunction, type FunctionResult } from "./journal-append-sql.js";
import {
  invalidJournalInput,
  journalQueueFull,
  journalTooLarge,
  journalUnavailable,
} from "./journal-errors.js";
import type { JournalRecord } from "./journal-read.js";
import { journalChannel } from "./journal-schema.js";

/** One entry to append: what it is, to which stream, and its bytes. */
export interface JournalEntry {
  /** The ordering unit (a session id); 1–256 characters. */
  stream: string;
  /** What the entry is (an event kind); 1–256 characters. */
  kind: string;
  /** The entry itself (e.g. a protobuf `Event`), at most `maxEntryBytes`. */
  body: Uint8Array;
}

/** Options of {@link Journal.append}. */
export interface AppendOptions {
  /**
   * Makes the append idempotent: a key already written (now, or earlier in
   * the same batch) returns the positions of the append that wrote it, and
   * writes nothing. The entries are not compared; one key, one append.
   */
  idempotencyKey?: string;
  /**
   * Optimistic concurrency per stream: write only if the stream's last
   * position is this one (0n: the stream has no entries yet); otherwise this
   * append alone is rejected with `conflict` and the rest of its batch is
   * unaffected. All entries must then be on one stream. A session owner
   * uses it as its fence: once another owner appended, a deposed owner's
   * append cannot land. An earlier append of the same stream in the same
   * batch counts as a move (its position is not known to the caller yet).
   */
  expectedPosition?: bigint;
  /**
   * Public events of the append, sequenced by the caller — the one writer
   * of their resources' events (a session owner), which knows each
   * resource's last sequence and event id: written to the journal's outbox
   * (`JournalOptions.outbox`) with the entries, in the same statement
   * where the batch allows (else the same transaction), each resource's
   * counter row set to its last event; handed to the outbox's `kick` after
   * the commit. Durable and published together with the entries, never
   * without them; nothing is written for a duplicate or a refused append.
   * Checked before the append is queued (`sequencedOutboxRows`: a bad one
   * is refused alone, `invalid_request` / `payload_too_large`); a missing
   * id or creation time is filled in place. Refused when the journal has no
   * outbox. A sequence another writer took meanwhile fails the batch (the
   * outbox's unique key): a caller must be the only writer of those
   * resources while it appends.
   */
  events?: readonly Event[];
}

/** What {@link Journal.append} resolved with. */
export interface AppendResult {
  /** The entries' positions, in the order given. */
  positions: bigint[];
  /** True when the idempotency key was already written: nothing new was stored. */
  duplicate: boolean;
}

/** Counters of a {@link Journal} since it was created. */
export interface JournalStats {
  /** Transactions that wrote (or tried to write) a batch. */
  batches: number;
  failedBatches: number;
  /** Appends resolved (duplicates included). */
  appends: number;
  /** Entries written. */
  entries: number;
  duplicates: number;
  /** Appends refused because their stream had moved (`expectedPosition`). */
  conflicts: number;
  /** Entries waiting for a flush now. */
  queued: number;
}

/**
 * The durable, append-only record of a service's turns: the write side.
 *
 * | rule | how |
 * |---|---|
 * | an append resolves only once its entries are committed | the promise settles after the batch's COMMIT |
 * | concurrent appends share one transaction (group commit) | one flush at a time; what queues meanwhile is the next batch |
 * | positions are gapless and in commit order | each batch takes `max(position)+1…` under a transaction lock |
 * | a stream's entries follow its appends' call order | the queue is FIFO and batches are sequential |
 * | an append is all or nothing; a failed batch fails all of its appends | one transaction per batch; nothing half-written |
 * | an idempotency key is written once | looked up under the lock, deduplicated within a batch, unique index behind |
 * | `expectedPosition` fences a stream | its head is read under the lock; a moved stream rejects that append alone (`conflict`) |
 *
 * A batch whose COMMIT outcome is unknown (the connection broke during it)
 * rejects its appends although they may be stored: retry with the same
 * idempotency key to learn their positions. An append rejected for a failed
 * batch does not stop later appends of its stream; a writer that needs "B
 * only after A" awaits A first (the session owner does).
 */
export interface Journal {
  /**
   * Appends `entries` as one unit and resolves with their positions once
   * they are durable. Rejects with a TrellisError: `invalid_request` (bad
   * entry), `payload_too_large` (over `maxEntryBytes`, `maxBatchEntries` or
   * `maxBatchBytes`), `rate_limited` (queue full: back off), `conflict`
   * (the stream moved past `expectedPosition`),
   * `service_unavailable` (the batch failed, or the journal is closed).
   */
  append(entries: readonly JournalEntry[], options?: AppendOptions): Promise<AppendResult>;
  /** The highest position this journal has committed (0n before its first batch). */
  head(): bigint;
  /** Calls `listener` with the new head after each committed batch; returns the unsubscribe. */
  onCommit(listener: (head: bigint) => void): () => void;
  /**
   * Calls `listener` with the entries each committed batch wrote (position
   * order; duplicates and conflicts wrote none) before the `onCommit`
   * listeners — what a projector in this process applies without reading
   * them back. `createdAt` is this process's clock at the commit, not the
   * row's `created_at`. The records are shared: listeners must not change
   * them. Returns the unsubscribe.
   */
  onEntries(listener: (records: readonly JournalRecord[]) => void): () => void;
  stats(): JournalStats;
  /** Refuses new appends and resolves once the queued ones have settled. */
  close(): Promise<void>;
}

/** Options of {@link createJournal}. */
export interface JournalOptions {
  /** The schema holding the journal (`journalMigrations(schema)` applied). */
  schema: string;
  /** Entries per batch transaction (default 1000; also the largest single append). */
  maxBatchEntries?: number;
  /** Bytes of bodies per batch (default 8 MiB; also the largest single append). */
  maxBatchBytes?: number;
  /** Bytes of one entry's body (default 1 MiB). */
  maxEntryBytes?: number;
  /** Entries waiting for a flush before appends are refused (default 10,000). */
  maxQueuedEntries?: number;
  /**
   * How long a flush waits for more appends when its batch is not full
   * (default 0: flush as soon as the previous flush ended). See
   * docs/turn-journal.md for the measurement behind the default.
   */
  lingerMs?: number;
  /** `NOTIFY` the journal's channel in each batch, for projectors in other processes (default false). */
  notify?: boolean;
  /**
   * Where appends' `events` go: the outbox of `schema` (same database,
   * `outboxMigrations` applied), written in the batch's statement (or its
   * transaction); `kick` gets the committed rows (an `OutboxWriter`'s or a
   * relay's kick) before the appends resolve.
   */
  outbox?: JournalOutbox;
}

/** The outbox a journal writes its appends' events to (see {@link JournalOptions.outbox}). */
export interface JournalOutbox {
  schema: string;
  kick(committed: readonly LoggedEvent[]): void;
}

interface Pending {
  entries: readonly JournalEntry[];
  bytes: number;
  key: string | undefined;
  expected: bigint | undefined;
  /** The append's events as outbox rows (see `AppendOptions.events`). */
  events: SequencedOutboxRows | undefined;
  resolve(result: AppendResult): void;
  reject(error: unknown): void;
}

const NAME_LIMIT = 256;

/**
 * Creates the writer of `<schema>.journal` on `database` (PostgreSQL or
 * PGlite). One per process and schema is enough: it serves every caller.
 *
 * @example
 *   const journal = createJournal(database, { schema: "tasks" });
 *   const { positions } = await journal.append(
 *     [{ stream: sessionId, kind: "task.submitted", body }],
 *     { idempotencyKey: `submit:${requestKey}` },
 *   );
 */
export function createJournal<DB>(database: Database<DB>, options: JournalOptions): Journal {
  const { schema } = options;
  assertSchemaName(schema);
  const maxBatchEntries = positive(options.maxBatchEntries ?? 1000, "maxBatchEntries");
  const maxBatchBytes = positive(options.maxBatchBytes ?? 8 * 1024 * 1024, "maxBatchBytes");
  const maxEntryBytes = positive(options.maxEntryBytes ?? 1024 * 1024, "maxEntryBytes");
  const maxQueuedEntries = positive(options.maxQueuedEntries ?? 10_000, "maxQueuedEntries");
  const lingerMs = options.lingerMs ?? 0;
  const outbox = options.outbox;
  if (outbox !== undefined) assertSchemaName(outbox.schema);
  const writer = batchWriter(database, schema, options.notify === true, outbox?.schema);

  const queue: Pending[] = [];
  const listeners = new Set<(head: bigint) => void>();
  const entryListeners = new Set<(records: readonly JournalRecord[]) => void>();
  let queued = 0;
  let flushing: Promise<void> | undefined;
  let scheduled = false;
  let closed = false;
  let head = 0n;
  const stats = {
    batches: 0,
    failedBatches: 0,
    appends: 0,
    entries: 0,
    duplicates: 0,
    conflicts: 0,
  };

  const schedule = (): void => {
    if (scheduled || flushing !== undefined || queue.length === 0) return;
    scheduled = true;
    const run = (): void => {
      scheduled = false;
      flushing = flush().finally(() => {
        flushing = undefined;
        schedule();
      });
    };
    // setImmediate gathers the appends made in the same turn of the event
    // loop; a linger waits for more only while the batch is not full.
    if (lingerMs > 0 && queued < maxBatchEntries) setTimeout(run, lingerMs);
    else setImmediate(run);
  };

  const flush = async (): Promise<void> => {
    const batch: Pending[] = [];
    let entries = 0;
    let bytes = 0;
    // Whole appends only, FIFO; the first always fits (append checked it).
    while (queue.length > 0) {
      const next = queue[0] as Pending;
      const fits =
        entries + next.entries.length <= maxBatchEntries && bytes + next.bytes <= maxBatchBytes;
      if (batch.length > 0 && !fits) break;
      queue.shift();
      batch.push(next);
      entries += next.entries.length;
      bytes += next.bytes;
    }
    queued -= entries;
    stats.batches++;
    let results: (AppendResult | Error)[];
    let logged: LoggedEvent[];
    try {
      ({ results, logged } = await writer(batch));
    } catch (error) {
      stats.failedBatches++;
      const failure = journalUnavailable(
        `journal append failed; nothing of its batch was written unless the commit's answer was lost (retry with the idempotency key): ${
          error instanceof Error ? error.message : String(error)
        }`,
        error,
      );
      for (const pending of batch) pending.reject(failure);
      return;
    }
    // Published before anyone learns of the commit (as a unit of work does).
    if (logged.length > 0) outbox?.kick(logged);
    const records: JournalRecord[] | undefined = entryListeners.size > 0 ? [] : undefined;
    const createdAt = new Date();
    batch.forEach((pending, i) => {
      const result = results[i] as AppendResult | Error;
      if (result instanceof Error) {
        stats.conflicts++;
        pending.reject(result);
        return;
      }
      stats.appends++;
      if (result.duplicate) stats.duplicates++;
      else {
        stats.entries += result.positions.length;
        if (records !== undefined) {
          pending.entries.forEach((entry, at) => {
            records.push({
              position: result.positions[at] as bigint,
              stream: entry.stream,
              kind: entry.kind,
              body: entry.body,
              createdAt,
            });
          });
        }
      }
      const last = result.positions[result.positions.length - 1];
      if (last !== undefined && last > head) head = last;
      pending.resolve(result);
    });
    if (records !== undefined && records.length > 0) {
      records.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
      for (const listener of entryListeners) listener(records);
    }
    for (const listener of listeners) listener(head);
  };

  return {
    append(entries, appendOptions = {}) {
      try {
        if (closed) throw journalUnavailable("the journal is closed");
        const bytes = checkEntries(entries, { maxBatchEntries, maxBatchBytes, maxEntryBytes });
        const key = appendOptions.idempotencyKey;
        if (key !== undefined) checkName(key, "idempotencyKey");
        const expected = appendOptions.expectedPosition;
        if (expected !== undefined) checkExpectation(entries, expected);
        const events = eventsOf(appendOptions.events, outbox);
        if (queued + entries.length > maxQueuedEntries) throw journalQueueFull(maxQueuedEntries);
        return new Promise<AppendResult>((resolve, reject) => {
          queue.push({ entries, bytes, key, expected, events, resolve, reject });
          queued += entries.length;
          schedule();
        });
      } catch (error) {
        return Promise.reject(error);
      }
    },
    head: () => head,
    onCommit(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    onEntries(listener) {
      entryListeners.add(listener);
      return () => entryListeners.delete(listener);
    },
    stats: () => ({ ...stats, queued }),
    async close() {
      closed = true;
      while (flushing !== undefined || scheduled || queue.length > 0) {
        schedule();
        await (flushing ?? new Promise((r) => setImmediate(r)));
      }
    },
  };
}

/**
 * Writes one batch in one transaction and returns each append's result, in
 * batch order. Postgres: a transaction-scoped advisory lock per journal
 * makes batches of every process take positions one after another, so
 * positions become visible in order (the lock is released after the commit
 * is visible); the whole batch is ONE statement, `<schema>.journal_append`
 * (journal-append-sql.ts), or — in a schema migrated before that function
 * existed — a transaction of up to six. PGlite runs one transaction at a
 * time anyway: no lock, and a batch without keys or NOTIFY is a single
 * statement.
 */
function batchWriter<DB>(
  database: Database<DB>,
  schema: string,
  notify: boolean,
  outboxSchema: string | undefined,
): (batch: readonly Pending[]) => Promise<BatchWritten> {
  const table = sql.id(schema, "journal");
  const lockName = `trellis.journal.${schema}`;
  const channel = journalChannel(schema);
  const locks = database.kind === "postgres";
  let byFunction = true;

  /** The outbox rows of `writers` (batch order), merged; undefined when none. */
  const eventsOfWriters = (writers: readonly Pending[]): SequencedOutboxRows | undefined => {
    const parts = writers.flatMap((pending) => (pending.events ? [pending.events] : []));
    if (parts.length === 0) return undefined;
    if (parts.length === 1) return parts[0];
    // A resource's counter once, its last (a later append continues it).
    const counters = new Map<string, SequencedOutboxRows["counters"][number]>();
    for (const part of parts) {
      for (const c of part.counters) counters.set(`${c.resource_object}\u0000${c.resource_id}`, c);
    }
    return {
      events: parts.flatMap((part) => part.events),
      rows: parts.flatMap((part) => part.rows),
      counters: [...counters.values()],
    };
  };
  const logged = (
    events: SequencedOutboxRows | undefined,
    inserted: readonly { id: string; position: bigint }[],
  ): LoggedEvent[] =>
    events === undefined ? [] : outboxEntries(events.events, inserted, events.rows);
  return async (batch) => {
    const withEvents = batch.some((pending) => pending.events !== undefined);
    const keys = [...new Set(batch.flatMap((p) => (p.key === undefined ? [] : [p.key])))];
    const expecting = [
      ...new Set(
        batch.flatMap((p) => (p.expected === undefined ? [] : [p.entries[0]?.stream as string])),
      ),
    ];
    const write = async (db: Kysely<DB>): Promise<BatchWritten> => {
      if (locks || notify) {
        const parts: RawBuilder<unknown>[] = [];
        if (locks) parts.push(sql`pg_advisory_xact_lock(hashtextextended(${lockName}, 0))`);
        if (notify) parts.push(sql`pg_notify(${channel}, '')`);
        await sql`select ${sql.join(parts)}`.execute(db);
      }
      const stored = new Map<string, bigint[]>();
      if (keys.length > 0) {
        const found = await sql<{ idempotency_key: string; position: bigint; append_size: number }>`
          select idempotency_key, position, append_size from ${table}
          where idempotency_key in (${sql.join(keys)})`.execute(db);
        for (const row of found.rows) {
          stored.set(row.idempotency_key, range(row.position, row.append_size));
        }
      }
      const heads = new Map<string, bigint>();
      if (expecting.length > 0) {
        const found = await sql<{ stream: string; head: bigint }>`
          select stream, max(position) as head from ${table}
          where stream in (${sql.join(expecting)}) group by stream`.execute(db);
        for (const row of found.rows) heads.set(row.stream, BigInt(row.head));
      }
      // The first append of a key in the batch writes; later ones mirror it.
      // A stream written earlier in the batch has moved for later expectations.
      const writers: Pending[] = [];
      const firstOfKey = new Map<string, Pending>();
      const conflicts = new Map<Pending, Error>();
      const moved = new Set<string>();
      for (const pending of batch) {
        if (pending.key !== undefined && (stored.has(pending.key) || firstOfKey.has(pending.key))) {
          continue;
        }
        if (pending.expected !== undefined) {
          const stream = pending.entries[0]?.stream as string;
          const current = heads.get(stream) ?? 0n;
          if (moved.has(stream) || current !== pending.expected) {
            conflicts.set(
              pending,
              streamMoved(stream, pending.expected, current, moved.has(stream)),
            );
            continue;
          }
        }
        if (pending.key !== undefined) firstOfKey.set(pending.key, pending);
        writers.push(pending);
        for (const entry of pending.entries) moved.add(entry.stream);
      }
      const { positions, logged } = await insert(db, writers);
      const written = new Map<Pending, bigint[]>();
      let at = 0;
      for (const pending of writers) {
        const own = positions.slice(at, at + pending.entries.length);
        at += own.length;
        written.set(pending, own);
        if (pending.key !== undefined) stored.set(pending.key, own);
      }
      const results = batch.map((pending) => {
        const conflict = conflicts.get(pending);
        if (conflict !== undefined) return conflict;
        const own = written.get(pending);
        if (own !== undefined) return { positions: own, duplicate: false };
        return { positions: [...(stored.get(pending.key as string) as bigint[])], duplicate: true };
      });
      return { results, logged };
    };

    /** The writers' entries, and their events in the same statement. */
    const insert = async (
      db: Kysely<DB>,
      writers: readonly Pending[],
    ): Promise<{ positions: bigint[]; logged: LoggedEvent[] }> => {
      if (writers.length === 0) return { positions: [], logged: [] };
      const values: RawBuilder<unknown>[] = [];
      let ordinal = 0;
      for (const pending of writers) {
        pending.entries.forEach((entry, i) => {
          ordinal++;
          const key = i === 0 ? (pending.key ?? null) : null;
          const size = i === 0 && pending.key !== undefined ? pending.entries.length : null;
          values.push(
            sql`(cast(${ordinal} as bigint), cast(${entry.stream} as text), cast(${entry.kind} as text), cast(${entry.body} as bytea), cast(${key} as text), cast(${size} as integer))`,
          );
        });
      }
      // Positions continue the journal's head inside the statement, so a
      // rolled-back batch leaves no gap.
      const entries = sql`
        insert into ${table} (position, stream, kind, body, idempotency_key, append_size)
        select h.head + v.ordinal, v.stream, v.kind, v.body, v.key, v.size
        from (select coalesce(max(position), 0) as head from ${table}) h,
             (values ${sql.join(values)}) as v(ordinal, stream, kind, body, key, size)
        returning position`;
      const events = eventsOfWriters(writers);
      // With events: the outbox rows in the same statement (id null: a journal row).
      const result = await (events === undefined
        ? sql<{ position: bigint; id?: undefined }>`${entries}`
        : sql<{ position: bigint; id: string | null }>`
              with ${sequencedOutboxCtes(outboxSchema as string, "o", events.rows, events.counters)},
                j as (${entries})
              select position, null as id from j
              union all select position, id from o`
      ).execute(db);
      const positions: bigint[] = [];
      const inserted: { id: string; position: bigint }[] = [];
      for (const row of result.rows) {
        if (typeof row.id !== "string") positions.push(BigInt(row.position));
        else inserted.push({ id: row.id, position: BigInt(row.position) });
      }
      positions.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      if (positions.length !== ordinal) {
        throw new Error(`journal insert returned ${positions.length} positions for ${ordinal}`);
      }
      return { positions, logged: logged(events, inserted) };
    };

    if (locks && byFunction) {
      // One statement, the appends' events included.
      const byOne = async (): Promise<BatchWritten> => {
        const { results, inserted } = await appendByFunction(
          database.kysely as unknown as Kysely<unknown>,
          schema,
          notify,
          batch,
          withEvents ? outboxSchema : undefined,
        );
        const written = batch.filter((_, i) => results[i]?.status === "written");
        return {
          results: batch.map((pending, i) => fromFunction(pending, results[i] as FunctionResult)),
          logged: logged(eventsOfWriters(written), inserted),
        };
      };
      try {
        return await byOne();
      } catch (error) {
        // 42883 undefined_function: the schema predates journal_append. The
        // failed statement wrote nothing; use the transaction from now on.
        if (!isUndefinedFunction(error)) throw error;
        byFunction = false;
      }
    }
    // PGlite without keys or expectations: the batch is one statement, events included.
    if (!locks && !notify && keys.length === 0 && expecting.length === 0) {
      return write(database.kysely);
    }
    return database.kysely.transaction().execute((trx) => write(trx));
  };
}

/** What a batch's transaction wrote: each append's result (batch order), the outbox rows. */
interface BatchWritten {
  results: (AppendResult | Error)[];
  logged: LoggedEvent[];
}

/** Checks an append's `events` (see `AppendOptions.events`) before it is queued. */
function eventsOf(
  events: readonly Event[] | undefined,
  outbox: JournalOutbox | undefined,
): Pending["events"] {
  if (events === undefined || events.length === 0) return undefined;
  if (!Array.isArray(events))
    throw invalidJournalInput("events must be a list of events", "events");
  if (outbox === undefined) {
    throw invalidJournalInput("this journal has no outbox to write events to", "events");
  }
  return sequencedOutboxRows(events);
}

function fromFunction(pending: Pending, answer: FunctionResult): AppendResult | Error {
  const stream = pending.entries[0]?.stream as string;
  switch (answer.status) {
    case "written":
      return { positions: range(answer.first, pending.entries.length), duplicate: false };
    case "duplicate":
      return { positions: range(answer.first, answer.size), duplicate: true };
    case "conflict":
      return streamMoved(stream, pending.expected as bigint, answer.head, false);
    case "moved":
      return streamMoved(stream, pending.expected as bigint, 0n, true);
  }
}

function isUndefinedFunction(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as { code?: unknown }).code === "42883" &&
    String((error as { message?: unknown }).message).includes("journal_append")
  );
}

function streamMoved(stream: string, expected: bigint, current: bigint, inBatch: boolean): Error {
  return storageError({
    reason: "conflict",
    message: inBatch
      ? `stream ${stream} was appended to just before (same batch); expected position ${expected} is stale`
      : `stream ${stream} is at position ${current}, not the expected ${expected}`,
    param: "expectedPosition",
    metadata: { stream, expected: String(expected), position: String(current) },
  });
}

function checkExpectation(entries: readonly JournalEntry[], expected: bigint): void {
  if (typeof expected !== "bigint" || expected < 0n) {
    throw invalidJournalInput("expectedPosition must be a bigint ≥ 0", "expectedPosition");
  }
  const stream = entries[0]?.stream;
  if (entries.some((entry) => entry.stream !== stream)) {
    throw invalidJournalInput(
      "an append with expectedPosition must keep to one stream",
      "expectedPosition",
    );
  }
}

function range(first: bigint, size: number): bigint[] {
  return Array.from({ length: size }, (_, i) => first + BigInt(i));
}

/** Checks entries before they are written (shared with `appendInTransaction`). */
export function checkEntries(
  entries: readonly JournalEntry[],
  limits: { maxBatchEntries: number; maxBatchBytes: number; maxEntryBytes: number },
): number {
  if (!Array.isArray(entries) || entries.length === 0) {
    throw invalidJournalInput("an append needs at least one entry", "entries");
  }
  if (entries.length > limits.maxBatchEntries) {
    throw journalTooLarge(
      `an append of ${entries.length} entries is over the journal's ${limits.maxBatchEntries}`,
      "entries",
      limits.maxBatchEntries,
    );
  }
  let bytes = 0;
  entries.forEach((entry, i) => {
    checkName(entry?.stream, `entries[${i}].stream`);
    checkName(entry.kind, `entries[${i}].kind`);
    if (!(entry.body instanceof Uint8Array)) {
      throw invalidJournalInput("an entry's body must be bytes", `entries[${i}].body`);
    }
    if (entry.body.byteLength > limits.maxEntryBytes) {
      throw journalTooLarge(
        `entry of ${entry.body.byteLength} bytes is over the journal's ${limits.maxEntryBytes}`,
        `entries[${i}].body`,
        limits.maxEntryBytes,
      );
    }
    bytes += entry.body.byteLength;
  });
  if (bytes > limits.maxBatchBytes) {
    throw journalTooLarge(
      `an append of ${bytes} bytes is over the journal's ${limits.maxBatchBytes}`,
      "entries",
      limits.maxBatchBytes,
    );
  }
  return bytes;
}

// Checked up front so that one bad entry can never fail a whole batch of
// other callers' appends in the database.
export function checkName(value: unknown, param: string): void {
  if (typeof value !== "string" || value.length === 0 || value.length > NAME_LIMIT) {
    throw invalidJournalInput(`${param} must be a string of 1–${NAME_LIMIT} characters`, param);
  }
  if (value.includes("\0")) throw invalidJournalInput(`${param} must not contain NUL`, param);
}

function positive(value: number, param: string): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw invalidJournalInput(`${param} must be a positive integer`, param);
  }
  return value;
}
