/** EventService: reads of the event log, scoped to a session, a task or a workspace. */
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EventService } from "@trellis/contracts/tasks";
import type { Cursor, EventFilter } from "@trellis/eventlog";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { invalidRequest, notFound } from "../domain/errors.js";
import { type HandlerDeps, scopeOf, workspaceOfRequest } from "./common.js";

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

export function createEventHandlers(deps: HandlerDeps): ServiceImpl<typeof EventService> {
  const { store, eventLog } = deps;

  /** The log filter of a request: one task, one session, or the whole workspace. */
  async function filterOf(
    request: { sessionId: string; taskId: string; workspaceId: string },
    context: HandlerContext,
  ): Promise<EventFilter> {
    const scope = scopeOf(context);
    if (request.sessionId && request.taskId) {
      throw invalidRequest("give session_id or task_id, not both", "task_id");
    }
    if (request.taskId) {
      const task = await store.getTask(request.taskId, scope);
      return {
        workspaceId: task.workspaceId,
        sessionId: task.sessionId,
        resource: { object: "task", id: task.id },
      };
    }
    if (request.sessionId) {
      if (scope !== undefined && request.workspaceId && request.workspaceId !== scope) {
        throw notFound("session", request.sessionId);
      }
      // Session ids are unique per workspace: a caller bound to none may name it.
      const session = await store.getSession(
        request.sessionId,
        scope ?? (request.workspaceId || undefined),
      );
      return { workspaceId: session.workspaceId, sessionId: session.id };
    }
    if (scope !== undefined && request.workspaceId && request.workspaceId !== scope) {
      throw notFound("workspace", request.workspaceId);
    }
    return {
      workspaceId:
        scope ?? (workspaceOfRequest(context, request.workspaceId) || DEFAULT_WORKSPACE_ID),
    };
  }

  const cursorOf = (afterEventId: string): { after?: Cursor } =>
    afterEventId ? { after: { afterEventId } } : {};

  return {
    async listEvents(request, context) {
      if (request.limit < 0 || request.limit > MAX_LIMIT) {
        throw invalidRequest(`limit must be 0…${MAX_LIMIT}`, "limit");
      }
      const limit = request.limit || DEFAULT_LIMIT;
      const found = await eventLog.read({
        filter: await filterOf(request, context),
        ...cursorOf(request.afterEventId),
        limit: limit + 1,
      });
      return {
        events: found.slice(0, limit).map((e) => e.event),
        hasMore: found.length > limit,
      };
    },
    async *streamEvents(request, context) {
      const filter = await filterOf(request, context);
      let after: { after?: Cursor } = cursorOf(request.afterEventId);
      if (request.fromNow) {
        if (request.afterEventId) {
          throw invalidRequest("give after_event_id or from_now, not both", "from_now");
        }
        // From the log's current end: after the filter's latest event, by position.
        const last = await eventLog.last(filter);
        after = last ? { after: { afterPosition: last.position } } : {};
        yield { startAfterEventId: last?.event.id ?? "" };
      }
      // History after the cursor, then live: the log's subscribe has no gap or duplicate.
      for await (const logged of eventLog.subscribe({
        filter,
        ...after,
        signal: context.signal,
      })) {
        yield { event: logged.event };
      }
    },
    async getEvent(request, context) {
      const event = await store.findEvent(request.eventId, scopeOf(context));
      if (!event) throw notFound("event", request.eventId);
      return { event };
    },
  };
}
