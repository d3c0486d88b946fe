import type { Kysely } from "kysely";
import { withTimeout } from "../async.js";
import type { AcquireLockOptions, Database, DatabaseKind, Lease, Unlisten } from "../database.js";
import { storageError } from "../errors.js";

/** The backend-specific parts {@link assembleDatabase} turns into a {@link Database}. */
export interface DatabaseParts<DB> {
  kind: DatabaseKind;
  kysely: Kysely<DB>;
  /**
   * Runs the trivial health query. `closed` tells whether `close()` was
   * called; a probe that must not touch a closed backend throws then.
   */
  probe(closed: boolean): Promise<unknown>;
  locks: {
    acquire(name: string, options?: AcquireLockOptions): Promise<Lease>;
    close(): Promise<void>;
  };
  notifier: {
    listen(channel: string, onNotify: (payload: string) => void): Promise<Unlisten>;
    close(): Promise<void>;
  };
  /** Runs last in `close()`, after kysely is destroyed (e.g. closing an owned instance). */
  afterClose?: () => Promise<void>;
}

/**
 * The part of a {@link Database} that is the same on every backend: a `ping`
 * that reports a missing or slow answer as `service_unavailable` (naming the
 * backend), lock and listen delegated to the backend, and an idempotent
 * `close()` that ends locks and listeners, then kysely, then `afterClose`.
 */
export function assembleDatabase<DB>(parts: DatabaseParts<DB>): Database<DB> {
  const { kind, kysely, locks, notifier } = parts;
  let closed = false;
  return {
    kind,
    kysely,
    async ping(options = {}) {
      const timeoutMs = options.timeoutMs ?? 2000;
      try {
        await withTimeout(
          parts.probe(closed),
          timeoutMs,
          () => new Error(`no answer within ${timeoutMs} ms`),
        );
      } catch (error) {
        throw storageError({
          reason: "service_unavailable",
          message: `${kind} is unavailable: ${error instanceof Error ? error.message : String(error)}`,
          metadata: { dependency: kind },
          cause: error,
        });
      }
    },
    acquireLock: (name, options) => locks.acquire(name, options),
    listen: (channel, onNotify) => notifier.listen(channel, onNotify),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([locks.close(), notifier.close()]);
      await kysely.destroy();
      await parts.afterClose?.();
    },
  };
}
