/**
 * One connection's view of its session's shared feed (`./event-feeds.ts`):
 * history after the client's cursor, then live events, with no gap and no
 * duplicate, for a whole session or one task of it.
 *
 * Joining history and live: the connection subscribes first (live events
 * wait in its queue) and learns the feed's anchor `A` — every session event
 * after `A` is in the queue. It then reads the session's history after the
 * cursor (range reads) and sends it, stopping right after `A` if it meets
 * it: everything later is in the queue. If it never meets `A`, then `A` lies
 * at or before the cursor, the queue holds everything after `A`, and the
 * history it sent is a prefix of the queue: the queue is skipped up to and
 * including the last event read (or the cursor) — after checking, with one
 * more range read, that this event does come after `A` (a rare case: the
 * client's cursor is ahead of the feed). Nothing is remembered per event
 * sent, so the connection's memory does not grow with the stream.
 *
 * Slow consumers: live events wait in a bounded per-connection queue while
 * the socket is busy. A client that falls more than `maxQueued` events
 * behind gets a {@link slowConsumerError} (`service_unavailable`, details
 * `metadata.reason = "slow_consumer"`): its stream is ended with that error
 * (or, if it does not read even that within {@link stalledGraceMs}, the
 * connection is dropped), and it resumes with its cursor (`Last-Event-ID`,
 * `?cursor=`). Other connections of the session are never held up by it.
 */
import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { TrellisError } from "@trellis/runtime";
import type { EventFeeds, FeedItem, FeedSubscriber } from "./event-feeds.js";

/** Live events a connection may have waiting before it is cut off (it resumes with its cursor). */
export const defaultMaxQueued = 1_000;

/** How long a connection that overflowed may take to accept its error before it is dropped. */
export const stalledGraceMs = 10_000;

/** The error that ends a connection which reads too slowly. */
export function slowConsumerError(maxQueued: number): TrellisError {
  return new TrellisError({
    reason: "service_unavailable",
    message: `the client reads the stream too slowly (more than ${maxQueued} events waiting); reconnect with its last event id as the cursor to resume`,
    metadata: { reason: "slow_consumer", max_queued: String(maxQueued) },
  });
}

/** Whether `event` is an event of task `taskId` (the tasks service's task filter). */
export function isEventOfTask(event: Event, taskId: string): boolean {
  return event.resource?.object === "task" && event.resource.id === taskId;
}

/** Where a connection's events go. Each call may wait (back-pressure); the next waits for it. */
export interface FollowSink {
  /** A history event (after the cursor, before live). Return true to end the stream after it. */
  replay(event: Event): Promise<boolean | undefined> | boolean | undefined;
  /** History is done; live events follow. */
  replayed(count: number): Promise<void> | void;
  /** A live event. Return true to end the stream after it. */
  live(item: FeedItem): Promise<boolean | undefined> | boolean | undefined;
}

/** Options of {@link followSession}. */
export interface FollowOptions {
  feeds: Pick<EventFeeds, "subscribe">;
  clients: ServiceClients;
  /** The session's workspace (session ids are unique per workspace). */
  workspaceId: string;
  sessionId: string;
  /** Only this task's events (a task-scoped stream). */
  taskId?: string;
  /** The event id to resume after (`""`: from the start). */
  cursor: string;
  /** Call options of the connection's caller (for range reads and to open the feed). */
  callOptions(streaming: boolean): CallOptions;
  /** Ends the follow (the client left, the server is closing). */
  signal: AbortSignal;
  sink: FollowSink;
  maxQueued?: number;
  /**
   * Called once, at once, when the queue overflows. The stream ends with
   * {@link slowConsumerError} as soon as the write in progress completes; a
   * client that stopped reading altogether never completes it, so the
   * transport should drop the connection if it is still open after a grace
   * period ({@link stalledGraceMs}).
   */
  onOverflow?(): void;
  /** History pages read at a time. */
  pageSize?: number;
}

/**
 * Replay the history after the cursor, then follow live until the signal
 * fires or the sink ends it. Rejects with the range read's error (an unknown
 * cursor), the feed's failure, or {@link slowConsumerError}.
 */
export async function followSession(options: FollowOptions): Promise<void> {
  const { signal, sink, taskId } = options;
  const maxQueued = options.maxQueued ?? defaultMaxQueued;
  const matches = (event: Event) => taskId === undefined || isEventOfTask(event, taskId);
  const events = options.clients.get(EventService);
  const session = { workspaceId: options.workspaceId, sessionId: options.sessionId };

  if (taskId !== undefined && options.cursor !== "") {
    // The task filter decides which cursors are valid (as StreamEvents did).
    await events.listEvents(
      { taskId, afterEventId: options.cursor, limit: 1 },
      options.callOptions(false),
    );
  }

  /** Whether event `id` comes after event `anchor` in the session's log. */
  const follows = async (anchor: string, id: string): Promise<boolean> => {
    for (let after = anchor; ; ) {
      const page = await events.listEvents(
        { ...session, afterEventId: after, limit: options.pageSize ?? 200 },
        options.callOptions(false),
      );
      if (page.events.some((event) => event.id === id)) return true;
      const last = page.events.at(-1);
      if (!page.hasMore || last === undefined) return false;
      after = last.id;
    }
  };

  let queue: FeedItem[] = [];
  let head = 0;
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  const subscriber: FeedSubscriber = {
    deliver(item) {
      if (failure) return;
      queue.push(item);
      if (queue.length - head > maxQueued) {
        failure = { error: slowConsumerError(maxQueued) };
        options.onOverflow?.();
        queue = [];
        head = 0;
      }
      notify();
    },
    fail(error) {
      failure ??= { error };
      notify();
    },
  };
  signal.addEventListener("abort", notify);
  const subscription = await options.feeds.subscribe(
    options.clients,
    session,
    () => options.callOptions(true),
    subscriber,
  );
  try {
    // History after the cursor, up to the anchor (see the module comment).
    const anchor = subscription.anchor;
    let metAnchor = anchor !== "" && anchor === options.cursor;
    let lastRead = options.cursor;
    let sent = 0;
    for (let after = options.cursor; !metAnchor; ) {
      const page = await events.listEvents(
        { ...session, afterEventId: after, limit: options.pageSize ?? 200 },
        options.callOptions(false),
      );
      for (const event of page.events) {
        if (signal.aborted) return;
        if (failure) throw failure.error;
        lastRead = event.id;
        if (matches(event)) {
          if (await sink.replay(event)) return;
          sent++;
        }
        if (event.id === anchor) {
          metAnchor = true;
          break;
        }
      }
      const last = page.events.at(-1);
      if (!page.hasMore || last === undefined) break;
      after = last.id;
    }
    // The queue's events up to `lastRead` were sent from history already.
    let skipThrough = metAnchor || lastRead === "" ? undefined : lastRead;
    if (skipThrough !== undefined && anchor !== "" && !(await follows(anchor, skipThrough))) {
      // Cannot happen with a consistent log; never skip what would not come.
      throw new TrellisError({
        reason: "service_unavailable",
        message: "the stream could not join the session's live events; reconnect with the cursor",
        metadata: { reason: "feed_join_failed" },
      });
    }
    await sink.replayed(sent);

    while (!signal.aborted) {
      if (failure) throw failure.error;
      if (head < queue.length) {
        const item = queue[head++] as FeedItem;
        if (head > 1024 && head * 2 > queue.length) {
          queue = queue.slice(head);
          head = 0;
        }
        if (skipThrough !== undefined) {
          if (item.event.id === skipThrough) skipThrough = undefined;
          continue;
        }
        if (!matches(item.event)) continue;
        if (await sink.live(item)) return;
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    signal.removeEventListener("abort", notify);
    subscription.leave();
    queue = [];
  }
}
