/**
 * Subscribe: the subscribed listener of harness-chat §8.2.
 *
 * Driven by the session's event stream (trellis.tasks.v1.EventService/
 * StreamEvents), not by anything this replica remembers: the stream gives
 * the session's history after a cursor, then live, with no gap and no
 * duplicate, whichever replica serves it. Each task's events feed a
 * {@link ResumeTracker}; when a resumed turn settles, its outcome goes out
 * with that event's id as the cursor. So:
 *
 * - exactly once per stream: the settling event appears once in the stream;
 * - never for the suspending turn: a task is reported only after it left a
 *   suspension;
 * - across a reconnect (to any chat replica): pass the last cursor back as
 *   `after_cursor`; everything after it is reported, nothing before it again.
 *   A task already under way at the cursor is caught up from its own events
 *   (ListEvents by task) before its live events are read.
 *
 * The tasks service appends a suspending turn's pending messages to the
 * transcript and to `Task.output` when it suspends (harness-chat §8.1) and
 * keeps them on `Task.suspension` while the task waits. The listener reports
 * the post-resume messages only (the pending ones were Send's
 * `pending_messages`): the task's output without them, identified by the ids
 * read while the task still holds its suspension (right after the suspension
 * event, or after catching a task up), else as the messages made no later
 * than the suspension.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { createLinkedAbortController } from "@connectrpc/connect/protocol";
import type { SubscribeRequest, SubscribeResponseSchema } from "@trellis/contracts/chat";
import { type Event, type Message, TaskStatus } from "@trellis/contracts/core";
import { errors, sleep } from "@trellis/runtime";
import type { ChatConfig } from "../config.js";
import { isSuspended, outcomeFromTask } from "../domain/outcome.js";
import { settledStatusOf } from "../domain/progress.js";
import {
  beginsTask,
  newlyPending,
  type PendingKnowledge,
  postResumeMessages,
  ResumeTracker,
  taskIdOf,
} from "../domain/resume-tracker.js";
import { turnTail } from "../domain/tail.js";
import { onBehalfOf, type TasksPort } from "./tasks-port.js";
import { loadHistory } from "./turn.js";

/** Dependencies of the listener. */
export interface SubscribeDeps {
  port: TasksPort;
  config: ChatConfig;
  /**
   * Fires when the host starts shutting down: open streams end cleanly then
   * (the client resumes from its last cursor on another replica) instead of
   * holding the drain for the whole grace period.
   */
  closing?: AbortSignal;
}

const PAGE = 1000;

/** Feed a task's events that precede `stopAt` (exclusive) to its tracker. */
async function catchUp(
  port: TasksPort,
  tracker: ResumeTracker,
  stopAt: string,
  options: CallOptions,
): Promise<void> {
  let after = "";
  for (;;) {
    const page = await port.events.listEvents(
      { taskId: tracker.taskId, afterEventId: after, limit: PAGE },
      options,
    );
    for (const event of page.events) {
      if (event.id === stopAt) return;
      tracker.observe(event);
    }
    const last = page.events.at(-1);
    if (!page.hasMore || !last) return;
    after = last.id;
  }
}

/** The ids of the pending messages of the task's current suspension, if it has one. */
async function pendingIdsOf(
  port: TasksPort,
  taskId: string,
  options: CallOptions,
): Promise<ReadonlySet<string> | undefined> {
  const { task } = await port.tasks.getTask({ taskId }, options);
  if (!task?.suspension) return undefined;
  return new Set(task.suspension.pendingMessages.map((m) => m.id).filter((id) => id !== ""));
}

const isNotFound = (error: unknown) => ConnectError.from(error).code === Code.NotFound;

/**
 * The session's events after `start`, live. A session that does not exist
 * yet (a listener opened before the first Send) is waited for: its events all
 * come after the subscription, so reading from its beginning misses nothing.
 */
async function* sessionEvents(
  port: TasksPort,
  sessionId: string,
  afterEventId: string,
  options: CallOptions,
  signal: AbortSignal,
): AsyncGenerator<Event> {
  let wait = 50;
  for (;;) {
    let opened = false;
    try {
      for await (const { event } of port.events.streamEvents(
        { sessionId, afterEventId },
        options,
      )) {
        opened = true;
        if (event) yield event;
      }
      return;
    } catch (error) {
      // Only "no such session (yet)" when reading from its beginning is waited out.
      if (opened || afterEventId !== "" || !isNotFound(error) || signal.aborted) throw error;
    }
    await sleep(wait, signal);
    if (signal.aborted) return;
    wait = Math.min(wait * 2, 1000);
  }
}

/**
 * The cursor before a session's first event: what `subscribed` says when the
 * session has no events yet (or does not exist yet). Event ids never take
 * this form.
 */
export const ORIGIN_CURSOR = "origin";

/** Where a stream starts, and its events from there on. */
interface Start {
  cursor: string;
  events: AsyncIterable<Event>;
}

/**
 * Open the session's events: after a cursor, from its beginning (`origin`), or
 * from now (StreamEvents `from_now`, whose first response says where it
 * starts). A session that does not exist yet is read from its beginning once
 * it appears.
 */
async function open(
  port: TasksPort,
  sessionId: string,
  afterCursor: string,
  options: CallOptions,
  signal: AbortSignal,
): Promise<Start> {
  const from = (afterEventId: string, cursor: string): Start => ({
    cursor,
    events: sessionEvents(port, sessionId, afterEventId, options, signal),
  });
  if (afterCursor === ORIGIN_CURSOR) return from("", ORIGIN_CURSOR);
  if (afterCursor !== "") return from(afterCursor, afterCursor);
  // The host's closing (and the call's end) must end this stream too.
  const stream = port.events.streamEvents({ sessionId, fromNow: true }, { ...options, signal });
  const iterator = stream[Symbol.asyncIterator]();
  let first: IteratorResult<{ event?: Event | undefined; startAfterEventId: string }>;
  try {
    first = await iterator.next();
  } catch (error) {
    if (!isNotFound(error)) throw error;
    return from("", ORIGIN_CURSOR);
  }
  const startAfter = first.done ? "" : first.value.startAfterEventId;
  async function* rest(): AsyncGenerator<Event> {
    try {
      for (;;) {
        let next: IteratorResult<{ event?: Event | undefined }>;
        try {
          next = await iterator.next();
        } catch (error) {
          // Ended by the host closing or the call ending: the stream is over.
          if (signal.aborted) return;
          throw error;
        }
        if (next.done) return;
        if (next.value.event) yield next.value.event;
      }
    } finally {
      await iterator.return?.();
    }
  }
  return { cursor: startAfter === "" ? ORIGIN_CURSOR : startAfter, events: rest() };
}

/** Why a Subscribe stream's link to the host's closing signal ends: the stream is over. */
const STREAM_ENDED = new Error("the subscribe stream ended");

/** Serve one Subscribe stream. */
export async function* subscribe(
  deps: SubscribeDeps,
  request: SubscribeRequest,
  context: HandlerContext,
): AsyncGenerator<MessageInitShape<typeof SubscribeResponseSchema>> {
  const sessionId = request.sessionId;
  if (sessionId.trim() === "") throw errors.invalid("session_id must not be empty", "session_id");
  // Not AbortSignal.any: on Node 20 that leaves an entry in the long-lived
  // `closing` per call for good. A linked controller's listeners go when it
  // aborts — when the call's signal does (Connect aborts it however the call
  // ends, even with this stream left suspended at a yield for good), when
  // the host closes, or when the stream ends here.
  const linked = createLinkedAbortController(context.signal, deps.closing);
  try {
    yield* listen(deps, sessionId, request, context, linked.signal);
  } finally {
    linked.abort(STREAM_ENDED);
  }
}

/** The stream of {@link subscribe}, ended by `signal` when the host closes. */
async function* listen(
  deps: SubscribeDeps,
  sessionId: string,
  request: Pick<SubscribeRequest, "afterCursor" | "includeFinalState">,
  context: HandlerContext,
  signal: AbortSignal,
): AsyncGenerator<MessageInitShape<typeof SubscribeResponseSchema>> {
  const options = onBehalfOf(context);
  // A missing session, or another workspace's (the tasks service scopes the
  // read to the caller's), is NotFound — not "subscribed" and a stream that
  // polls for a session that will never appear.
  await deps.port.sessions.getSession({ sessionId }, options);
  const start = await open(deps.port, sessionId, request.afterCursor, options, signal);
  // Registered: any signal delivered from here on is seen by the stream below.
  yield { kind: { case: "subscribed", value: { sessionId } }, cursor: start.cursor };

  const trackers = new Map<string, ResumeTracker>();
  // Pending messages of each task's current suspension, read while the task
  // holds them: its output will begin with them, before what the resumed run adds.
  const pending = new Map<string, PendingKnowledge>();
  const learnPending = async (taskId: string) => {
    const known = await pendingIdsOf(deps.port, taskId, options);
    if (known) pending.set(taskId, { ids: known });
  };

  for await (const event of start.events) {
    const taskId = taskIdOf(event);
    if (!taskId) continue;
    let tracker = trackers.get(taskId);
    if (!tracker) {
      tracker = new ResumeTracker(taskId);
      if (!beginsTask(event)) {
        await catchUp(deps.port, tracker, event.id, options);
        if (tracker.inSuspensionCycle) await learnPending(taskId);
      }
      trackers.set(taskId, tracker);
    }
    const settled = tracker.observe(event);
    if (!settled) {
      // A fresh suspension: learn its pending messages while the task holds them.
      if (settledStatusOf(event) !== undefined && tracker.inSuspensionCycle) {
        await learnPending(taskId);
      }
      continue;
    }
    if (tracker.finished) trackers.delete(taskId);
    const known: PendingKnowledge = pending.get(taskId) ?? {
      suspendedAtMs: settled.suspendedAtMs,
    };
    const { task } = await deps.port.tasks.getTask({ taskId }, options);
    if (!task) continue;
    // The status is the one this event settled in; the task may have moved on since.
    const asSettled = { ...task, status: settled.status };
    let tail: Message[];
    if (isSuspended(settled.status)) {
      // Suspended again after the resume: only its own new pending messages.
      tail = newlyPending(task.suspension?.pendingMessages ?? [], known);
      await learnPending(taskId);
    } else {
      tail = postResumeMessages(turnTail(asSettled), known);
      pending.delete(taskId);
    }
    const finalState =
      request.includeFinalState && settled.status === TaskStatus.COMPLETED
        ? await loadHistory(deps.port, sessionId, options)
        : undefined;
    const outcome = outcomeFromTask(asSettled, {
      templates: deps.config.replies,
      tail,
      ...(finalState ? { finalState } : {}),
    });
    yield { kind: { case: "outcome", value: outcome }, cursor: settled.eventId };
  }
}
