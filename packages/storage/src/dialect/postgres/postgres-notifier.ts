import pg from "pg";
import { createSerialQueue } from "../../async.js";
import type { BackgroundErrorHandler, Unlisten } from "../../database.js";

/** Options of {@link createPostgresNotifier}. */
export interface PostgresNotifierOptions {
  clientConfig: pg.ClientConfig;
  onBackgroundError: BackgroundErrorHandler;
  /** First reconnect delay; doubles up to 30 s (default 250 ms). */
  reconnectDelayMs?: number;
}

/** The notification half of a Postgres {@link Database}. */
export interface PostgresNotifier {
  listen(channel: string, onNotify: (payload: string) => void): Promise<Unlisten>;
  close(): Promise<void>;
}

/**
 * `LISTEN` / `NOTIFY` on one dedicated connection shared by every listener
 * of a database (a pooled connection cannot listen: it is handed to other
 * queries between uses).
 *
 * When that connection breaks (server restart) it reconnects with backoff,
 * re-issues every `LISTEN`, then calls every handler once, because
 * notifications sent while it was away are gone for good.
 */
export function createPostgresNotifier(options: PostgresNotifierOptions): PostgresNotifier {
  const baseDelay = options.reconnectDelayMs ?? 250;
  const handlers = new Map<string, Set<(payload: string) => void>>();
  let client: pg.Client | undefined;
  let connecting: Promise<pg.Client | undefined> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = baseDelay;
  let closed = false;
  // LISTEN / UNLISTEN of concurrent callers share the one connection.
  const serial = createSerialQueue();

  const fire = (channel: string, payload = "") => {
    for (const handler of handlers.get(channel) ?? []) handler(payload);
  };

  function scheduleReconnect(): void {
    if (closed || retryTimer !== undefined || handlers.size === 0) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect().then((c) => {
        if (c === undefined) return;
        // Whatever was notified while we were away is lost: wake everyone.
        for (const channel of handlers.keys()) fire(channel);
      });
    }, delay);
    retryTimer.unref();
    delay = Math.min(delay * 2, 30_000);
  }

  // Resolves with the connected client, or undefined after reporting the
  // failure and scheduling a retry. Never rejects.
  function connect(): Promise<pg.Client | undefined> {
    if (client !== undefined) return Promise.resolve(client);
    connecting ??= (async () => {
      const c = new pg.Client(options.clientConfig);
      let lostReported = false;
      const onLost = (error: unknown) => {
        if (lostReported) return;
        lostReported = true;
        if (client === c) client = undefined;
        if (!closed) options.onBackgroundError(error, "notification listener disconnected");
        void c.end().catch(() => {});
        scheduleReconnect();
      };
      c.on("error", onLost);
      c.on("end", () => onLost(new Error("connection ended")));
      c.on("notification", (message) => fire(message.channel, message.payload));
      try {
        await c.connect();
        for (const channel of handlers.keys()) {
          await serial(() => c.query(`LISTEN ${pg.escapeIdentifier(channel)}`));
        }
        if (closed) {
          await c.end();
          return undefined;
        }
        client = c;
        delay = baseDelay;
        return c;
      } catch (error) {
        onLost(error);
        return undefined;
      } finally {
        connecting = undefined;
      }
    })();
    return connecting;
  }

  return {
    async listen(channel, onNotify) {
      if (closed) throw new Error("database is closed");
      let set = handlers.get(channel);
      const first = set === undefined;
      if (set === undefined) {
        set = new Set();
        handlers.set(channel, set);
      }
      set.add(onNotify);
      if (first) {
        const c = client;
        if (c !== undefined) {
          await serial(() => c.query(`LISTEN ${pg.escapeIdentifier(channel)}`)).catch(
            (error: unknown) => options.onBackgroundError(error, `LISTEN ${channel}`),
          );
        } else {
          // connect() LISTENs on every registered channel, this one included
          // (it walks the live map, so a connection already being opened
          // picks it up too).
          await connect();
        }
      }
      return async () => {
        const current = handlers.get(channel);
        if (current === undefined || !current.delete(onNotify) || current.size > 0) return;
        handlers.delete(channel);
        const c = client;
        if (c !== undefined) {
          await serial(() => c.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`)).catch(() => {});
        }
      };
    },
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      handlers.clear();
      await connecting;
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
