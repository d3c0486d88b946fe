import type { Kysely } from "kysely";

/** Which backend a {@link Database} talks to. */
export type DatabaseKind = "postgres" | "pglite";

/**
 * A connected database: the kysely instance a service queries through, plus
 * the few things kysely does not offer and the outbox needs — a health probe,
 * a cluster-wide named lock and change notifications.
 *
 * Rules it keeps, on every backend:
 * - `int8` / `bigint` columns (and `count(*)`) read as JS `bigint`, never as a
 *   string or a lossy number (see `bigintParser`);
 * - `bytea` reads as a `Uint8Array` (a `Buffer` on Postgres, which is one);
 * - a lock named `n` is held by at most one holder across every process that
 *   shares the database;
 * - a committed `NOTIFY` reaches every listener of its channel, and a listener
 *   is also called after its connection was re-established (it may have missed
 *   notifications while disconnected).
 *
 * Create one with `createDatabase()`; query through `kysely`, usually with
 * `kysely.withSchema("<service>")`.
 */
export interface Database<DB = unknown> {
  readonly kind: DatabaseKind;
  readonly kysely: Kysely<DB>;
  /**
   * Resolves when the database answers a trivial query within `timeoutMs`;
   * rejects with a `service_unavailable` TrellisError otherwise (fast when the
   * server is down: connection refused is reported at once).
   */
  ping(options?: PingOptions): Promise<void>;
  /**
   * Waits until the lock `name` is free, then holds it until the returned
   * lease is released or lost. Postgres: a session advisory lock on a dedicated
   * connection, so it is freed by the server the moment the holder's process
   * dies. PGlite: an in-process lock (a PGlite instance belongs to one process).
   */
  acquireLock(name: string, options?: AcquireLockOptions): Promise<Lease>;
  /**
   * Calls `onNotify` with the payload after every committed `NOTIFY channel`,
   * and once more (with payload "") after a lost listening connection comes
   * back. Never throws
   * for connection trouble: it reports it to the database's background error
   * handler and keeps retrying, so callers must also poll.
   */
  listen(channel: string, onNotify: (payload: string) => void): Promise<Unlisten>;
  /** Closes the pool / the owned PGlite instance and every lock and listener. */
  close(): Promise<void>;
}

/** Options of {@link Database.ping}. */
export interface PingOptions {
  /** Give up after this long (default 2000 ms). */
  timeoutMs?: number;
}

/** Options of {@link Database.acquireLock}. */
export interface AcquireLockOptions {
  /** Abort the wait; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * A held lock. Holders must stop the guarded work once `lost` is aborted (its
 * connection broke, so another process may already hold the lock).
 */
export interface Lease {
  readonly lost: AbortSignal;
  /** Releases the lock; safe to call more than once and after `lost`. */
  release(): Promise<void>;
}

/** Stops a {@link Database.listen} subscription. */
export type Unlisten = () => Promise<void>;

/**
 * Receives errors that happen in the background, where no caller can catch
 * them (an idle pool connection dropped by a restarting server, a listener
 * reconnecting). The default logs a warning; nothing crashes the process.
 */
export type BackgroundErrorHandler = (error: unknown, context: string) => void;

/** The default {@link BackgroundErrorHandler}: one warning line per error. */
export const warnBackgroundError: BackgroundErrorHandler = (error, context) => {
  console.warn(`[storage] ${context}: ${error instanceof Error ? error.message : String(error)}`);
};

/**
 * Health probe for {@link Database}: resolves when it answers, rejects with a
 * `service_unavailable` TrellisError when it does not (see {@link Database.ping}).
 */
export function ping<DB>(database: Database<DB>, options?: PingOptions): Promise<void> {
  return database.ping(options);
}
