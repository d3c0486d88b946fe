/**
 * Proto → Harn JSON (the OpenAPI document's schemas; the way in is
 * `harn-input.ts`): snake_case keys, object
 * discriminators, RFC 3339 UTC timestamps, uppercase lifecycle states, `null`
 * for absent optional fields, Part `type` discriminators with visibility.
 *
 * Output is deterministic: objects are built with a fixed key order, free-form
 * values (metadata, tool input, JSON parts, event data) are key-sorted, and
 * nothing is computed from the clock — two reads of the same resource
 * serialize byte-identically.
 *
 * Pure: no I/O.
 */
import { create, fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema, type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type ErrorDetail,
  type Event,
  type Message,
  MessageSchema,
  type Part,
  Role,
  SessionState,
  TaskStatus,
  ToolResultStatus,
  Visibility,
} from "@trellis/contracts/core";
import {
  type Agent,
  type Artifact,
  ArtifactKind,
  AutonomyTier,
  type Outcome,
  OutcomeStatus,
  ReceiptPolicy,
  type Session,
  type SessionMessage,
  type Task,
  type TaskFailure,
  type Workspace,
} from "@trellis/contracts/tasks";
import { roleName } from "@trellis/messages";
import { sortKeys } from "./canonical-json.js";
import { blockingJson } from "./errors.js";
import { isJsonObject } from "./json-input.js";

// ---------------------------------------------------------------------------
// Scalars

/** RFC 3339 UTC text of a timestamp (protobuf JSON form), or null. */
export function timestampJson(ts: Timestamp | undefined): string | null {
  return ts === undefined ? null : (toJson(TimestampSchema, ts) as string);
}

/** "" → null: proto3 strings are never absent, Harn optional ids are. */
function orNull(value: string): string | null {
  return value === "" ? null : value;
}

/** A google.protobuf.Value as plain JSON with sorted keys (null when unset). */
export function valueJson(value: Value | undefined): JsonValue {
  return value === undefined ? null : sortKeys(toJson(ValueSchema, value));
}

/** A Struct field as a key-sorted object (`{}` when unset). */
export function objectJson(value: JsonObject | undefined): JsonObject {
  return value === undefined ? {} : (sortKeys(value) as JsonObject);
}

/** What a resource the Harn JSON gives a head to carries. */
interface HarnResource {
  id: string;
  createdAt?: Timestamp | undefined;
  updatedAt?: Timestamp | undefined;
  metadata?: JsonObject | undefined;
}

/**
 * The fields every mutable Harn resource opens with, in this order: id,
 * object, created_at, updated_at (created_at until it changes), metadata.
 */
export function resourceHead(object: string, resource: HarnResource): JsonObject {
  return {
    id: resource.id,
    object,
    created_at: timestampJson(resource.createdAt),
    updated_at: timestampJson(resource.updatedAt ?? resource.createdAt),
    metadata: objectJson(resource.metadata),
  };
}

/**
 * The head of a resource served as another service keeps it (memories,
 * vaults): the fields of {@link resourceHead}, but the timestamps and the
 * metadata as stored, then `workspace_id` (null: tenant-wide).
 */
export function storedResourceHead(
  object: string,
  resource: HarnResource & { workspaceId: string },
): JsonObject {
  return {
    id: resource.id,
    object,
    created_at: timestampJson(resource.createdAt),
    updated_at: timestampJson(resource.updatedAt),
    metadata: resource.metadata ?? {},
    workspace_id: orNull(resource.workspaceId),
  };
}

/** Plain JSON → google.protobuf.Value. */
export function toValue(json: JsonValue): Value {
  return fromJson(ValueSchema, json);
}

// ---------------------------------------------------------------------------
// Enums

// The Harn spellings are the generated enums' own names (TypeScript numeric
// enums map values back to names): TaskStatus[2] === "WORKING".

/** The Harn spelling of a task status (`WORKING`); null when unspecified. */
export function taskStatusName(status: TaskStatus): string | null {
  return status === TaskStatus.UNSPECIFIED ? null : (TaskStatus[status] ?? null);
}

/** Harn task status names → proto, for list filters. */
export function parseTaskStatus(name: string): TaskStatus | undefined {
  const value = (TaskStatus as unknown as Record<string, TaskStatus | undefined>)[name];
  return typeof value === "number" && value !== TaskStatus.UNSPECIFIED ? value : undefined;
}

export { isTerminalStatus } from "@trellis/messages";

/** The Harn spelling of a session state; null when unspecified. */
export function sessionStateName(state: SessionState): string | null {
  return state === SessionState.UNSPECIFIED ? null : (SessionState[state] ?? null);
}

/** Harn visibility names (shared with `harn-input.ts`, as are the tables below). */
export const visibilityNames = ["public", "internal", "receipt_only"] as const;
/** A Harn part / artifact visibility. */
export type VisibilityName = (typeof visibilityNames)[number];

function visibilityName(visibility: Visibility, fallback: VisibilityName): VisibilityName {
  switch (visibility) {
    case Visibility.PUBLIC:
      return "public";
    case Visibility.INTERNAL:
      return "internal";
    case Visibility.RECEIPT_ONLY:
      return "receipt_only";
    default:
      return fallback;
  }
}

export function visibilityValue(name: VisibilityName): Visibility {
  return name === "public"
    ? Visibility.PUBLIC
    : name === "internal"
      ? Visibility.INTERNAL
      : Visibility.RECEIPT_ONLY;
}

export const artifactKinds = [
  "file",
  "patch",
  "image",
  "log",
  "diff",
  "receipt",
  "snapshot",
  "dataset",
  "other",
] as const;
export const artifactKindValues: Record<(typeof artifactKinds)[number], ArtifactKind> = {
  file: ArtifactKind.FILE,
  patch: ArtifactKind.PATCH,
  image: ArtifactKind.IMAGE,
  log: ArtifactKind.LOG,
  diff: ArtifactKind.DIFF,
  receipt: ArtifactKind.RECEIPT,
  snapshot: ArtifactKind.SNAPSHOT,
  dataset: ArtifactKind.DATASET,
  other: ArtifactKind.OTHER,
};

function artifactKindName(kind: ArtifactKind): string {
  for (const [name, value] of Object.entries(artifactKindValues)) if (value === kind) return name;
  return "other";
}

export const autonomyTiers = ["shadow", "suggest", "act_with_approval", "act_auto"] as const;
export const autonomyValues: Record<(typeof autonomyTiers)[number], AutonomyTier> = {
  shadow: AutonomyTier.SHADOW,
  suggest: AutonomyTier.SUGGEST,
  act_with_approval: AutonomyTier.ACT_WITH_APPROVAL,
  act_auto: AutonomyTier.ACT_AUTO,
};
export const receiptPolicies = ["required", "optional", "disabled"] as const;
export const receiptPolicyValues: Record<(typeof receiptPolicies)[number], ReceiptPolicy> = {
  required: ReceiptPolicy.REQUIRED,
  optional: ReceiptPolicy.OPTIONAL,
  disabled: ReceiptPolicy.DISABLED,
};

function nameOf<V extends number>(table: Record<string, V>, value: V): string | null {
  for (const [name, v] of Object.entries(table)) if (v === value) return name;
  return null;
}

// ---------------------------------------------------------------------------
// Parts and messages (proto → Harn)

/** A Harn Part (one of the seven core types). */
export type HarnPart = JsonObject & { type: string; visibility: VisibilityName };

function redacted(kind: string, visibility: VisibilityName): HarnPart {
  // Harn v1 "Privacy and redaction": keep the slot, never the content.
  return { type: "json", value: { redacted: true, part_type: kind }, visibility };
}

/**
 * One proto Part as Harn JSON. Parts that are not public (and reasoning, which
 * is never public) become a redaction descriptor so readers see that content
 * existed; inline images become `file_ref` (URL or data: URI).
 */
export function partToHarn(part: Part): HarnPart | undefined {
  const kind = part.kind;
  const defaultVisibility: VisibilityName =
    kind.case === "thinking" || kind.case === "redactedThinking" ? "internal" : "public";
  const visibility = visibilityName(part.visibility, defaultVisibility);
  if (kind.case === undefined) return undefined;
  if (visibility !== "public" || kind.case === "thinking" || kind.case === "redactedThinking") {
    const label =
      kind.case === "redactedThinking"
        ? "redacted_thinking"
        : kind.case.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    return redacted(label, visibility === "public" ? "internal" : visibility);
  }
  switch (kind.case) {
    case "text":
      return { type: "text", text: kind.value.text, visibility };
    case "json":
      return { type: "json", value: valueJson(kind.value.value), visibility };
    case "toolCall":
      return {
        type: "tool_call",
        tool_call_id: kind.value.toolCallId,
        name: kind.value.name,
        input: toolInput(valueJson(kind.value.input)),
        visibility,
      };
    case "toolResult":
      return {
        type: "tool_result",
        tool_call_id: kind.value.toolCallId,
        output: valueJson(kind.value.output),
        status:
          kind.value.status === ToolResultStatus.OK ||
          kind.value.status === ToolResultStatus.UNSPECIFIED
            ? "ok"
            : "error",
        visibility,
      };
    case "artifactRef":
      return { type: "artifact_ref", artifact_id: kind.value.artifactId, visibility };
    case "fileRef":
      return {
        type: "file_ref",
        uri: kind.value.uri,
        mime_type: kind.value.mimeType || "application/octet-stream",
        visibility,
      };
    case "imageRef":
      return {
        type: "image_ref",
        artifact_id: kind.value.artifactId,
        mime_type: kind.value.mimeType || "application/octet-stream",
        visibility,
      };
    case "image": {
      const source = kind.value.source;
      const mime = kind.value.mediaType || "application/octet-stream";
      const uri =
        source.case === "url"
          ? source.value
          : source.case === "base64Data"
            ? `data:${mime};base64,${source.value}`
            : "";
      return { type: "file_ref", uri, mime_type: mime, visibility };
    }
  }
}

// Tool input is a JSON object in Harn; a non-object (malformed arguments) is wrapped.
function toolInput(value: JsonValue): JsonObject {
  if (isJsonObject(value)) return value;
  return value === null ? {} : { value };
}

/** Where a message sits, for its `session_id` / `task_id`. */
export interface MessagePlace {
  sessionId?: string;
  taskId?: string;
}

/**
 * A proto Message as a Harn Message. Chat-style `tool_calls` become
 * `tool_call` parts (unless already present as parts), and a tool message's
 * text answering `tool_call_id` becomes a `tool_result` part.
 */
export function messageToHarn(message: Message, place: MessagePlace = {}): JsonObject {
  const parts: HarnPart[] = [];
  const callIds = new Set<string>();
  const hasResult = message.parts.some((p) => p.kind.case === "toolResult");
  if (message.role === Role.TOOL && message.toolCallId !== "" && !hasResult) {
    const text = message.parts
      .filter((p) => p.kind.case === "text")
      .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
      .join("");
    parts.push({
      type: "tool_result",
      tool_call_id: message.toolCallId,
      output: text,
      status: "ok",
      visibility: "public",
    });
    for (const p of message.parts) {
      if (p.kind.case === "text") continue;
      const h = partToHarn(p);
      if (h) parts.push(h);
    }
  } else {
    for (const p of message.parts) {
      const h = partToHarn(p);
      if (!h) continue;
      if (h.type === "tool_call") callIds.add(String(h.tool_call_id));
      parts.push(h);
    }
  }
  for (const call of message.toolCalls) {
    if (callIds.has(call.id)) continue;
    parts.push({
      type: "tool_call",
      tool_call_id: call.id,
      name: call.name,
      input: toolInput(valueJson(call.arguments)),
      visibility: "public",
    });
  }
  const created = timestampJson(message.createdAt);
  return {
    id: message.id,
    object: "message",
    created_at: created,
    updated_at: created,
    metadata: objectJson(message.metadata),
    session_id: orNull(place.sessionId ?? ""),
    task_id: orNull(place.taskId ?? ""),
    role: roleName(message.role) || "user",
    parts,
  };
}

/** A transcript message (with its session and task) as a Harn Message. */
export function sessionMessageToHarn(message: SessionMessage): JsonObject {
  return messageToHarn(message.message ?? create(MessageSchema), {
    sessionId: message.sessionId,
    taskId: message.taskId,
  });
}

// ---------------------------------------------------------------------------
// Resources (proto → Harn)

function failureJson(
  failure: { category: string; message: string; retryable: boolean } | undefined,
  detail: ErrorDetail | undefined,
): JsonObject | null {
  if (failure === undefined && detail === undefined) return null;
  const details: JsonObject = {};
  if (failure) details.retryable = failure.retryable;
  if (detail?.reason) details.reason = detail.reason;
  if (detail?.domain) details.domain = detail.domain;
  if (detail && Object.keys(detail.metadata).length > 0) {
    details.metadata = sortKeys({ ...detail.metadata }) as JsonObject;
  }
  return {
    code: failure?.category || detail?.reason || "failed",
    message: failure?.message ?? "",
    details,
  };
}

/** A task failure as the Harn Failure object, or null. */
export function taskFailureToHarn(failure: TaskFailure | undefined): JsonObject | null {
  if (failure === undefined) return null;
  const json = failureJson(failure, failure.detail);
  // Why no backend could run it, typed (backend, capability, code).
  if (json && failure.blocking)
    (json.details as JsonObject).blocking = blockingJson(failure.blocking);
  return json;
}

/** A Session as Harn JSON. */
export function sessionToHarn(session: Session): JsonObject {
  return {
    ...resourceHead("session", session),
    workspace_id: session.workspaceId,
    state: sessionStateName(session.state),
    transcript: {
      object: "transcript",
      message_count: Number(session.messageCount),
      turn_count: Number(session.turnCount),
      messages_url: `/v1/sessions/${encodeURIComponent(session.id)}/messages`,
      forked_from_event_id: orNull(session.forkedFromEventId),
      forked_from_message_id: orNull(session.forkedFromMessageId),
      forked_message_count: Number(session.forkedMessageCount),
    },
    persona_id: orNull(session.agentId),
    root_session_id: orNull(session.rootSessionId),
    parent_session_id: orNull(session.parentSessionId),
    branch_id: orNull(session.branchId),
    last_event_id: orNull(session.lastEventId),
    summary: orNull(session.summary),
    expires_at: null,
  };
}

/** A Task as Harn JSON. */
export function taskToHarn(task: Task): JsonObject {
  return {
    ...resourceHead("task", task),
    session_id: task.sessionId,
    workspace_id: task.workspaceId,
    status: taskStatusName(task.status),
    input: task.input
      ? messageToHarn(task.input, { sessionId: task.sessionId, taskId: task.id })
      : {},
    created_by: task.createdBy,
    persona_id: orNull(task.agentId),
    branch_id: orNull(task.branchId),
    parent_task_id: orNull(task.parentTaskId),
    assigned_agent_id: orNull(task.assignedBackend),
    receipt_id: orNull(task.receiptId),
    outcome_id: orNull(task.outcomeId),
    quota_id: null,
    started_at: timestampJson(task.startedAt),
    completed_at: timestampJson(task.completedAt),
    canceled_at: timestampJson(task.canceledAt),
    failure: taskFailureToHarn(task.failure),
  };
}

/** An Artifact as Harn JSON (`sha256` as bare hex, per the schema's pattern). */
export function artifactToHarn(artifact: Artifact): JsonObject {
  const hash = artifact.sha256.replace(/^sha256:/, "");
  return {
    // Never updated: updated_at is created_at.
    ...resourceHead("artifact", artifact),
    kind: artifactKindName(artifact.kind),
    mime_type: artifact.mimeType || "application/octet-stream",
    uri: orNull(artifact.uri),
    visibility: visibilityName(artifact.visibility, "public"),
    sha256: orNull(hash),
    workspace_id: orNull(artifact.workspaceId),
    session_id: orNull(artifact.sessionId),
    task_id: orNull(artifact.taskId),
    receipt_id: null,
  };
}

const outcomeStatusNames: Record<number, string> = {
  [OutcomeStatus.SUCCEEDED]: "SUCCEEDED",
  [OutcomeStatus.FAILED]: "FAILED",
  [OutcomeStatus.CANCELED]: "CANCELED",
};

/** An Outcome as Harn JSON, with its artifacts when the caller resolved them. */
export function outcomeToHarn(outcome: Outcome, artifacts: readonly Artifact[] = []): JsonObject {
  return {
    // Never updated, and no metadata: updated_at is created_at, metadata {}.
    ...resourceHead("outcome", outcome),
    task_id: outcome.taskId,
    status: outcomeStatusNames[outcome.status] ?? null,
    summary: outcome.summary,
    messages: outcome.messages.map((m) =>
      messageToHarn(m, { sessionId: outcome.sessionId, taskId: outcome.taskId }),
    ),
    artifacts: artifacts.map(artifactToHarn),
    handoffs: [],
    receipt_id: null,
    failure: null,
  };
}

/** A Workspace as Harn JSON. */
export function workspaceToHarn(workspace: Workspace): JsonObject {
  return {
    ...resourceHead("workspace", workspace),
    name: workspace.name,
    root: workspace.root,
    default_branch_id: orNull(workspace.defaultBranchId),
    host: null,
    repository: null,
    tenant_id: null,
    capabilities: [],
    connectors: [],
    quota_id: null,
    // Trellis: set once archived (no new sessions).
    archived_at: timestampJson(workspace.archivedAt),
  };
}

/** An Agent as a Harn Persona (`entry_workflow` is the backend that runs it). */
export function agentToPersona(agent: Agent): JsonObject {
  return {
    ...resourceHead("persona", agent),
    name: agent.name,
    version: agent.version,
    entry_workflow: agent.backend,
    description: agent.description,
    autonomy_tier: nameOf(autonomyValues, agent.autonomyTier) ?? "suggest",
    receipt_policy: nameOf(receiptPolicyValues, agent.receiptPolicy) ?? "optional",
    tools: [...agent.tools],
    capabilities: [],
    owner: null,
    quota_id: null,
  };
}

// ---------------------------------------------------------------------------
// Events

/** The typed payload of an event as JSON (what `eventToHarn` puts under `payload`). */
export function eventPayloadJson(event: Event): JsonObject {
  const kind = event.payload?.kind;
  switch (kind?.case) {
    case "data":
      return objectJson(kind.value);
    case "messageAppended":
      return {
        message: kind.value.message
          ? messageToHarn(kind.value.message, {
              sessionId: event.sessionId,
              taskId: event.taskId,
            })
          : null,
        position: Number(kind.value.position),
      };
    case "taskStatusChanged":
      return {
        status: taskStatusName(kind.value.status),
        previous_status: taskStatusName(kind.value.previousStatus),
        reason: orNull(kind.value.reason),
        ...(kind.value.agentId ? { agent_id: kind.value.agentId } : {}),
        failure: kind.value.failure
          ? failureJson(
              { category: kind.value.failure.reason, message: kind.value.reason, retryable: false },
              kind.value.failure,
            )
          : null,
      };
    case "sessionStateChanged":
      return {
        state: sessionStateName(kind.value.state),
        previous_state: sessionStateName(kind.value.previousState),
        reason: orNull(kind.value.reason),
      };
    case "signalDelivered":
      return { signal_id: kind.value.signalId, payload: valueJson(kind.value.payload) };
    default:
      return {};
  }
}

/** An Event as Harn JSON (`object: "event"`, integer `sequence`). */
export function eventToHarn(event: Event): JsonObject {
  const created = timestampJson(event.createdAt);
  return {
    id: event.id,
    object: "event",
    created_at: created,
    updated_at: created,
    metadata: {},
    event: event.kind,
    resource: { object: event.resource?.object ?? "", id: event.resource?.id ?? "" },
    sequence: Number(event.sequence),
    payload: eventPayloadJson(event),
    trace_id: orNull(event.traceId),
    span_id: orNull(event.spanId),
    session_id: orNull(event.sessionId),
    task_id: orNull(event.taskId),
    workspace_id: orNull(event.workspaceId),
    actor: orNull(event.actor?.id ?? ""),
    idempotency_key: orNull(event.idempotencyKey),
    previous_event_id: orNull(event.previousEventId),
    receipt_id: orNull(event.receiptId),
    ...replayJson(event),
  };
}

/**
 * `replayed` / `replay` of an event (Harn `ReplayEventMetadata`): set on the
 * message events of a replay, from the marker the tasks service puts in the
 * replayed message's `metadata.replay`.
 */
function replayJson(event: Event): { replayed: boolean; replay: JsonObject | null } {
  const kind = event.payload?.kind;
  const marker =
    kind?.case === "messageAppended" ? kind.value.message?.metadata?.replay : undefined;
  if (typeof marker !== "object" || marker === null || Array.isArray(marker)) {
    return { replayed: false, replay: null };
  }
  const replay: JsonObject = {};
  for (const key of [
    "source_task_id",
    "replay_task_id",
    "original_event_id",
    "replay_cursor",
    "mode",
    "override_key",
    "receipt_delta_id",
  ]) {
    replay[key] = marker[key] ?? null;
  }
  return { replayed: true, replay };
}

// ---------------------------------------------------------------------------
// Lists

/** The Harn PaginatedList envelope. */
export function listJson(
  data: readonly JsonValue[],
  page: { nextCursor?: string | undefined; hasMore?: boolean },
): JsonObject {
  const next = page.nextCursor ? page.nextCursor : null;
  return {
    object: "list",
    data: [...data],
    page: { next_cursor: next, has_more: page.hasMore ?? next !== null },
  };
}
