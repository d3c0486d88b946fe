/** Event range reads (deterministic: same request, same bytes) and stream targets. */
import { EventService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { eventToHarn, listJson } from "../../domain/harn-json.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
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
