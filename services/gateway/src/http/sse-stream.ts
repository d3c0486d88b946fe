/**
 * SSE event streams (`GET /v1/sessions/{id}/events/stream`,
 * `GET /v1/tasks/{id}/stream`, `GET /v1/events/stream`).
 *
 * Resume (Harn v1 "Server-sent events"): the cursor is `Last-Event-ID` (what
 * EventSource sends on reconnect) or else the `after_event_id` query
 * parameter; the history after it is sent from range reads, then live events
 * from the session's shared feed (`../feed/`), with no gap and no duplicate.
 * A cursor the log cannot resume from ends the stream with an explicit
 * `event: error` frame carrying the error envelope — never a silent jump.
 *
 * Session and task streams share one upstream subscription per session and
 * one rendering per event (`../feed/event-feeds.ts`); a workspace stream
 * (`/v1/events/stream` without `session_id` / `task_id`) has its own.
 *
 * A client that reads too slowly (more than `defaultMaxQueued` live events
 * waiting, `../feed/follow.ts`) gets an `error` event (`service_unavailable`,
 * `details.metadata.reason = "slow_consumer"`) and the stream ends; it
 * resumes with `Last-Event-ID`. A credential that stops authenticating (a
 * revoked API key, an expired token) is noticed at a heartbeat and ends the
 * stream with an `error` event (`unauthenticated`).
 *
 * A task stream ends after the task's terminal event (`task.completed`,
 * `task.failed`, `task.canceled`); for a task that is already terminal the
 * remaining history is sent from range reads and the stream ends. Session
 * streams stay open until the client leaves or the server shuts down.
 * Heartbeat comments (`: ping`) go out every `TRELLIS_SSE_HEARTBEAT`.
 */

import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EVENT_KIND, TERMINAL_TASK_KINDS } from "@trellis/contracts/event-kinds";
import { EventService, type Task } from "@trellis/contracts/tasks";
import { type HttpResponse, isTrellisError } from "@trellis/runtime";
import { type AuthFailure, authFailureMessage } from "../auth/authenticator.js";
import { harnError, toHarnError } from "../domain/errors.js";
import { eventToHarn, isTerminalStatus } from "../domain/harn-json.js";
import { sseComment, sseFrame } from "../domain/sse.js";
import { credentialChecksOf } from "../feed/credential-checks.js";
import { eventFeedsOf, type FeedItem } from "../feed/event-feeds.js";
import { followSession, stalledGraceMs } from "../feed/follow.js";
import type { RestCall } from "./context.js";

const terminalTaskEvents = new Set<string>(TERMINAL_TASK_KINDS);

/** Whether `event` is the terminal lifecycle event of task `taskId`. */
export function isTerminalTaskEvent(event: Event, taskId: string): boolean {
  if (event.resource?.object === "task" && event.resource.id !== taskId) return false;
  if (event.resource?.object !== "task" && event.taskId !== taskId) return false;
  if (terminalTaskEvents.has(event.kind)) return true;
  const payload = event.payload?.kind;
  return (
    event.kind === EVENT_KIND.taskStatusChanged &&
    payload?.case === "taskStatusChanged" &&
    isTerminalStatus(payload.value.status)
  );
}

/** The resume cursor of a stream request. */
export function resumeCursor(call: RestCall): string {
  const header = call.req.headers["last-event-id"];
  const fromHeader = (Array.isArray(header) ? header[0] : header)?.trim();
  if (fromHeader) return fromHeader;
  return call.query.get("after_event_id")?.trim() ?? "";
}

/**
 * Write one chunk of an SSE response; resolves at once, or once the socket
 * drained (or closed) when it was backed up. Never rejects.
 */
export function writeSse(res: HttpResponse, chunk: string): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  const flushed = (res as { write(chunk: string): boolean }).write(chunk);
  if (flushed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** Answer 200 with the headers of an SSE stream (nothing written yet). */
export function startSse(call: RestCall): void {
  const { res } = call;
  res.statusCode = 200;
  res.setHeader("content-type", "text/event-stream; charset=utf-8");
  res.setHeader("cache-control", "no-cache, no-transform");
  // Tell buffering proxies (nginx) to pass frames through at once.
  res.setHeader("x-accel-buffering", "no");
  if (call.req.httpVersionMajor === 1) res.setHeader("connection", "keep-alive");
}

/**
 * The abort of a streamed answer: it fires when the client leaves or the
 * server shuts down. `stop()` stops watching both and aborts what still runs.
 */
export function streamAbort(call: Pick<RestCall, "res" | "ports">): {
  abort: AbortController;
  stop(): void;
} {
  const abort = new AbortController();
  const onEnd = () => abort.abort();
  call.res.on("close", onEnd);
  call.ports.closing.addEventListener("abort", onEnd);
  return {
    abort,
    stop() {
      call.res.off("close", onEnd);
      call.ports.closing.removeEventListener("abort", onEnd);
      abort.abort();
    },
  };
}

/**
 * Tell a stream's client why the stream ends: a frame `event` carrying the
 * Harn error envelope of `error`. A failure of the server's own (5xx) is
 * also handed to `warn`, to log.
 */
export async function writeSseFailure(
  call: Pick<RestCall, "res" | "requestId">,
  error: unknown,
  event: string,
  warn: () => void,
): Promise<void> {
  const envelope = toHarnError(error, call.requestId);
  if (envelope.status >= 500) warn();
  await writeSse(call.res, sseFrame({ event, data: JSON.stringify(envelope.body) }));
}

/** Options of {@link streamEvents}. */
export interface StreamEventsOptions {
  /** The task being streamed (end after its terminal event). */
  task?: Task;
}

/** What a stream covers; a task stream also names its session (its feed). */
export interface StreamTarget {
  sessionId?: string;
  taskId?: string;
  /** The workspace streamed; with a session or task, theirs (session ids are per workspace). */
  workspaceId?: string;
  /** The session of `taskId`, when known (task streams then share the session's feed). */
  taskSessionId?: string;
}

/** Serve an SSE stream of the events of one session or task. */
export async function streamEvents(
  call: RestCall,
  target: StreamTarget,
  options: StreamEventsOptions = {},
): Promise<void> {
  const { res, ports } = call;
  const { abort, stop } = streamAbort(call);

  startSse(call);
  // The first write sends the headers.
  await writeSse(res, sseComment("stream open"));

  // Each heartbeat also checks the credential again: a revoked key or an
  // expired token ends the stream with an `error` event (unauthenticated).
  const authorization = headerOf(call, "authorization");
  const checks = credentialChecksOf(ports.authenticator, ports.config.TRELLIS_SSE_HEARTBEAT);
  let refused: AuthFailure | undefined;
  const heartbeat = setInterval(() => {
    void writeSse(res, sseComment("ping"));
    void checks.refusal(authorization).then((failure) => {
      if (failure === undefined || abort.signal.aborted) return;
      refused ??= failure;
      abort.abort();
    });
  }, ports.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();

  const cursor = resumeCursor(call);
  const taskId = options.task?.id;
  const sessionId = target.sessionId ?? options.task?.sessionId ?? target.taskSessionId;
  const callOptions = { ...call.options({ streaming: true }), signal: abort.signal };
  let stalled: NodeJS.Timeout | undefined;
  try {
    if (options.task !== undefined && isTerminalStatus(options.task.status)) {
      await replayRest(call, options.task.id, cursor, callOptions, abort.signal);
    } else if (sessionId !== undefined) {
      // A session or task stream: the session's shared feed.
      await followSession({
        feeds: eventFeedsOf(ports.clients),
        clients: ports.clients,
        workspaceId: options.task?.workspaceId ?? target.workspaceId ?? "",
        sessionId,
        ...(target.taskId ? { taskId: target.taskId } : {}),
        cursor,
        callOptions: (streaming) => ({
          ...call.options({ streaming }),
          signal: abort.signal,
        }),
        signal: abort.signal,
        onOverflow: () => {
          stalled ??= setTimeout(() => res.destroy(), stalledGraceMs);
          stalled.unref();
        },
        sink: {
          replay: async (event) => {
            await writeSse(res, frameOf(event));
            return taskId !== undefined && isTerminalTaskEvent(event, taskId);
          },
          replayed: () => undefined,
          live: async (item) => {
            await writeSse(res, item.rendered(sseOfItem));
            return taskId !== undefined && isTerminalTaskEvent(item.event, taskId);
          },
        },
      });
    } else {
      // A workspace's stream: its own upstream subscription.
      const stream = ports.clients.get(EventService).streamEvents(
        {
          sessionId: "",
          taskId: target.taskId ?? "",
          workspaceId: target.workspaceId ?? "",
          afterEventId: cursor,
        },
        callOptions,
      );
      for await (const { event } of stream) {
        if (event === undefined) continue;
        await writeSse(res, frameOf(event));
      }
    }
  } catch (error) {
    if (!abort.signal.aborted) {
      await writeSseFailure(call, error, "error", () => {
        if (isSlowConsumer(error)) return;
        ports.logger.warn("event stream failed", {
          request_id: call.requestId,
          error,
          ...target,
        });
      });
    }
  } finally {
    clearInterval(heartbeat);
    clearTimeout(stalled);
    stop();
    if (refused !== undefined) {
      const envelope = harnError("unauthenticated", authFailureMessage(refused), {
        requestId: call.requestId,
      });
      await writeSse(res, sseFrame({ event: "error", data: JSON.stringify(envelope.body) }));
    }
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}

/** The rest of a terminal task's history, from range reads. */
async function replayRest(
  call: RestCall,
  taskId: string,
  after: string,
  callOptions: CallOptions,
  signal: AbortSignal,
): Promise<void> {
  const events = call.ports.clients.get(EventService);
  let cursor = after;
  for (;;) {
    const page = await events.listEvents({ taskId, afterEventId: cursor, limit: 200 }, callOptions);
    for (const event of page.events) {
      await writeSse(call.res, frameOf(event));
      cursor = event.id;
    }
    if (!page.hasMore || page.events.length === 0 || signal.aborted) return;
  }
}

function headerOf(call: RestCall, name: string): string | undefined {
  const value = call.req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function isSlowConsumer(error: unknown): boolean {
  return isTrellisError(error) && error.metadata.reason === "slow_consumer";
}

/** A feed item's SSE frame (rendered once per event, shared by every stream). */
function sseOfItem(item: FeedItem): string {
  return sseFrame({ id: item.event.id, event: item.event.kind, data: JSON.stringify(item.harn) });
}

/** One event as an SSE frame. */
export function frameOf(event: Event): string {
  return sseFrame({ id: event.id, event: event.kind, data: JSON.stringify(eventToHarn(event)) });
}
