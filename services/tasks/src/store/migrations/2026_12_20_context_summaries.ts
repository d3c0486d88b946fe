/**
 * Context compaction with the agent's model: `context_summaries` keeps each
 * compaction checkpoint's summary once it is written, so later turns (on any
 * replica) and replays of the task reuse it instead of asking the model
 * again. Keyed by `digest` (the agent and the exact summarised text, see
 * `compaction/model-summary.ts`); `strategy` says who wrote it (`model`, or
 * `first_line` when the model call failed and the deterministic summary was
 * kept, `fallback_reason` saying why). `session_id`, `task_id` and
 * `through_position` record where it was first needed, for operators.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const contextSummaries: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("context_summaries")
      .addColumn("digest", "text", (c) => c.primaryKey())
      .addColumn("agent_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("through_position", "bigint", (c) => c.notNull())
      .addColumn("strategy", "text", (c) => c.notNull())
      .addColumn("summary", "text", (c) => c.notNull())
      .addColumn("fallback_reason", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable("context_summaries").execute();
  },
};
