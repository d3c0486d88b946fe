import { type Kysely, type RawBuilder, sql, type Transaction } from "kysely";
import { assertSchemaName } from "../schema-name.js";
import { checkEntries, type JournalEntry } from "./journal.js";
import { journalChannel } from "./journal-schema.js";

/** Options of {@link appendInTransaction}. */
export interface TransactionAppendOptions {
  /** The schema holding the journal (`journalMigrations(schema)` applied). */
  schema: string;
  /**
   * Take the journal's transaction lock (PostgreSQL: yes; PGlite runs one
   * transaction at a time and needs none).
   */
  lock: boolean;
  /** `NOTIFY` the journal's channel at commit (projectors in other processes). */
  notify?: boolean;
  /** Bytes of one entry's body (default 1 MiB, as `createJournal`). */
  maxEntryBytes?: number;
  /** Entries of the append (default 1000, as `createJournal`). */
  maxEntries?: number;
  /** Bytes of the append (default 8 MiB, as `createJournal`). */
  maxBytes?: number;
}

/**
 * Appends `entries` to `<schema>.journal` inside the caller's transaction
 * `trx`, so that they commit (or roll back) with the caller's other writes —
 * the bridge for a writer whose state is still relational (the tasks store
 * writes its step records this way until its rows become projections).
 *
 * It keeps the journal's rules: positions continue the head gaplessly and
 * become visible in commit order, because the insert runs under the same
 * transaction-scoped lock as {@link createJournal}'s batches, held from the
 * insert to the commit. Call it as the transaction's LAST statement: the
 * lock then serialises only the insert and the commit, and is always the
 * last lock a writer takes (no lock-order cycle with row locks).
 *
 * Not group-committed: the caller's transaction is the unit. A process that
 * uses both this and `createJournal` on one schema is correct (same lock,
 * same positions) but `Journal.head()` does not see these appends; wake
 * projectors with `Projector.wake()` after the commit.
 *
 * @returns the entries' positions, in order.
 */
export async function appendInTransaction<DB>(
  trx: Transaction<DB>,
  entries: readonly JournalEntry[],
  options: TransactionAppendOptions,
): Promise<bigint[]> {
  assertSchemaName(options.schema);
  checkEntries(entries, {
    maxBatchEntries: options.maxEntries ?? 1000,
    maxBatchBytes: options.maxBytes ?? 8 * 1024 * 1024,
    maxEntryBytes: options.maxEntryBytes ?? 1024 * 1024,
  });
  const db = trx as unknown as Kysely<unknown>;
  const parts: RawBuilder<unknown>[] = [];
  if (options.lock) {
    parts.push(
      sql`pg_advisory_xact_lock(hashtextextended(${`trellis.journal.${options.schema}`}, 0))`,
    );
  }
  if (options.notify === true) parts.push(sql`pg_notify(${journalChannel(options.schema)}, '')`);
  if (parts.length > 0) await sql`select ${sql.join(parts)}`.execute(db);
  const table = sql.id(options.schema, "journal");
  const values = entries.map(
    (entry, i) =>
      sql`(cast(${i + 1} as bigint), cast(${entry.stream} as text), cast(${entry.kind} as text), cast(${entry.body} as bytea))`,
  );
  const result = await sql<{ position: bigint }>`
    insert into ${table} (position, stream, kind, body)
    select h.head + v.ordinal, v.stream, v.kind, v.body
    from (select coalesce(max(position), 0) as head from ${table}) h,
         (values ${sql.join(values)}) as v(ordinal, stream, kind, body)
    returning position`.execute(db);
  const positions = result.rows.map((row) => BigInt(row.position));
  positions.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return positions;
}
