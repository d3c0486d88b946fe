/**
 * An agent's session state besides the transcript (a scripted graph's fields,
 * e.g. `{"approved": true}`): `session_states` holds the latest per session
 * (what the next run starts from, written with the run that left it), and
 * `tasks.state` what each task's own run left (its resource shows it).
 */
import { type Kysely, type Migration, sql } from "kysely";

export const agentState: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable("tasks").addColumn("state", "jsonb").execute();
    await db.schema
      .createTable("session_states")
      .addColumn("session_id", "text", (c) => c.primaryKey())
      .addColumn("state", "jsonb", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable("session_states").execute();
    await db.schema.alterTable("tasks").dropColumn("state").execute();
  },
};
