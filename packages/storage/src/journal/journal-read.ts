import type { Kysely } from "kysely";
import { journalTables } from "./journal-schema.js";

/** One committed journal entry as read back. */
export interface JournalRecord {
  position: bigint;
  stream: string;
  kind: string;
  body: Uint8Array;
  createdAt: Date;
}

/** Options of {@link readJournal}. */
export interface ReadJournalOptions {
  /** Entries after this position (exclusive; default 0n: from the start). */
  afterPosition?: bigint;
  /** At most this many entries (required: the journal can be long). */
  limit: number;
  /** Only this stream's entries (a session rebuilt on take-over). */
  stream?: string;
}

/**
 * Reads `<schema>.journal` in position order. Positions are gapless and
 * become visible in order, so paging by the last position returned never
 * skips an entry, even while writers are active.
 */
export async function readJournal<DB>(
  db: Kysely<DB>,
  schema: string,
  options: ReadJournalOptions,
): Promise<JournalRecord[]> {
  let query = journalTables(db, schema)
    .selectFrom("journal")
    .select(["position", "stream", "kind", "body", "created_at"])
    .where("position", ">", options.afterPosition ?? 0n)
    .orderBy("position")
    .limit(options.limit);
  if (options.stream !== undefined) query = query.where("stream", "=", options.stream);
  const rows = await query.execute();
  return rows.map((row) => ({
    position: BigInt(row.position),
    stream: row.stream,
    kind: row.kind,
    body: row.body,
    createdAt: row.created_at,
  }));
}

/** The highest committed position of `<schema>.journal` (0n when empty). */
export async function journalHead<DB>(db: Kysely<DB>, schema: string): Promise<bigint> {
  const row = await journalTables(db, schema)
    .selectFrom("journal")
    .select((eb) => eb.fn.max("position").as("head"))
    .executeTakeFirst();
  return row?.head === null || row?.head === undefined ? 0n : BigInt(row.head);
}
