import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { type Database, warnBackgroundError } from "../../database.js";
import { assembleDatabase } from "../assemble-database.js";
import type { PostgresDatabaseConfig } from "./postgres-config.js";
import { createPostgresLocks } from "./postgres-lock.js";
import { createPostgresNotifier } from "./postgres-notifier.js";
import { createPostgresTypes } from "./postgres-types.js";

/**
 * Opens a {@link Database} on a PostgreSQL server: kysely's `PostgresDialect`
 * over a `pg` pool. Nothing connects until the first query (use `ping()` to
 * check the server at start).
 *
 * Survives a server restart: connections the server drops are discarded and
 * replaced on next use, and their errors go to `onBackgroundError` instead of
 * crashing the process (a `pg` client that emits 'error' with no listener
 * throws). Queries running at the moment of the restart fail; later ones work.
 */
export function createPostgresDatabase<DB>(config: PostgresDatabaseConfig): Database<DB> {
  const onBackgroundError = config.onBackgroundError ?? warnBackgroundError;
  const clientConfig: pg.ClientConfig = {
    connectionString: config.url,
    connectionTimeoutMillis: config.connectTimeoutMs ?? 5000,
    application_name: config.applicationName ?? "trellis",
    keepAlive: true,
    types: createPostgresTypes(),
  };
  const pool = new pg.Pool({
    ...clientConfig,
    max: config.poolSize ?? 10,
    idleTimeoutMillis: config.idleTimeoutMs ?? 10_000,
  });
  // Idle clients: pg-pool removes a broken one, then emits 'error' here.
  pool.on("error", (error) => onBackgroundError(error, "idle pooled connection failed"));
  // Checked-out clients: pg-pool detaches its own listener while a client is
  // lent out (kysely holds it for a whole transaction), so a server restart
  // at that moment would emit an unhandled 'error'. The failed query still
  // rejects; the pool drops the client when kysely releases it.
  pool.on("connect", (client) => {
    client.on("error", (error) => onBackgroundError(error, "pooled connection failed"));
  });

  return assembleDatabase({
    kind: "postgres",
    kysely: new Kysely<DB>({ dialect: new PostgresDialect({ pool }) }),
    probe: () => pool.query("select 1"),
    locks: createPostgresLocks({ clientConfig, pool, onBackgroundError }),
    notifier: createPostgresNotifier({ clientConfig, onBackgroundError }),
    // kysely.destroy() ends the pool.
  });
}
