/**
 * What the two per-session live feeds of a gateway have in common: the Harn
 * event feed (`./event-feeds.ts`: SSE event streams and the WebSocket
 * profile) and the UI fan-out (`../ui/fanout.ts`: the UI stream). Each
 * follows one session's log once for all its subscribers on this gateway: it
 * projects the history (the projection needs the whole log), becomes
 * `ready`, follows the live log, and when it ends for any reason fails every
 * subscriber. A session has at most one running feed of each kind, and each
 * gateway (its service clients) its own set of feeds.
 *
 * They stay two feeds because they differ on purpose: how a subscriber joins
 * (the Harn feed hands out an anchor once ready; the UI fan-out takes its
 * listeners before it is ready and the connection drops what its own
 * history read already had), upstream failures (the Harn feed follows again
 * for up to `retryWindowMs`; a UI stream ends and the browser reconnects
 * with its cursor), the projection (the UI's knows the session's lineage)
 * and what an item carries (renderings cached on demand, or the SSE text of
 * both tiers).
 */
import type { CallOptions, Client } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import type { EventService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";

/** Events per `ListEvents` page when a feed reads the history. */
const HISTORY_PAGE = 200;

/**
 * A session as the feeds know it: session ids are unique per workspace, so a
 * feed (and its key) names both.
 */
export interface SessionRef {
  workspaceId: string;
  sessionId: string;
}

/** The map key of a session: its workspace and id, unambiguously. */
export function sessionKey(session: SessionRef): string {
  return JSON.stringify([session.workspaceId, session.sessionId]);
}

/** The part of a subscriber a feed that ends needs. */
export interface FailingSubscriber {
  /** The feed failed for good; it is gone, the subscriber should end. */
  fail(error: unknown): void;
}

/** The state of a running feed that {@link startFeed} and {@link RunningFeeds} use. */
export interface LiveFeed<S extends FailingSubscriber = FailingSubscriber> {
  readonly subscribers: ReadonlySet<S>;
  /** Aborted when the feed stops (its last subscriber left, or it ended). */
  readonly abort: AbortController;
}

/**
 * Run `follow`, a feed's loop, at once. The promise returned (the feed's
 * `ready`) resolves when `follow` calls `markReady`, and rejects if it ends
 * first; a rejection nobody awaits is not reported. When `follow` ends —
 * returning (`stopped` is the error then) or throwing — `feed` is aborted,
 * every subscriber fails with the error, and `onEnd` is called; a feed
 * aborted already (stopped by its last subscriber) fails no one.
 */
export function startFeed(
  feed: LiveFeed,
  follow: (markReady: () => void) => Promise<void>,
  stopped: string,
  onEnd: () => void,
): Promise<void> {
  let markReady!: () => void;
  let failReady!: (error: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  // A subscriber that awaits `ready` handles the failure itself.
  ready.catch(() => undefined);
  const end = (error: unknown) => {
    failReady(error);
    if (!feed.abort.signal.aborted) {
      feed.abort.abort();
      for (const subscriber of feed.subscribers) subscriber.fail(error);
    }
    onEnd();
  };
  follow(markReady).then(() => end(new Error(stopped)), end);
  return ready;
}

/**
 * Hand `project` the session's events after `afterId` ("" for all), in log
 * order, reading `ListEvents` page by page with `options()`. Resolves to the
 * id of the last event read (`afterId` when there was none).
 */
export async function projectHistory(
  events: Client<typeof EventService>,
  session: SessionRef,
  afterId: string,
  options: () => CallOptions,
  project: (event: Event) => void,
): Promise<string> {
  let after = afterId;
  for (;;) {
    const page = await events.listEvents(
      { ...session, afterEventId: after, limit: HISTORY_PAGE },
      options(),
    );
    for (const event of page.events) project(event);
    const last = page.events.at(-1);
    if (last) after = last.id;
    if (!page.hasMore || last === undefined) return after;
  }
}

/**
 * The running feeds of one kind on one gateway, by session (workspace and
 * id: two workspaces' sessions of one id never share a feed).
 */
export class RunningFeeds<F extends LiveFeed> {
  readonly #feeds = new Map<string, F>();

  /** Feeds running now. */
  get size(): number {
    return this.#feeds.size;
  }

  get(session: SessionRef): F | undefined {
    return this.#feeds.get(sessionKey(session));
  }

  /**
   * The running feed of `session`, or a new one made by `create`, which
   * is given what the feed calls when it ends (it is then forgotten).
   */
  open(session: SessionRef, create: (ended: () => void) => F): F {
    const key = sessionKey(session);
    const running = this.#feeds.get(key);
    if (running && !running.abort.signal.aborted) return running;
    const created: F = create(() => {
      if (this.#feeds.get(key) === created) this.#feeds.delete(key);
    });
    this.#feeds.set(key, created);
    return created;
  }

  /** Stop `feed` (no subscriber left) and forget it if it is still the one of `session`. */
  stop(session: SessionRef, feed: F): void {
    feed.abort.abort();
    const key = sessionKey(session);
    if (this.#feeds.get(key) === feed) this.#feeds.delete(key);
  }
}

/** One `T` per gateway, keyed by the gateway's service clients, made on first use. */
export function perGateway<T>(create: () => T): (clients: ServiceClients) => T {
  const made = new WeakMap<ServiceClients, T>();
  return (clients) => {
    let value = made.get(clients);
    if (value === undefined) {
      value = create();
      made.set(clients, value);
    }
    return value;
  };
}
