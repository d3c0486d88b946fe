/**
 * Where compaction checkpoints' summaries are kept once written (table
 * `context_summaries`, migration `2026_12_20_context_summaries`): looked up
 * before the model is asked, so each checkpoint is summarised once.
 */
import type { Database } from "@trellis/storage";
import type { Kysely } from "kysely";

/** A stored summary. */
export interface StoredSummary {
  digest: string;
  agentId: string;
  sessionId: string;
  taskId: string;
  throughPosition: number;
  /** `model`, or `first_line` when the model call failed. */
  strategy: string;
  summary: string;
  /** Why the model's summary was not used ("" when it was). */
  fallbackReason: string;
}

/** Reads and writes stored summaries. */
export interface ContextSummaryStore {
  get(digest: string): Promise<StoredSummary | undefined>;
  /** Stores `summary` unless one is stored under its digest already; returns the one stored (first write wins). */
  put(summary: StoredSummary): Promise<StoredSummary>;
}

interface SummaryTable {
  digest: string;
  agent_id: string;
  session_id: string;
  task_id: string;
  through_position: bigint | number;
  strategy: string;
  summary: string;
  fallback_reason: string;
}

interface SummaryDatabase {
  context_summaries: SummaryTable;
}

function fromRow(row: SummaryTable): StoredSummary {
  return {
    digest: row.digest,
    agentId: row.agent_id,
    sessionId: row.session_id,
    taskId: row.task_id,
    throughPosition: Number(row.through_position),
    strategy: row.strategy,
    summary: row.summary,
    fallbackReason: row.fallback_reason,
  };
}

/** The PostgreSQL / PGlite {@link ContextSummaryStore} in the tasks service's schema. */
export class PostgresContextSummaryStore implements ContextSummaryStore {
  readonly #db: Kysely<SummaryDatabase>;

  constructor(database: Database<unknown>, schema: string) {
    this.#db = (database.kysely as Kysely<SummaryDatabase>).withSchema(schema);
  }

  async get(digest: string): Promise<StoredSummary | undefined> {
    const row = await this.#db
      .selectFrom("context_summaries")
      .select([
        "digest",
        "agent_id",
        "session_id",
        "task_id",
        "through_position",
        "strategy",
        "summary",
        "fallback_reason",
      ])
      .where("digest", "=", digest)
      .executeTakeFirst();
    return row ? fromRow(row) : undefined;
  }

  async put(summary: StoredSummary): Promise<StoredSummary> {
    await this.#db
      .insertInto("context_summaries")
      .values({
        digest: summary.digest,
        agent_id: summary.agentId,
        session_id: summary.sessionId,
        task_id: summary.taskId,
        through_position: summary.throughPosition,
        strategy: summary.strategy,
        summary: summary.summary,
        fallback_reason: summary.fallbackReason,
      })
      .onConflict((oc) => oc.column("digest").doNothing())
      .execute();
    return (await this.get(summary.digest)) ?? summary;
  }
}
