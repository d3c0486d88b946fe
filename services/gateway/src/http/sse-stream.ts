/**
 * SSE event streams (`GET /v1/sessions/{id}/events/stream`,
 * `GET /v1/tasks/{id}/stream`, `GET /v1/events/stream`).
 *
 * Resume (Harn v1 "Server-sent events"): the cursor is `Last-Event-ID` (what
 * EventSource sends on reconnect) or else the `after_event_id` query
 * parameter; EventService.StreamEvents replays history after it and continues
 * live with no gap and no duplicate. A cursor the log cannot resume from ends
 * the stream with an explicit `event: error` frame carrying the error
 * envelope — never a silent jump.
 *
 * A task stream ends after the task's terminal event (`task.completed`,
 * `task.failed`, `task.canceled`); for a task that is already terminal the
 * remaining history is sent from range reads and the stream ends. Session
 * streams stay open until the client leaves or the server shuts down.
 * Heartbeat comments (`: ping`) go out every `TRELLIS_SSE_HEARTBEAT`.
 */
import type { Event } from "@trellis/contracts/core";
import { EventService, type Task } from "@trellis/contracts/tasks";
import type { HttpResponse } from "@trellis/runtime";
import { toHarnError } from "../domain/errors.js";
import { eventToHarn, isTerminalStatus } from "../domain/harn-json.js";
import { sseComment, sseFrame } from "../domain/sse.js";
import type { RestCall } from "./context.js";

const terminalTaskEvents = new Set(["task.completed", "task.failed", "task.canceled"]);

/** Whether `event` is the terminal lifecycle event of task `taskId`. */
export function isTerminalTaskEvent(event: Event, taskId: string): boolean {
  if (event.resource?.object === "task" && event.resource.id !== taskId) return false;
  if (event.resource?.object !== "task" && event.taskId !== taskId) return false;
  if (terminalTaskEvents.has(event.kind)) return true;
  const payload = event.payload?.kind;
  return (
    event.kind === "task.status_changed" &&
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

function write(res: HttpResponse, chunk: string): Promise<void> {
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

/** Options of {@link streamEvents}. */
export interface StreamEventsOptions {
  /** The task being streamed (end after its terminal event). */
  task?: Task;
}

/** Serve an SSE stream of the events of one session or task. */
export async function streamEvents(
  call: RestCall,
  target: { sessionId?: string; taskId?: string; workspaceId?: string },
  options: StreamEventsOptions = {},
): Promise<void> {
  const { res, deps } = call;
  const abort = new AbortController();
  const onClose = () => abort.abort();
  res.on("close", onClose);
  const onShutdown = () => abort.abort();
  deps.closing.addEventListener("abort", onShutdown);

  res.statusCode = 200;
  res.setHeader("content-type", "text/event-stream; charset=utf-8");
  res.setHeader("cache-control", "no-cache, no-transform");
  // Tell buffering proxies (nginx) to pass frames through at once.
  res.setHeader("x-accel-buffering", "no");
  if (call.req.httpVersionMajor === 1) res.setHeader("connection", "keep-alive");
  // The first write sends the headers.
  await write(res, sseComment("stream open"));

  const heartbeat = setInterval(() => {
    void write(res, sseComment("ping"));
  }, deps.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();

  let cursor = resumeCursor(call);
  const taskId = options.task?.id;
  const events = deps.clients.get(EventService);
  const callOptions = { ...call.options({ streaming: true }), signal: abort.signal };
  try {
    if (options.task !== undefined && isTerminalStatus(options.task.status)) {
      // Nothing new will happen: send what is left of the history, then end.
      for (;;) {
        const page = await events.listEvents(
          { taskId: options.task.id, afterEventId: cursor, limit: 200 },
          callOptions,
        );
        for (const event of page.events) {
          await write(res, frameOf(event));
          cursor = event.id;
        }
        if (!page.hasMore || page.events.length === 0 || abort.signal.aborted) break;
      }
      return;
    }
    const stream = events.streamEvents(
      {
        sessionId: target.sessionId ?? "",
        taskId: target.taskId ?? "",
        workspaceId: target.workspaceId ?? "",
        afterEventId: cursor,
      },
      callOptions,
    );
    for await (const { event } of stream) {
      if (event === undefined) continue;
      await write(res, frameOf(event));
      if (taskId !== undefined && isTerminalTaskEvent(event, taskId)) break;
    }
  } catch (error) {
    if (!abort.signal.aborted) {
      const envelope = toHarnError(error, call.requestId);
      if (envelope.status >= 500) {
        deps.logger.warn("event stream failed", {
          request_id: call.requestId,
          error,
          ...target,
        });
      }
      await write(res, sseFrame({ event: "error", data: JSON.stringify(envelope.body) }));
    }
  } finally {
    clearInterval(heartbeat);
    res.off("close", onClose);
    deps.closing.removeEventListener("abort", onShutdown);
    abort.abort();
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}

/** One event as an SSE frame. */
export function frameOf(event: Event): string {
  return sseFrame({ id: event.id, event: event.kind, data: JSON.stringify(eventToHarn(event)) });
}
