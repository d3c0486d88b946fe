/**
 * Builders of the events the tasks service emits (Harn event names, typed
 * payloads). Pure: the store appends them to the outbox in the transaction of
 * the state change they describe; the outbox assigns sequence and ids.
 *
 * Resources: task lifecycle, signal and task-produced message events are
 * about the task (`{object: "task"}`), so a task's own stream tells its whole
 * story; session lifecycle events and messages no task produced are about the
 * session. Every event carries workspace and session ids, so a session's
 * stream holds both.
 */
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type Actor,
  ActorKind,
  ActorSchema,
  type ErrorDetail,
  type Event,
  EventPayloadSchema,
  EventSchema,
  type Message,
  Role,
  type SessionState,
  TaskStatus,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { taskEventKind } from "./lifecycle.js";
import { publicView } from "./transcript.js";

/** Who did it and where: the common fields of a batch of events. */
export interface EventScope {
  workspaceId: string;
  sessionId: string;
  actor: Actor;
  idempotencyKey?: string;
}

/** The actor of internal work (recovery, the mailbox). */
export const SYSTEM_ACTOR: Actor = create(ActorSchema, {
  id: "system",
  kind: ActorKind.SYSTEM,
  displayName: "trellis tasks",
});

/** The actor of an agent's own output. */
export function agentActor(agentId: string): Actor {
  return create(ActorSchema, { id: agentId, kind: ActorKind.AGENT });
}

/** The actor of an authenticated caller. */
export function userActor(actorId: string): Actor {
  return create(ActorSchema, { id: actorId, kind: ActorKind.USER });
}

function base(
  scope: EventScope,
  kind: string,
  resource: { object: string; id: string },
  taskId: string,
): Event {
  return create(EventSchema, {
    kind,
    resource,
    workspaceId: scope.workspaceId,
    sessionId: scope.sessionId,
    taskId,
    actor: scope.actor,
    idempotencyKey: scope.idempotencyKey ?? "",
  });
}

/** `task.<state>`: the task entered `to` (every lifecycle transition emits one). */
export function taskStatusEvent(
  scope: EventScope,
  taskId: string,
  to: TaskStatus,
  from: TaskStatus,
  reason: string,
  failure?: ErrorDetail,
  agentId = "",
): Event {
  const event = base(scope, taskEventKind(to), { object: "task", id: taskId }, taskId);
  event.payload = create(EventPayloadSchema, {
    kind: {
      case: "taskStatusChanged",
      value: { status: to, previousStatus: from, reason, agentId, ...(failure ? { failure } : {}) },
    },
  });
  return event;
}

/** `task.submitted`: a new task, naming the agent that will run it. */
export function taskSubmittedEvent(scope: EventScope, taskId: string, agentId: string): Event {
  return taskStatusEvent(
    scope,
    taskId,
    TaskStatus.SUBMITTED,
    TaskStatus.UNSPECIFIED,
    "submitted",
    undefined,
    agentId,
  );
}

/**
 * `task.status_changed`: a change that is not a lifecycle transition (a
 * WORKING task re-queued after its worker was lost).
 */
export function taskNoteEvent(
  scope: EventScope,
  taskId: string,
  status: TaskStatus,
  reason: string,
): Event {
  const event = base(scope, EVENT_KIND.taskStatusChanged, { object: "task", id: taskId }, taskId);
  event.payload = create(EventPayloadSchema, {
    kind: { case: "taskStatusChanged", value: { status, previousStatus: status, reason } },
  });
  return event;
}

/** The event kind of a message appended to a transcript. */
export function messageEventKind(message: Message, fromTask: boolean): string {
  switch (message.role) {
    case Role.USER:
      return EVENT_KIND.userMessage;
    case Role.ASSISTANT:
    case Role.AGENT:
      return EVENT_KIND.agentMessage;
    case Role.TOOL:
      return fromTask ? EVENT_KIND.toolResult : EVENT_KIND.messageAppended;
    default:
      return EVENT_KIND.messageAppended;
  }
}

/**
 * `user.message` / `agent.message` / `agent.tool_result` /
 * `session.message_appended`: a message was appended at `position`. The
 * payload shows only the message's public parts.
 */
export function messageEvent(
  scope: EventScope,
  message: Message,
  position: bigint,
  taskId: string,
): Event {
  const fromTask = taskId !== "";
  const resource = fromTask
    ? { object: "task", id: taskId }
    : { object: "session", id: scope.sessionId };
  const event = base(scope, messageEventKind(message, fromTask), resource, taskId);
  event.payload = create(EventPayloadSchema, {
    kind: { case: "messageAppended", value: { message: publicView(message), position } },
  });
  return event;
}

/** `session.created` / `session.closed` / `session.truncated` / `session.thread_forked`. */
export function sessionEvent(
  scope: EventScope,
  kind: string,
  state: SessionState,
  previous: SessionState,
  reason: string,
): Event {
  const event = base(scope, kind, { object: "session", id: scope.sessionId }, "");
  event.payload = create(EventPayloadSchema, {
    kind: { case: "sessionStateChanged", value: { state, previousState: previous, reason } },
  });
  return event;
}

/** `user.input_submitted` / `user.tool_confirmation` / `user.cancel_requested`. */
export function signalEvent(
  scope: EventScope,
  kind: string,
  taskId: string,
  signalId: string,
  payload: JsonValue,
): Event {
  const event = base(scope, kind, { object: "task", id: taskId }, taskId);
  event.payload = create(EventPayloadSchema, {
    kind: { case: "signalDelivered", value: { signalId, payload: fromJson(ValueSchema, payload) } },
  });
  return event;
}

/** A vendor-shaped event with a free-form payload (e.g. `artifact.created`). */
export function dataEvent(
  scope: EventScope,
  kind: string,
  resource: { object: string; id: string },
  taskId: string,
  data: { [key: string]: JsonValue },
): Event {
  const event = base(scope, kind, resource, taskId);
  event.payload = create(EventPayloadSchema, { kind: { case: "data", value: data } });
  return event;
}
