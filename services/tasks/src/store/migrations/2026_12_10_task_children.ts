/**
 * Cancellation that really stops:
 * - an index on `tasks.parent_task_id` (delegated and replay tasks only), so
 *   canceling a task finds the tasks it delegated to without a scan;
 * - `tasks.cancel_reason`: why a running task's cancel was requested, kept
 *   until its runner confirms the stop and `task.canceled` is recorded.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const taskChildren: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`create index tasks_parent_idx on tasks (parent_task_id) where parent_task_id <> ''`.execute(
      db,
    );
    await db.schema
      .alterTable("tasks")
      .addColumn("cancel_reason", "text", (c) => c.notNull().defaultTo(""))
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable("tasks").dropColumn("cancel_reason").execute();
    await sql`drop index tasks_parent_idx`.execute(db);
  },
};
