import type { Database } from "./database.js";
import type { PGliteDatabaseConfig } from "./dialect/pglite/pglite-config.js";
import { createPGliteDatabase } from "./dialect/pglite/pglite-database.js";
import type { PostgresDatabaseConfig } from "./dialect/postgres/postgres-config.js";
import { createPostgresDatabase } from "./dialect/postgres/postgres-database.js";

/** Where a {@link Database} lives: a Postgres server, or PGlite in this process. */
export type DatabaseConfig = PostgresDatabaseConfig | PGliteDatabaseConfig;

/**
 * Opens a {@link Database} for the given backend. The same service code runs
 * on both (kysely's Postgres compiler either way); both read `int8` as
 * `bigint` and `bytea` as `Uint8Array`.
 *
 * @example
 *   const database = await createDatabase<TasksDatabase>({ kind: "postgres", url });
 *   await ping(database);
 *   await migrate(database, { schema: "tasks", migrations });
 *   const db = database.kysely.withSchema("tasks");
 */
export async function createDatabase<DB>(config: DatabaseConfig): Promise<Database<DB>> {
  switch (config.kind) {
    case "postgres":
      return createPostgresDatabase<DB>(config);
    case "pglite":
      return createPGliteDatabase<DB>(config);
  }
}
