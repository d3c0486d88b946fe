import type { BackgroundErrorHandler } from "../../database.js";

/**
 * Connects to a PostgreSQL server through a `pg` pool.
 *
 * @example
 *   createDatabase({ kind: "postgres", url: "postgres://trellis@db:5432/trellis", poolSize: 20 })
 */
export interface PostgresDatabaseConfig {
  kind: "postgres";
  /** `postgres://user:pass@host:port/database` (never logged). */
  url: string;
  /** Pool size (default 10). Locks and the listener use their own connections on top. */
  poolSize?: number;
  /** Give up opening a connection after this long (default 5000 ms), so a down server fails fast. */
  connectTimeoutMs?: number;
  /** Close pooled connections idle this long (default 10000 ms). */
  idleTimeoutMs?: number;
  /** `application_name` shown in `pg_stat_activity` (default "trellis"). */
  applicationName?: string;
  /** Where background errors go (default: a console warning). */
  onBackgroundError?: BackgroundErrorHandler;
}
