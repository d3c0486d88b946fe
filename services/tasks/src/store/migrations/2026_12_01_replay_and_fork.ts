/**
 * Replay and fork: what a replay needs that a task run did not keep before.
 *
 * - `sessions.forked_from_message_id` / `forked_message_count`: a fork's
 *   lineage in message terms (the parent's last copied message, how many).
 * - `task_checkpoints`: every suspension's checkpoint, kept for good (the
 *   task row forgets its checkpoint once it resumes), so a `from_checkpoint`
 *   replay can restore it. `transcript_length` is the session's length when
 *   the task suspended (its input and the messages it made so far included).
 * - `replays`: one row per replay task: the source, the mode, the overrides
 *   (which may hold secret values, so they live here and never in the task's
 *   metadata or events) and the plan frozen when the replay was created.
 * - an index on `signal_deliveries.task_id`: a replay reads the signals its
 *   source was resumed with.
 */
import { type Kysely, type Migration, sql } from "kysely";

const now = sql`now()`;

export const replayAndFork: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable("sessions")
      .addColumn("forked_from_message_id", "text", (c) => c.notNull().defaultTo(""))
      .execute();
    await db.schema
      .alterTable("sessions")
      .addColumn("forked_message_count", "bigint", (c) => c.notNull().defaultTo(0))
      .execute();

    await db.schema
      .createTable("task_checkpoints")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("signal_id", "text", (c) => c.notNull())
      .addColumn("event_id", "text", (c) => c.notNull().unique())
      .addColumn("checkpoint", "jsonb")
      .addColumn("transcript_length", "bigint", (c) => c.notNull())
      .addColumn("output_count", "integer", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("task_checkpoints_task_idx")
      .on("task_checkpoints")
      .columns(["task_id", "seq"])
      .execute();

    await db.schema
      .createTable("replays")
      .addColumn("task_id", "text", (c) => c.primaryKey())
      .addColumn("source_task_id", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("mode", "text", (c) => c.notNull())
      .addColumn("overrides", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("checkpoint_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("plan", "jsonb", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("replays_source_idx")
      .on("replays")
      .columns(["source_task_id"])
      .execute();

    await db.schema
      .createIndex("signal_deliveries_task_idx")
      .on("signal_deliveries")
      .columns(["task_id", "created_at"])
      .execute();
  },
};
