/**
 * One live feed per session, shared by every UI stream connection of that
 * session on this gateway: the log is followed once (`StreamEvents`),
 * each new event is projected once, and its SSE text is rendered once per
 * tier; connections only write it. Without it, each of N connections ran
 * its own upstream stream and projection, and fanning one session out to
 * 1,000 browsers cost 1,000 times the work per event (see
 * docs/benchmarks.md, "UI stream fan-out").
 *
 * Exactness is kept by the order of operations in a connection: it
 * subscribes (its listener buffers), waits until the feed is `ready` (the
 * feed read the log and asked for everything after the last event it read),
 * and only then reads the history it projects itself. Every event is either
 * in that history or delivered by the feed afterwards (or both: a connection
 * skips feed events whose ids its history had), so nothing is lost or sent
 * twice. The projection is pure, so the feed's envelopes for an event are
 * exactly those the connection would have computed (same cursors).
 *
 * The feed follows the log with the credentials of the connection that
 * opened it (every subscriber was authorized for the session before it
 * subscribed) and stops when its last subscriber leaves.
 */

import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService, type Session } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { projectorFor, sseOfFrame } from "./frames.js";
import { envelopeForTier, formatCursor, type UiTier } from "./projection/index.js";

/** What a feed hands its subscribers: one log event, rendered for each tier. */
export interface FeedItem {
  eventId: string;
  /** The event's envelopes as SSE text, per tier ("" when the tier sees none). */
  sse: Record<UiTier, string>;
}

/** A subscriber of a feed. */
export interface FeedListener {
  item(item: FeedItem): void;
  /** The feed failed; it is gone, the subscriber should end. */
  fail(error: unknown): void;
}

class SessionFeed {
  readonly listeners = new Set<FeedListener>();
  readonly abort = new AbortController();
  readonly ready: Promise<void>;

  constructor(
    clients: ServiceClients,
    session: Session,
    options: () => CallOptions,
    onEnd: () => void,
  ) {
    let markReady!: () => void;
    let failReady!: (error: unknown) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    // A connection that awaits `ready` handles the failure itself.
    this.ready.catch(() => undefined);
    const run = async () => {
      const events = clients.get(EventService);
      const projector = projectorFor(session);
      let after = "";
      for (;;) {
        const page = await events.listEvents(
          { sessionId: session.id, afterEventId: after, limit: 200 },
          { ...options(), signal: this.abort.signal },
        );
        for (const event of page.events) projector.project(event);
        const last = page.events.at(-1);
        if (last) after = last.id;
        if (!page.hasMore || last === undefined) break;
      }
      const stream = events.streamEvents(
        { sessionId: session.id, afterEventId: after },
        { ...options(), signal: this.abort.signal },
      );
      markReady();
      let previous = after;
      for await (const { event } of stream) {
        if (event === undefined || event.id === previous) continue;
        previous = event.id;
        const item = render(event, projector.project(event));
        for (const listener of this.listeners) listener.item(item);
      }
    };
    run().then(
      () => {
        this.#end(new Error("the session's event stream ended"), failReady);
        onEnd();
      },
      (error: unknown) => {
        this.#end(error, failReady);
        onEnd();
      },
    );
  }

  #end(error: unknown, failReady: (error: unknown) => void): void {
    failReady(error);
    if (this.abort.signal.aborted) return;
    this.abort.abort();
    for (const listener of this.listeners) listener.fail(error);
  }
}

function render(event: Event, envelopes: ReturnType<ReturnType<typeof projectorFor>["project"]>) {
  const sse: Record<UiTier, string> = { default: "", debug: "" };
  envelopes.forEach((envelope, index) => {
    for (const tier of ["default", "debug"] as const) {
      const visible = envelopeForTier(envelope, tier);
      if (visible) sse[tier] += sseOfFrame({ id: formatCursor(event.id, index), ...visible });
    }
  });
  return { eventId: event.id, sse };
}

/** The feeds of one gateway, by session. */
export class UiFanout {
  readonly #feeds = new Map<string, SessionFeed>();

  /** Number of sessions followed now (for tests and metrics). */
  get feeds(): number {
    return this.#feeds.size;
  }

  /**
   * Subscribe `listener` to `session`'s feed (opening it with `options` when
   * none runs). Resolves once the feed is ready — read the history after
   * that — or rejects when it could not start. The returned function
   * unsubscribes; the feed stops with its last subscriber.
   */
  async subscribe(
    clients: ServiceClients,
    session: Session,
    options: () => CallOptions,
    listener: FeedListener,
  ): Promise<() => void> {
    let feed = this.#feeds.get(session.id);
    if (!feed || feed.abort.signal.aborted) {
      const created: SessionFeed = new SessionFeed(clients, session, options, () => {
        if (this.#feeds.get(session.id) === created) this.#feeds.delete(session.id);
      });
      feed = created;
      this.#feeds.set(session.id, feed);
    }
    const joined = feed;
    joined.listeners.add(listener);
    const leave = () => {
      joined.listeners.delete(listener);
      if (joined.listeners.size === 0) {
        joined.abort.abort();
        if (this.#feeds.get(session.id) === joined) this.#feeds.delete(session.id);
      }
    };
    try {
      await joined.ready;
    } catch (error) {
      leave();
      throw error;
    }
    return leave;
  }
}

const fanouts = new WeakMap<ServiceClients, UiFanout>();

/** The fan-out of the gateway whose service clients are `clients`. */
export function fanoutOf(clients: ServiceClients): UiFanout {
  let fanout = fanouts.get(clients);
  if (!fanout) {
    fanout = new UiFanout();
    fanouts.set(clients, fanout);
  }
  return fanout;
}
