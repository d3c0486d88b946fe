import { type Kysely, type Migration, sql } from "kysely";
import { assertSchemaName } from "../schema-name.js";

/**
 * Who owns a session (a journal stream): table `<schema>.session_leases`,
 * one row per stream ever leased. Written only by `createLeases`.
 *
 * | column | rule |
 * |---|---|
 * | `stream` | the journal stream (session) the lease is on |
 * | `owner` | the id of the process holding (or last holding) it |
 * | `fence` | 1, 2, 3, … one more on every acquisition: never reused for a stream (a released lease keeps its row) |
 * | `expires_at` | the database clock's deadline; past it, anyone may take the lease over |
 * | `acquired_at` | the database clock when `fence` was taken |
 */
export interface SessionLeaseTable {
  stream: string;
  owner: string;
  fence: bigint;
  expires_at: Date;
  acquired_at: Date;
}

/** The lease table, as it appears inside a service's schema. */
export interface LeaseDatabase {
  session_leases: SessionLeaseTable;
}

/**
 * The migrations that create a service's lease table (the same on PGlite and
 * PostgreSQL); merge them into the service's own before `migrate`, beside
 * `journalMigrations` (leases hand out the journal's stream heads).
 */
export function leaseMigrations(schema: string): Record<string, Migration> {
  assertSchemaName(schema);
  return {
    "2027_02_09_000_create_session_leases": {
      async up(db: Kysely<unknown>) {
        const s = db.schema.withSchema(schema);
        await s
          .createTable("session_leases")
          .addColumn("stream", "text", (c) => c.primaryKey())
          .addColumn("owner", "text", (c) => c.notNull())
          .addColumn("fence", "bigint", (c) => c.notNull().check(sql`fence > 0`))
          .addColumn("expires_at", "timestamptz", (c) => c.notNull())
          .addColumn("acquired_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
          .execute();
        // A renewal round updates every lease of one owner in one statement.
        await s
          .createIndex("session_leases_owner_idx")
          .on("session_leases")
          .column("owner")
          .execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.withSchema(schema).dropTable("session_leases").execute();
      },
    },
  };
}
