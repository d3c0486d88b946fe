/**
 * The UI event stream of a session over SSE
 * (`GET /v1/ui/sessions/{session_id}/events/stream`).
 *
 * Each frame is one envelope of the frontend contract: `id` is its cursor
 * (`<event id>:<index>`, see `./projection/cursor.ts`), `event` its type and
 * `data` the envelope `{type, payload}` on one line. The first frame is the
 * `session` bootstrap envelope, which has no id (it is not in the log).
 *
 * The projection needs the session's whole history to be exact (a tool
 * result's elapsed time needs its call), so every connection projects the log
 * from the session's first event and sends what lies after the cursor: the
 * cursor is `Last-Event-ID` (what an EventSource sends on reconnect) or else
 * `?cursor=`. Then it follows the log live from the last event it read
 * (`StreamEvents` with `after_event_id`), so nothing is lost or sent twice.
 *
 * Query: `tier` (`default` | `debug`, default `default`), `cursor`, and
 * `until` (an event id of the session: send the history up to and including
 * that event's envelopes, then end — how a client renders the history a
 * branch inherited from its parent). A cursor or `until` that names no event
 * of the session is refused with 400 before the stream starts; a failure
 * after it started ends it with a `stream_error` frame carrying the error
 * envelope (not `error`, which is the contract's own envelope type).
 */
import type { Client } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService, type Session } from "@trellis/contracts/tasks";
import { changedOrAborted } from "@trellis/eventlog";
import { errors, TrellisError } from "@trellis/runtime";
import { toHarnError } from "../domain/errors.js";
import { sseComment, sseFrame } from "../domain/sse.js";
import type { RestCall } from "../http/context.js";
import { queryString, visibleSession } from "../http/routes/common.js";
import { startSse, writeSse } from "../http/sse-stream.js";
import { type FeedItem, fanoutOf } from "./fanout.js";
import {
  bootstrapFrame,
  framesOf,
  projectorFor,
  resumedFrames,
  sessionHistory,
  sseOfFrame,
  type UiFrame,
} from "./frames.js";
import { parseCursor, UI_TIERS, type UiCursor, type UiTier } from "./projection/index.js";

export { bootstrapFrame, framesOf, projectorFor, sseOfFrame, type UiFrame };

// Live events a connection may have waiting before it is cut off (it resumes with its cursor).
const MAX_BUFFERED_EVENTS = 10_000;

function tierOf(call: RestCall): UiTier {
  const raw = queryString(call, "tier") ?? "default";
  if (!(UI_TIERS as readonly string[]).includes(raw)) {
    throw errors.invalid(`tier must be default or debug, got ${JSON.stringify(raw)}`, "tier");
  }
  return raw as UiTier;
}

function cursorOf(call: RestCall): { text: string; cursor?: UiCursor } {
  const header = call.req.headers["last-event-id"];
  const text =
    (Array.isArray(header) ? header[0] : header)?.trim() || queryString(call, "cursor") || "";
  if (text === "") return { text };
  const cursor = parseCursor(text);
  if (!cursor) {
    throw errors.invalid(
      "the cursor must be an id of this stream (`<event id>:<index>`) or an event id",
      "cursor",
    );
  }
  return { text, cursor };
}

/** Serve the UI event stream of session `sessionId`. */
export async function streamUiEvents(call: RestCall, sessionId: string): Promise<void> {
  const { ports } = call;
  const tier = tierOf(call);
  const { text: cursorText, cursor } = cursorOf(call);
  const until = queryString(call, "until");
  const session = await visibleSession(call, sessionId);
  const events = ports.clients.get(EventService);

  // Live events come from the session's shared feed (./fanout.ts): joined
  // before the history is read, so every event is in one or the other.
  const live: FeedItem[] = [];
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  // Set while the connection is idle and live: the feed writes to it at once
  // (no wake-up and await per connection and event); false means "queue it".
  let direct: ((item: FeedItem) => boolean) | undefined;
  const listener = {
    item(item: FeedItem) {
      if (live.length === 0 && direct?.(item)) return;
      live.push(item);
      // A client this far behind reconnects with its cursor instead.
      if (live.length > MAX_BUFFERED_EVENTS) {
        failure ??= {
          error: new TrellisError({
            reason: "service_unavailable",
            message: "the client reads the stream too slowly; reconnect with Last-Event-ID",
          }),
        };
      }
      wake?.();
    },
    fail(error: unknown) {
      failure ??= { error };
      wake?.();
    },
  };
  // A finite replay (`until`) never goes live: no feed.
  const leave =
    until === undefined
      ? await fanoutOf(ports.clients).subscribe(
          ports.clients,
          session,
          () => call.options({ streaming: true }),
          listener,
        )
      : () => undefined;
  try {
    await serveStream(call, session, events, tier, cursorText, cursor, until, {
      live,
      failure: () => failure,
      next: () =>
        new Promise<void>((resolve) => {
          wake = resolve;
        }),
      direct: (write) => {
        direct = write;
      },
    });
  } finally {
    leave();
  }
}

interface LiveQueue {
  live: FeedItem[];
  failure(): { error: unknown } | undefined;
  /** Resolves when the feed delivers something (or fails). */
  next(): Promise<void>;
  /**
   * While set, the feed hands items to `write` instead of queueing them
   * (when nothing is queued); `write` returns false to have one queued.
   */
  direct(write: ((item: FeedItem) => boolean) | undefined): void;
}

async function serveStream(
  call: RestCall,
  session: Session,
  events: Client<typeof EventService>,
  tier: UiTier,
  cursorText: string,
  cursor: UiCursor | undefined,
  until: string | undefined,
  queue: LiveQueue,
): Promise<void> {
  const { res, ports } = call;
  // The history, read before anything is written so a bad cursor is a plain 400.
  const { history, ids } = await sessionHistory(events, session, call.options(), {
    cursorText,
    cursor,
    until,
    untilField: "until",
  });

  const abort = new AbortController();
  const onClose = () => abort.abort();
  res.on("close", onClose);
  ports.closing.addEventListener("abort", onClose);
  startSse(call);
  await writeSse(res, sseComment("stream open"));
  const heartbeat = setInterval(() => {
    void writeSse(res, sseComment("ping"));
  }, ports.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();

  const resumed = resumedFrames(projectorFor(session), tier, cursor);
  const sendEvent = async (event: Event) => {
    for (const frame of resumed(event)) await writeSse(res, sseOfFrame(frame));
  };

  try {
    await writeSse(res, sseOfFrame(bootstrapFrame(session, tier, cursorText)));
    for (const event of history) {
      if (abort.signal.aborted) return;
      await sendEvent(event);
      if (event.id === until) return;
    }
    // Then what the feed delivered meanwhile and delivers from now on. The
    // feed is in log order and the history a prefix of the log, so the live
    // items already sent as history come first: once one is new, all are,
    // and the history's ids can go (memory stays flat on a long stream).
    let overlap: Set<string> | undefined = ids;
    // With nothing queued and the socket not backed up, an item is written
    // synchronously by the feed itself; otherwise it is queued for this loop.
    let backedUp = false;
    const drained = () => {
      backedUp = false;
    };
    res.on("drain", drained);
    const writeNow = (item: FeedItem): boolean => {
      if (res.destroyed || res.writableEnded) return true;
      if (backedUp) return false;
      if (overlap?.has(item.eventId)) return true;
      overlap = undefined;
      const text = item.sse[tier];
      if (text !== "" && !(res as { write(chunk: string): boolean }).write(text)) backedUp = true;
      return true;
    };
    try {
      while (!abort.signal.aborted) {
        const item = queue.live.shift();
        if (item) {
          if (overlap?.has(item.eventId)) continue;
          overlap = undefined;
          if (item.sse[tier] !== "") await writeSse(res, item.sse[tier]);
          continue;
        }
        const failed = queue.failure();
        if (failed) throw failed.error;
        queue.direct(writeNow);
        await changedOrAborted(queue.next(), abort.signal);
        queue.direct(undefined);
      }
    } finally {
      queue.direct(undefined);
      res.off("drain", drained);
    }
  } catch (error) {
    if (!abort.signal.aborted) {
      const envelope = toHarnError(error, call.requestId);
      if (envelope.status >= 500) {
        ports.logger.warn("UI event stream failed", {
          request_id: call.requestId,
          session_id: session.id,
          error,
        });
      }
      // Not `error`: that is the contract's own envelope type.
      await writeSse(res, sseFrame({ event: "stream_error", data: JSON.stringify(envelope.body) }));
    }
  } finally {
    clearInterval(heartbeat);
    res.off("close", onClose);
    ports.closing.removeEventListener("abort", onClose);
    abort.abort();
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}
