import { type Migration, type MigrationResult, Migrator, sql } from "kysely";
import type { Database } from "./database.js";
import { storageError } from "./errors.js";
import { assertSchemaName } from "./schema-name.js";

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** The service's schema; created if missing. Holds its tables and migration bookkeeping. */
  schema: string;
  /**
   * Migrations by name, applied in name order. Names are
   * `YYYY_MM_DD_what`, e.g. `2026_11_22_create_tasks`; a new migration must
   * sort after every applied one.
   */
  migrations: Record<string, Migration>;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Names applied by this call, in order (empty when already up to date). */
  applied: string[];
}

const MIGRATION_NAME = /^\d{4}_\d{2}_\d{2}_[a-z0-9_]+$/;

/**
 * Brings a service's schema up to date at start, with kysely's `Migrator`.
 *
 * Rules it keeps:
 * - everything lives in `schema`, the migration tables too, so services never
 *   see each other's bookkeeping;
 * - idempotent: applied migrations are skipped;
 * - safe when replicas start together: the whole run (schema creation
 *   included, which kysely does outside its own lock and which Postgres does
 *   not make race-free) holds the lock `trellis.migrate.<schema>`; the others
 *   wait, then find nothing to do;
 * - all pending migrations apply in one transaction: all or none;
 * - inside a migration `db` is scoped to the schema (`withSchema`) and
 *   `search_path` starts with it, so raw SQL lands there as well.
 *
 * Throws a TrellisError (`internal_error`, the failing migration named, the
 * database error as cause) when a migration fails.
 */
export async function migrate<DB>(
  database: Database<DB>,
  options: MigrateOptions,
): Promise<MigrateResult> {
  const { schema } = options;
  assertSchemaName(schema);
  for (const name of Object.keys(options.migrations)) {
    if (!MIGRATION_NAME.test(name)) {
      throw storageError({
        reason: "invalid_request",
        message: `migration name ${JSON.stringify(name)} must look like 2026_11_22_create_tasks`,
        param: "migrations",
      });
    }
  }
  const migrations = Object.fromEntries(
    Object.entries(options.migrations).map(([name, m]) => [name, scoped(schema, m)]),
  );

  const lease = await database.acquireLock(`trellis.migrate.${schema}`);
  try {
    await sql`create schema if not exists ${sql.id(schema)}`.execute(database.kysely);
    const migrator = new Migrator({
      db: database.kysely,
      provider: { getMigrations: async () => migrations },
      migrationTableSchema: schema,
    });
    const { error, results } = await migrator.migrateToLatest();
    if (error !== undefined) {
      const failed = results?.find((r: MigrationResult) => r.status === "Error")?.migrationName;
      throw storageError({
        reason: "internal_error",
        message: `migrating schema ${schema} failed${failed ? ` at ${failed}` : ""}: ${
          error instanceof Error ? error.message : String(error)
        }`,
        metadata: { schema, ...(failed ? { migration: failed } : {}) },
        cause: error,
      });
    }
    return {
      applied: (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName),
    };
  } finally {
    await lease.release();
  }
}

function scoped(schema: string, migration: Migration): Migration {
  const enter = async (db: Parameters<Migration["up"]>[0]) => {
    // `set local`: kysely runs the pending migrations in one transaction, so
    // this lasts exactly as long as they do (and never leaks to a pooled
    // connection or to other services sharing a PGlite instance).
    await sql`set local search_path to ${sql.id(schema)}, public`.execute(db);
    return db.withSchema(schema);
  };
  const { down } = migration;
  return {
    up: async (db) => migration.up(await enter(db)),
    ...(down === undefined ? {} : { down: async (db) => down(await enter(db)) }),
  };
}
