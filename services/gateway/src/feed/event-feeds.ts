/**
 * One live feed per session, shared by every Harn event stream of that
 * session on this gateway (SSE `…/events/stream`, `/v1/tasks/{id}/stream`
 * and the WebSocket profile): the session's log is followed once
 * (`EventService.StreamEvents`), each event is projected once (for the
 * WebSocket's request frames) and rendered once per wire format (see
 * {@link FeedItem.rendered}); a connection only writes what it is handed.
 * Before it, each of N connections ran its own upstream stream and JSON
 * rendering (docs/benchmarks.md, "Open streams").
 *
 * Order: a feed hands every event of its session after its start point to
 * its subscribers in log order. A subscriber learns at subscription time the
 * feed's *anchor* — the id of the last event delivered before it joined (or
 * the start point) — and is then handed every later event. That is what
 * `./follow.ts` uses to join history and live exactly.
 *
 * Upstream failures: when the upstream stream breaks with a transient error
 * (the tasks service restarted, a network blip) the feed follows again from
 * the last event it delivered, with a growing pause, so subscribers see no
 * gap and no duplicate. A permanent error (the session is gone, the cursor
 * is refused), or transient ones lasting longer than {@link retryWindowMs},
 * fail every subscriber; they end their streams with the error, and clients
 * resume with their cursor.
 *
 * The feed follows the log with the credentials of the connection that
 * opened it (every subscriber was authorized for the session before it
 * subscribed) and stops when its last subscriber leaves. What it shares with
 * the UI fan-out (start, end, history, registry) is in `./session-feed.ts`.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { sleep } from "@trellis/runtime";
import { eventToHarn } from "../domain/harn-json.js";
import type { ProjectedEnvelope } from "../ui/projection/index.js";
import { UiProjector } from "../ui/projection/projector.js";
import {
  type FailingSubscriber,
  type LiveFeed,
  perGateway,
  projectHistory,
  RunningFeeds,
  type SessionRef,
  startFeed,
} from "./session-feed.js";

/** How long a feed keeps retrying a broken upstream before failing its subscribers. */
export const retryWindowMs = 30_000;
const firstRetryDelayMs = 100;
const maxRetryDelayMs = 2_000;

/** Connect codes after which following again may work. */
const transientCodes = new Set<Code>([
  Code.Unavailable,
  Code.Unknown,
  Code.Internal,
  Code.DeadlineExceeded,
  Code.Aborted,
  Code.ResourceExhausted,
  Code.Canceled,
]);

/** Whether following the log again may succeed after `error`. */
export function isTransientUpstreamError(error: unknown): boolean {
  if (error instanceof ConnectError) return transientCodes.has(error.code);
  // Anything else (a reset socket, a decode failure mid-stream) is worth one more try.
  return true;
}

/** One event of a feed, with its renderings cached (computed once, shared by all sockets). */
export class FeedItem {
  readonly event: Event;
  /** The UI projection of the event (by the feed's projector, which saw the whole log). */
  readonly envelopes: readonly ProjectedEnvelope[];
  readonly #cache = new Map<(item: FeedItem) => unknown, unknown>();
  #harn: JsonObject | undefined;

  constructor(event: Event, envelopes: readonly ProjectedEnvelope[]) {
    this.event = event;
    this.envelopes = envelopes;
  }

  /** The event's Harn JSON (computed once). */
  get harn(): JsonObject {
    this.#harn ??= eventToHarn(this.event);
    return this.#harn;
  }

  /**
   * `render(this)`, computed on the first call and cached. `render` must be
   * one module-level function per wire format (its identity is the key).
   */
  rendered<T>(render: (item: FeedItem) => T): T {
    if (this.#cache.has(render)) return this.#cache.get(render) as T;
    const value = render(this);
    this.#cache.set(render, value);
    return value;
  }
}

/** A subscriber of a feed. Both methods are called synchronously by the feed. */
export interface FeedSubscriber extends FailingSubscriber {
  deliver(item: FeedItem): void;
}

/** What {@link EventFeeds.subscribe} returns. */
export interface FeedSubscription {
  /**
   * The id of the last event the feed delivered before this subscription
   * (or the log position it started after); every event of the session after
   * it is delivered, in log order. `""`: from the start of the log.
   */
  readonly anchor: string;
  /** Stop receiving; the feed stops with its last subscriber. */
  leave(): void;
}

class SessionEventFeed implements LiveFeed<FeedSubscriber> {
  readonly subscribers = new Set<FeedSubscriber>();
  readonly abort = new AbortController();
  readonly ready: Promise<void>;
  /** Subscriptions waiting for `ready` (the feed must not stop under them). */
  joining = 0;
  /** The last event id delivered (or the start point). */
  lastId = "";

  constructor(
    clients: ServiceClients,
    readonly session: SessionRef,
    options: () => CallOptions,
    onEnd: () => void,
  ) {
    const signal = this.abort.signal;
    const events = clients.get(EventService);
    const projector = new UiProjector({ sessionId: session.sessionId });
    const follow = async (markReady: () => void) => {
      // The projector needs the whole log to be exact (a gated tool call's id).
      this.lastId = await projectHistory(
        events,
        session,
        this.lastId,
        () => ({ ...options(), signal }),
        (event) => projector.project(event),
      );
      markReady();
      let failingSince: number | undefined;
      for (let delay = firstRetryDelayMs; ; delay = Math.min(delay * 2, maxRetryDelayMs)) {
        try {
          const stream = events.streamEvents(
            { ...session, afterEventId: this.lastId },
            { ...options(), signal },
          );
          for await (const { event } of stream) {
            if (event === undefined || event.id === this.lastId) continue;
            this.lastId = event.id;
            failingSince = undefined;
            delay = firstRetryDelayMs;
            const item = new FeedItem(event, projector.project(event));
            for (const subscriber of this.subscribers) subscriber.deliver(item);
          }
          if (signal.aborted) return;
          // The upstream ended the stream (it is shutting down): follow again.
        } catch (error) {
          if (signal.aborted) return;
          if (!isTransientUpstreamError(error)) throw error;
          failingSince ??= Date.now();
          if (Date.now() - failingSince > retryWindowMs) throw error;
        }
        failingSince ??= Date.now();
        await sleep(delay, signal);
        if (signal.aborted) return;
      }
    };
    this.ready = startFeed(this, follow, "the session's event feed stopped", onEnd);
  }
}

/** The Harn event feeds of one gateway, by session (workspace and id). */
export class EventFeeds {
  readonly #feeds = new RunningFeeds<SessionEventFeed>();

  /** Sessions followed now (for tests and metrics). */
  get feeds(): number {
    return this.#feeds.size;
  }

  /** Subscribers of the feed of `session` (0 when none runs). */
  subscribers(session: SessionRef): number {
    return this.#feeds.get(session)?.subscribers.size ?? 0;
  }

  /**
   * Subscribe to `session`'s feed, opening it with `options` when none
   * runs. Resolves once the feed follows the log, or rejects when it could
   * not start. The caller must have checked that the session is visible.
   */
  async subscribe(
    clients: ServiceClients,
    session: SessionRef,
    options: () => CallOptions,
    subscriber: FeedSubscriber,
  ): Promise<FeedSubscription> {
    const joined = this.#feeds.open(
      session,
      (ended) => new SessionEventFeed(clients, session, options, ended),
    );
    const stopIfUnused = () => {
      if (joined.subscribers.size > 0 || joined.joining > 0) return;
      this.#feeds.stop(session, joined);
    };
    joined.joining++;
    try {
      await joined.ready;
    } finally {
      joined.joining--;
    }
    if (joined.abort.signal.aborted) {
      stopIfUnused();
      throw new Error("the session's event feed stopped");
    }
    // Added and anchored in one synchronous step: every event after `anchor`
    // reaches this subscriber, none before it does.
    joined.subscribers.add(subscriber);
    return {
      anchor: joined.lastId,
      leave: () => {
        if (joined.subscribers.delete(subscriber)) stopIfUnused();
      },
    };
  }
}

/** The event feeds of the gateway whose service clients are `clients`. */
export const eventFeedsOf: (clients: ServiceClients) => EventFeeds = perGateway(
  () => new EventFeeds(),
);
