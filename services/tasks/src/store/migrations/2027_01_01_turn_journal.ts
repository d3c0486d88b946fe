/**
 * The tasks service's journal (`journal`, `journal_projection`), created by
 * storage's own migration in this schema: the turn's step records are
 * appended to it when the journal is on (TRELLIS_TASKS_JOURNAL), and the
 * `tasks-read-model` projector keeps its position in it. Empty otherwise.
 */
import { journalMigrations } from "@trellis/storage";
import { type Kysely, type Migration, sql } from "kysely";

async function currentSchema(db: Kysely<unknown>): Promise<string> {
  // The migrator sets the search path to the service's schema first.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error("the turn journal's migration found no current schema");
  return schema;
}

export const turnJournal: Migration = {
  async up(db: Kysely<unknown>) {
    const migrations = journalMigrations(await currentSchema(db));
    for (const name of Object.keys(migrations).sort()) await migrations[name]?.up(db);
  },
  async down(db: Kysely<unknown>) {
    const migrations = journalMigrations(await currentSchema(db));
    for (const name of Object.keys(migrations).sort().reverse()) await migrations[name]?.down?.(db);
  },
};
