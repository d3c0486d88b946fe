import pg from "pg";
import { abortReason, createSerialQueue, withTimeout } from "../../async.js";
import type { AcquireLockOptions, BackgroundErrorHandler, Lease } from "../../database.js";

/** Options of {@link createPostgresLocks}. */
export interface PostgresLocksOptions {
  /** How lock connections are opened (same server and credentials as the pool). */
  clientConfig: pg.ClientConfig;
  /** Used to cancel a lock wait that is being aborted. */
  pool: pg.Pool;
  /** How often a held lock checks that its connection is still alive (default 5000 ms). */
  heartbeatMs?: number;
  onBackgroundError: BackgroundErrorHandler;
}

/** The lock half of a Postgres {@link Database}. */
export interface PostgresLocks {
  acquire(name: string, options?: AcquireLockOptions): Promise<Lease>;
  /** Ends every lock connection (their locks are released by the server). */
  close(): Promise<void>;
}

/**
 * Named cluster-wide locks on Postgres: a session-level advisory lock keyed by
 * `hashtextextended(name, 0)`, held on a dedicated connection per lease.
 *
 * A dedicated connection (not a pooled one) because a session lock lives as
 * long as its connection: when the holding process dies, or its connection
 * breaks, the server frees the lock at once and the next waiter — blocked in
 * `pg_advisory_lock` on the server — gets it without polling. For the same
 * reason a lease whose connection errors is reported `lost`: another process
 * may hold the lock now.
 */
export function createPostgresLocks(options: PostgresLocksOptions): PostgresLocks {
  const heartbeatMs = options.heartbeatMs ?? 5000;
  const open = new Set<pg.Client>();
  let closed = false;

  async function end(client: pg.Client): Promise<void> {
    open.delete(client);
    await client.end().catch(() => {});
  }

  async function acquire(name: string, acquireOptions: AcquireLockOptions = {}): Promise<Lease> {
    const { signal } = acquireOptions;
    signal?.throwIfAborted();
    if (closed) throw new Error("database is closed");
    const lost = new AbortController();
    const client = new pg.Client(options.clientConfig);
    // A pg client with no 'error' listener crashes the process when its
    // server goes away; here that only means the lock is lost.
    client.on("error", (error) => lost.abort(error));
    client.on("end", () => lost.abort(new Error(`lock ${name}: connection closed`)));
    open.add(client);
    try {
      await client.connect();
      const { rows } = await client.query<{ pid: number }>("select pg_backend_pid() as pid");
      const pid = rows[0]?.pid;
      // An abort during the awaits above fired no listener yet: check now
      // (no await between this check and the listener below).
      signal?.throwIfAborted();
      // While we wait inside pg_advisory_lock the connection is busy, so an
      // abort has to cancel the wait from another connection.
      const cancel = () => {
        options.pool.query("select pg_cancel_backend($1)", [pid]).catch(() => {});
      };
      signal?.addEventListener("abort", cancel, { once: true });
      try {
        await client.query("select pg_advisory_lock(hashtextextended($1, 0))", [name]);
      } finally {
        signal?.removeEventListener("abort", cancel);
      }
      // Granted just as the caller gave up: hand it straight back.
      if (signal?.aborted) throw abortReason(signal);
    } catch (error) {
      await end(client);
      if (signal?.aborted) throw abortReason(signal);
      throw error;
    }

    // The heartbeat and release() share the connection.
    const serial = createSerialQueue();
    // Keepalive on the socket notices a dead peer only after minutes; a
    // periodic round trip notices a broken connection within heartbeatMs.
    const heartbeat = setInterval(() => {
      withTimeout(
        serial(() => client.query("select 1")),
        heartbeatMs,
        () => new Error("heartbeat timed out"),
      ).catch((error: unknown) => {
        if (lost.signal.aborted) return;
        options.onBackgroundError(error, `lock ${name} lost`);
        lost.abort(error);
        void end(client);
      });
    }, heartbeatMs);
    heartbeat.unref();

    let released = false;
    return {
      lost: lost.signal,
      async release() {
        if (released) return;
        released = true;
        clearInterval(heartbeat);
        if (!lost.signal.aborted) {
          // Unlock explicitly so the next waiter gets the lock before this
          // promise resolves; closing the connection would free it too.
          await serial(() =>
            client.query("select pg_advisory_unlock(hashtextextended($1, 0))", [name]),
          ).catch(() => {});
        }
        await end(client);
      },
    };
  }

  return {
    acquire,
    async close() {
      closed = true;
      await Promise.all([...open].map(end));
    },
  };
}
