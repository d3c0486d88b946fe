/** Event range reads (deterministic: same request, same bytes), stream targets and their routes. */
import { EventService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { eventToHarn, listJson } from "../../domain/harn-json.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { type StreamEventsOptions, type StreamTarget, streamEvents } from "../sse-stream.js";
import {
  ok,
  param,
  queryString,
  queryWorkspace,
  visible,
  visibleSession,
  visibleTask,
} from "./common.js";
import { limitOf } from "./paging.js";

/** Which events a read covers: one session, one task, or a whole workspace. */
export interface EventTarget {
  sessionId?: string;
  taskId?: string;
  /** The workspace read; with a session or task, theirs. */
  workspaceId?: string;
  /** The session of `taskId` (streams follow the session's shared feed). */
  taskSessionId?: string;
}

export async function listEvents(call: RestCall, target: EventTarget): Promise<RestResponse> {
  const limit = limitOf(call, 50);
  const afterEventId = queryString(call, "after_event_id") ?? queryString(call, "cursor") ?? "";
  const response = await call.ports.clients.get(EventService).listEvents(
    {
      sessionId: target.sessionId ?? "",
      taskId: target.taskId ?? "",
      workspaceId: target.workspaceId ?? "",
      afterEventId,
      limit,
    },
    call.options(),
  );
  const last = response.events.at(-1);
  return ok(
    listJson(response.events.map(eventToHarn), {
      nextCursor: response.hasMore ? last?.id : undefined,
      hasMore: response.hasMore,
    }),
  );
}

/** The target of the global event endpoints: `session_id`, `task_id` or the workspace. */
export async function eventTargetOf(call: RestCall): Promise<EventTarget> {
  const sessionId = queryString(call, "session_id");
  const taskId = queryString(call, "task_id");
  if (sessionId !== undefined && taskId !== undefined) {
    throw errors.invalid("give session_id or task_id, not both", "task_id");
  }
  if (sessionId !== undefined) {
    const session = await visibleSession(call, sessionId);
    return { sessionId, workspaceId: session.workspaceId };
  }
  if (taskId !== undefined) {
    const task = await visibleTask(call, taskId);
    return { taskId, taskSessionId: task.sessionId, workspaceId: task.workspaceId };
  }
  return { workspaceId: queryWorkspace(call) };
}

export async function getEvent(call: RestCall): Promise<RestResponse> {
  const id = param(call, "event_id");
  const { event } = await call.ports.clients
    .get(EventService)
    .getEvent({ eventId: id }, call.options());
  return ok(eventToHarn(visible(call, event, "event", id)));
}

/** The events one pair of reads covers: the range read's target, the stream's, and its options. */
export interface EventScope {
  list: EventTarget;
  stream: StreamTarget;
  options?: StreamEventsOptions;
}

/**
 * The two reads of a scope's events (`events:read`): a page of them at
 * `listPath` and their live SSE stream at `streamPath`, both of the scope
 * `scopeOf` resolves (404 for what the caller may not see).
 */
export function eventReadRoutes(
  listPath: string,
  streamPath: string,
  scopeOf: (call: RestCall) => Promise<EventScope>,
): RouteSpec[] {
  return [
    {
      method: "GET",
      path: listPath,
      scope: "events:read",
      handle: async (call) => listEvents(call, (await scopeOf(call)).list),
    },
    {
      method: "GET",
      path: streamPath,
      scope: "events:read",
      stream: true,
      handle: async (call) => {
        const scope = await scopeOf(call);
        await streamEvents(call, scope.stream, scope.options);
        return undefined;
      },
    },
  ];
}

/** The events of the session a path names. */
export async function sessionEvents(call: RestCall): Promise<EventScope> {
  const session = await visibleSession(call, param(call, "session_id"));
  const target = { sessionId: session.id, workspaceId: session.workspaceId };
  return { list: target, stream: target };
}

/** The events of the task a path names (its stream ends with the task). */
export async function taskEvents(call: RestCall): Promise<EventScope> {
  const task = await visibleTask(call, param(call, "task_id"));
  return {
    list: { taskId: task.id, workspaceId: task.workspaceId },
    stream: { taskId: task.id },
    options: { task },
  };
}

/** The events the query names ({@link eventTargetOf}). */
export async function queriedEvents(call: RestCall): Promise<EventScope> {
  const target = await eventTargetOf(call);
  return { list: target, stream: target };
}
