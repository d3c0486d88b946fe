/**
 * `journal_append`: the turn journal's batch as one statement on PostgreSQL
 * (storage's journal-append-sql.ts). Storage's own migration, run here for
 * schemas that ran the turn journal's migration (2027_01_01) before the
 * function existed; `create or replace`, so a no-op for newer ones.
 */
import { journalAppendFunctionMigration } from "@trellis/storage";
import { type Kysely, type Migration, sql } from "kysely";

async function currentSchema(db: Kysely<unknown>): Promise<string> {
  // The migrator sets the search path to the service's schema first.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error("the journal_append migration found no current schema");
  return schema;
}

export const journalAppend: Migration = {
  async up(db: Kysely<unknown>) {
    await journalAppendFunctionMigration(await currentSchema(db)).up(db);
  },
  async down(db: Kysely<unknown>) {
    await journalAppendFunctionMigration(await currentSchema(db)).down?.(db);
  },
};
