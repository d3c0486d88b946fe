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
 * subscribed) and stops when its last subscriber leaves. What it shares with
 * the Harn event feeds (start, end, history, registry) is in
 * `../feed/session-feed.ts`.
 */

import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService, type Session } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import {
  type FailingSubscriber,
  type LiveFeed,
  perGateway,
  projectHistory,
  RunningFeeds,
  startFeed,
} from "../feed/session-feed.js";
import { projectorFor, sseOfFrame } from "./frames.js";
import { envelopeForTier, formatCursor, type UiTier } from "./projection/index.js";

/** What a feed hands its subscribers: one log event, rendered for each tier. */
export interface FeedItem {
  eventId: string;
  /** The event's envelopes as SSE text, per tier ("" when the tier sees none). */
  sse: Record<UiTier, string>;
}

/** A subscriber of a feed. */
export interface FeedListener extends FailingSubscriber {
  item(item: FeedItem): void;
}

class SessionFeed implements LiveFeed<FeedListener> {
  readonly subscribers = new Set<FeedListener>();
  readonly abort = new AbortController();
  readonly ready: Promise<void>;

  constructor(
    clients: ServiceClients,
    session: Session,
    options: () => CallOptions,
    onEnd: () => void,
  ) {
    const follow = async (markReady: () => void) => {
      const events = clients.get(EventService);
      const projector = projectorFor(session);
      const withSignal = () => ({ ...options(), signal: this.abort.signal });
      const ref = { workspaceId: session.workspaceId, sessionId: session.id };
      const after = await projectHistory(events, ref, "", withSignal, (event) =>
        projector.project(event),
      );
      const stream = events.streamEvents({ ...ref, afterEventId: after }, withSignal());
      markReady();
      let previous = after;
      for await (const { event } of stream) {
        if (event === undefined || event.id === previous) continue;
        previous = event.id;
        const item = render(event, projector.project(event));
        for (const listener of this.subscribers) listener.item(item);
      }
    };
    this.ready = startFeed(this, follow, "the session's event stream ended", onEnd);
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

/** The feeds of one gateway, by session (workspace and id). */
export class UiFanout {
  readonly #feeds = new RunningFeeds<SessionFeed>();

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
    const ref = { workspaceId: session.workspaceId, sessionId: session.id };
    const joined = this.#feeds.open(
      ref,
      (ended) => new SessionFeed(clients, session, options, ended),
    );
    joined.subscribers.add(listener);
    const leave = () => {
      joined.subscribers.delete(listener);
      if (joined.subscribers.size === 0) this.#feeds.stop(ref, joined);
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

/** The fan-out of the gateway whose service clients are `clients`. */
export const fanoutOf: (clients: ServiceClients) => UiFanout = perGateway(() => new UiFanout());
