/**
 * `journal_dead_letter`: the entries the `tasks-read-model` projector could
 * not apply (a deterministic refusal of the database) and moved past.
 * Storage's own migration, run here for schemas that ran the turn journal's
 * migration (2027_01_01) before the table existed; a no-op for newer ones.
 */
import { journalDeadLetterMigration } from "@trellis/storage";
import { type Kysely, type Migration, sql } from "kysely";

async function currentSchema(db: Kysely<unknown>): Promise<string> {
  // The migrator sets the search path to the service's schema first.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error("the dead-letter migration found no current schema");
  return schema;
}

export const journalDeadLetter: Migration = {
  async up(db: Kysely<unknown>) {
    await journalDeadLetterMigration(await currentSchema(db)).up(db);
  },
  async down(db: Kysely<unknown>) {
    await journalDeadLetterMigration(await currentSchema(db)).down?.(db);
  },
};
