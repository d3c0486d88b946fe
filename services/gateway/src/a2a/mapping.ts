/**
 * Trellis ↔ A2A shapes: a Trellis task is an A2A task (same id), its session
 * the A2A `contextId`, a suspended task `input-required`, the task's reply
 * messages its status message and its one artifact (`<task id>:reply`).
 */

import type {
  Message as A2aMessage,
  Task as A2aTask,
  Artifact,
  Part,
  TaskStatusUpdateEvent,
} from "@a2a-js/sdk";
import { Role as A2aRole, TaskState } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { isTerminalStatus } from "@trellis/messages";

/** The A2A task state of each Trellis task status (any other: unspecified). */
const a2aStates: ReadonlyMap<TaskStatus, TaskState> = new Map([
  [TaskStatus.SUBMITTED, TaskState.TASK_STATE_SUBMITTED],
  [TaskStatus.WORKING, TaskState.TASK_STATE_WORKING],
  [TaskStatus.INPUT_REQUIRED, TaskState.TASK_STATE_INPUT_REQUIRED],
  [TaskStatus.AUTH_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED],
  [TaskStatus.COMPLETED, TaskState.TASK_STATE_COMPLETED],
  [TaskStatus.FAILED, TaskState.TASK_STATE_FAILED],
  [TaskStatus.CANCELED, TaskState.TASK_STATE_CANCELED],
]);

/** The Trellis task status as an A2A task state. */
export function stateOf(status: TaskStatus): TaskState {
  return a2aStates.get(status) ?? TaskState.TASK_STATE_UNSPECIFIED;
}

/** Whether an A2A stream of this task ends here (terminal, or waiting for the client). */
export function isSettled(status: TaskStatus): boolean {
  return (
    isTerminalStatus(status) ||
    status === TaskStatus.INPUT_REQUIRED ||
    status === TaskStatus.AUTH_REQUIRED
  );
}

/** Most parts one inbound A2A message may carry. */
const maxParts = 64;

/**
 * An inbound A2A message as a Harn message body (`{role, parts}`) for the
 * REST routes: text parts stay text, data parts become JSON parts; file and
 * raw parts are refused (this endpoint declares text and JSON input only).
 */
export function harnMessageOf(message: A2aMessage | undefined): JsonObject {
  if (message === undefined) throw new RequestMalformedError("params.message is required");
  if (message.parts.length === 0) {
    throw new RequestMalformedError("the message needs at least one part");
  }
  if (message.parts.length > maxParts) {
    throw new RequestMalformedError(`a message may have at most ${maxParts} parts`);
  }
  const parts: JsonObject[] = message.parts.map((part, i) => {
    const content = part.content;
    if (content?.$case === "text") return { type: "text", text: content.value } as JsonObject;
    if (content?.$case === "data") {
      return { type: "json", value: (content.value ?? null) as JsonValue } as JsonObject;
    }
    throw new RequestMalformedError(
      `part ${i} is a ${content?.$case ?? "empty"} part; this agent accepts text and data parts`,
    );
  });
  return { role: "user", parts };
}

/** A plain-text A2A part. */
export function textPart(text: string): Part {
  return {
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  };
}

function partsOf(message: Message): Part[] {
  const parts: Part[] = [];
  for (const part of message.parts) {
    const kind = part.kind;
    if (kind.case === "text") {
      parts.push(textPart(kind.value.text));
    } else if (kind.case === "json") {
      const value = kind.value.value ? toJson(ValueSchema, kind.value.value) : null;
      parts.push({
        content: { $case: "data", value },
        metadata: undefined,
        filename: "",
        mediaType: "application/json",
      });
    }
  }
  return parts;
}

/** A Trellis message as an A2A message of `task` (undefined when it has nothing to show). */
export function a2aMessageOf(message: Message, task: Task): A2aMessage | undefined {
  const parts = partsOf(message);
  if (parts.length === 0) return undefined;
  return {
    messageId: message.id || `${task.id}:${message.role}`,
    contextId: task.sessionId,
    taskId: task.id,
    role: message.role === Role.USER ? A2aRole.ROLE_USER : A2aRole.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The messages a task produced so far (its output, else what it made before suspending). */
function replyOf(task: Task): Message[] {
  const made = task.output.length > 0 ? task.output : (task.suspension?.pendingMessages ?? []);
  return made.filter((m) => m.role === Role.ASSISTANT || m.role === Role.AGENT);
}

export const replyArtifactId = (taskId: string) => `${taskId}:reply`;

/** The status message: the question of a suspension, else the reply's last message, else the failure. */
function statusMessageOf(task: Task): A2aMessage | undefined {
  const reply = replyOf(task);
  const last = reply.at(-1);
  const text =
    task.status === TaskStatus.FAILED && task.failure
      ? `${task.failure.category}: ${task.failure.message}`
      : undefined;
  if (text !== undefined) {
    return {
      messageId: `${task.id}:failure`,
      contextId: task.sessionId,
      taskId: task.id,
      role: A2aRole.ROLE_AGENT,
      parts: [textPart(text)],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
  }
  return last ? a2aMessageOf(last, task) : undefined;
}

/** What a suspended task waits for, for the client (`metadata.trellis.suspension`). */
function suspensionMetadata(task: Task): JsonObject | undefined {
  if (task.suspension === undefined) return undefined;
  return { signal_id: task.suspension.signalId, ...(task.suspension.metadata ?? {}) };
}

export function statusOf(task: Task): TaskStatusUpdateEvent["status"] {
  return {
    state: stateOf(task.status),
    message: statusMessageOf(task),
    timestamp: new Date(
      Number(task.updatedAt?.seconds ?? 0n) * 1000 + Math.floor((task.updatedAt?.nanos ?? 0) / 1e6),
    ).toISOString(),
  };
}

/** The reply artifact: every text of the reply so far (none before there is one). */
export function replyArtifactOf(task: Task): Artifact | undefined {
  const parts = replyOf(task).flatMap(partsOf);
  if (parts.length === 0) return undefined;
  return {
    artifactId: replyArtifactId(task.id),
    name: "reply",
    description: "The agent's reply to this turn",
    parts,
    metadata: undefined,
    extensions: [],
  };
}

/** A Trellis task as an A2A task. */
export function a2aTaskOf(task: Task, historyLength?: number): A2aTask {
  const history: A2aMessage[] = [];
  const input = task.input ? a2aMessageOf(task.input, task) : undefined;
  if (input) history.push(input);
  for (const message of replyOf(task)) {
    const shown = a2aMessageOf(message, task);
    if (shown) history.push(shown);
  }
  const artifact = isTerminalStatus(task.status) ? replyArtifactOf(task) : undefined;
  const suspension =
    task.status === TaskStatus.INPUT_REQUIRED ? suspensionMetadata(task) : undefined;
  return {
    id: task.id,
    contextId: task.sessionId,
    status: statusOf(task),
    artifacts: artifact ? [artifact] : [],
    history:
      historyLength === undefined
        ? history
        : historyLength === 0
          ? []
          : history.slice(-historyLength),
    metadata: {
      trellis: {
        agent_id: task.agentId,
        ...(task.assignedBackend ? { backend: task.assignedBackend } : {}),
        ...(task.receiptId ? { receipt_id: task.receiptId } : {}),
        ...(suspension ? { suspension } : {}),
      },
    },
  };
}

/** The A2A status update of a task's current state. */
export function statusUpdateOf(task: Task): TaskStatusUpdateEvent {
  return {
    taskId: task.id,
    contextId: task.sessionId,
    status: statusOf(task),
    metadata: undefined,
  };
}
