import { sql } from "kysely";
import type { Database } from "../database.js";
import { assertSchemaName } from "../schema-name.js";
import { invalidJournalInput } from "./journal-errors.js";

/** Options of {@link pruneJournal}. */
export interface PruneJournalOptions {
  /** The schema holding the journal. */
  schema: string;
  /**
   * Keep entries written at or after this time, even when every projector
   * has applied them (default: keep none for age). An idempotency key lives
   * on its entry: this is how long a retried append is still recognised.
   */
  keepSince?: Date;
  /** Entries deleted per statement (default 10,000); it goes on until done. */
  chunk?: number;
}

/** What {@link pruneJournal} did. */
export interface PruneJournalResult {
  /** Entries deleted. */
  deleted: number;
  /** The lowest position among the projectors (publisher included); nothing above it was deleted. */
  lowest: bigint;
}

/**
 * Retention: deletes journal entries every projector of the schema has
 * applied — at or below the lowest position in `journal_projection` — and
 * never:
 *
 * | kept | why |
 * |---|---|
 * | entries above the lowest projector position | a projector still has to apply them (a schema without projectors prunes nothing) |
 * | the newest entry of each stream | it carries the stream's head, which `expectedPosition` fences against; the journal's newest entry is among them, and new positions continue from it (deleting it would reuse positions) |
 * | entries written since `keepSince` | their idempotency keys still dedupe retried appends |
 *
 * A projector row that no longer runs holds retention back: delete its
 * row when a projector is retired. Safe while writers and projectors run:
 * only rows every projector has passed are deleted, and the journal's
 * head is never among them.
 *
 * @example
 *   await pruneJournal(database, { schema: "tasks", keepSince: new Date(Date.now() - 86_400_000) });
 */
export async function pruneJournal<DB>(
  database: Database<DB>,
  options: PruneJournalOptions,
): Promise<PruneJournalResult> {
  const { schema } = options;
  assertSchemaName(schema);
  const chunk = options.chunk ?? 10_000;
  if (!Number.isInteger(chunk) || chunk <= 0) {
    throw invalidJournalInput("chunk must be a positive integer", "chunk");
  }
  const journal = sql.id(schema, "journal");
  const projection = sql.id(schema, "journal_projection");
  const found = await sql<{ lowest: bigint | null }>`
    select min(position) as lowest from ${projection}`.execute(database.kysely);
  const lowest =
    found.rows[0]?.lowest === null || found.rows[0] === undefined
      ? 0n
      : BigInt(found.rows[0].lowest);
  if (lowest <= 0n) return { deleted: 0, lowest };
  const age =
    options.keepSince === undefined ? sql`` : sql`and j.created_at < ${options.keepSince}`;
  let deleted = 0;
  for (;;) {
    // The stream's newer entry is looked up by the (stream, position) index.
    const result = await sql`
      delete from ${journal} where position in (
        select j.position from ${journal} as j
        where j.position <= ${lowest} ${age}
          and exists (
            select 1 from ${journal} as n
            where n.stream = j.stream and n.position > j.position)
        order by j.position
        limit ${chunk})`.execute(database.kysely);
    const n = Number(result.numAffectedRows ?? 0n);
    deleted += n;
    if (n < chunk) return { deleted, lowest };
  }
}
