/**
 * Rows ↔ proto resources. Internal to the store.
 */
import { create, fromBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Message, TaskStatus } from "@trellis/contracts/core";
import {
  type Agent,
  AgentSchema,
  type Artifact,
  ArtifactSchema,
  type Outcome,
  OutcomeSchema,
  type Session,
  type SessionMessage,
  SessionMessageSchema,
  SessionSchema,
  SuspensionSchema,
  type Task,
  TaskFailureSchema,
  TaskSchema,
  type Workspace,
  WorkspaceSchema,
} from "@trellis/contracts/tasks";
import type { Insertable } from "kysely";
import { isSuspended } from "../domain/lifecycle.js";
import { boundedStruct } from "./bounded-metadata.js";
import { decodeMessage, decodeMessages, encodeMessage } from "./codec.js";
import type {
  AgentRow,
  ArtifactRow,
  MessageRow,
  MessageTable,
  OutcomeRow,
  SessionRow,
  TaskRow,
  WorkspaceRow,
} from "./schema.js";

const ts = (date: Date) => timestampFromDate(date);
const tsOrUndefined = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

export function toWorkspace(row: WorkspaceRow): Workspace {
  return create(WorkspaceSchema, {
    id: row.id,
    name: row.name,
    root: row.root,
    defaultBranchId: row.default_branch_id,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    metadata: row.metadata,
    archivedAt: tsOrUndefined(row.archived_at),
  });
}

export function toAgent(row: AgentRow): Agent {
  return create(AgentSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    version: row.version,
    description: row.description,
    backend: row.backend,
    tools: row.tools,
    autonomyTier: row.autonomy_tier,
    receiptPolicy: row.receipt_policy,
    definition: row.definition,
    safeToRetry: row.safe_to_retry,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    metadata: row.metadata,
  });
}

export function toSession(row: SessionRow): Session {
  return create(SessionSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    state: row.state,
    agentId: row.agent_id,
    rootSessionId: row.root_session_id,
    parentSessionId: row.parent_session_id,
    branchId: row.branch_id,
    lastEventId: row.last_event_id,
    summary: row.summary,
    messageCount: row.message_count,
    turnCount: row.turn_count,
    forkedFromEventId: row.forked_from_event_id,
    forkedFromMessageId: row.forked_from_message_id,
    forkedMessageCount: row.forked_message_count,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    metadata: boundedStruct(row.metadata),
  });
}

export function toSessionMessage(
  row: Pick<MessageRow, "body" | "session_id" | "position" | "turn" | "task_id">,
): SessionMessage {
  return create(SessionMessageSchema, {
    message: decodeMessage(row.body),
    sessionId: row.session_id,
    position: row.position,
    turn: row.turn,
    taskId: row.task_id,
  });
}

/**
 * The `messages` rows of `messages` appended at position `start` of a
 * session's transcript, in the turns `assignTurns` gave them.
 */
export function messageRows(
  session: Pick<SessionRow, "workspace_id" | "id">,
  messages: readonly Message[],
  start: bigint,
  turns: readonly bigint[],
  taskId: string,
): Insertable<MessageTable>[] {
  return messages.map((message, i) => ({
    id: message.id,
    workspace_id: session.workspace_id,
    session_id: session.id,
    position: start + BigInt(i),
    turn: turns[i] as bigint,
    task_id: taskId,
    role: message.role,
    body: encodeMessage(message),
  }));
}

export function toTask(row: TaskRow): Task {
  const task = create(TaskSchema, {
    id: row.id,
    sessionId: row.session_id,
    workspaceId: row.workspace_id,
    status: row.status,
    input: decodeMessage(row.input),
    createdBy: row.created_by,
    agentId: row.agent_id,
    branchId: row.branch_id,
    parentTaskId: row.parent_task_id,
    assignedBackend: row.assigned_backend,
    receiptId: row.receipt_id,
    outcomeId: row.outcome_id,
    createdAt: ts(row.created_at),
    updatedAt: ts(row.updated_at),
    output: decodeMessages(row.output),
    metadata: row.metadata,
    busyPolicy: row.busy_policy,
    ...(row.state ? { state: row.state } : {}),
  });
  task.startedAt = tsOrUndefined(row.started_at);
  task.completedAt = tsOrUndefined(row.completed_at);
  task.canceledAt = tsOrUndefined(row.canceled_at);
  if (row.failure) task.failure = fromBinary(TaskFailureSchema, row.failure);
  // The suspension column also keeps a resumed task's pending messages until
  // it finishes; the resource shows it only while the task is suspended.
  if (row.suspension && isSuspended(row.status as TaskStatus)) {
    task.suspension = fromBinary(SuspensionSchema, row.suspension);
  }
  return task;
}

export function toOutcome(row: OutcomeRow): Outcome {
  return create(OutcomeSchema, {
    id: row.id,
    taskId: row.task_id,
    sessionId: row.session_id,
    workspaceId: row.workspace_id,
    status: row.status,
    summary: row.summary,
    messages: decodeMessages(row.messages),
    artifactIds: row.artifact_ids,
    createdAt: ts(row.created_at),
  });
}

export function toArtifact(row: Omit<ArtifactRow, "content">): Artifact {
  return create(ArtifactSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    sessionId: row.session_id,
    taskId: row.task_id,
    kind: row.kind,
    name: row.name,
    mimeType: row.mime_type,
    uri: row.uri,
    visibility: row.visibility,
    sha256: row.sha256,
    sizeBytes: row.size_bytes,
    createdAt: ts(row.created_at),
    metadata: row.metadata,
  });
}
