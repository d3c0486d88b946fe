/**
 * The tasks service's session leases (`session_leases`), created by
 * storage's own migration in this schema: who owns a session in
 * distributed owner mode (`TRELLIS_TASKS_JOURNAL=owner` with several
 * replicas, store/session-leases.ts). Empty otherwise.
 */
import { leaseMigrations } from "@trellis/storage";
import { type Kysely, type Migration, sql } from "kysely";

async function currentSchema(db: Kysely<unknown>): Promise<string> {
  // The migrator sets the search path to the service's schema first.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error("the session leases' migration found no current schema");
  return schema;
}

export const sessionLeases: Migration = {
  async up(db: Kysely<unknown>) {
    const migrations = leaseMigrations(await currentSchema(db));
    for (const name of Object.keys(migrations).sort()) await migrations[name]?.up(db);
  },
  async down(db: Kysely<unknown>) {
    const migrations = leaseMigrations(await currentSchema(db));
    for (const name of Object.keys(migrations).sort().reverse()) await migrations[name]?.down?.(db);
  },
};
