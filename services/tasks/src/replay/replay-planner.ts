/**
 * Turns a ReplayTask request into a replay the store can create: reads the
 * source (task, agent, checkpoints, signals), reads the source task's events
 * from the event log (Harn: "Replay MUST read the source Task's EventLog
 * entries in event order"), checks the overrides and the recording, and
 * freezes what the replay may use in its plan. Fails before anything is
 * written when the replay could not proceed, naming the first unavailable
 * event, record, checkpoint, signal or artifact.
 */
import { clone, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type Event,
  type Message,
  MessageSchema,
  TaskStatus,
  Visibility,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { ReplayOverride, ReplayTaskRequest } from "@trellis/contracts/tasks";
import type { EventLog } from "@trellis/eventlog";
import { isTrellisError, type SecretFingerprints } from "@trellis/runtime";
import { DETERMINISTIC_BACKENDS } from "../domain/defaults.js";
import { conflict, invalidRequest } from "../domain/errors.js";
import { newId } from "../domain/ids.js";
import { isSuspended, isTerminal, taskEventKind } from "../domain/lifecycle.js";
import {
  checkDeclaredHash,
  firstMissingModelRecord,
  markerFor,
  modeName,
  type OverrideVisibility,
  overrideKind,
  type PlannedCheckpoint,
  type PlannedMemoryRead,
  type PlannedMessage,
  type PlannedSignal,
  parseOverrideKey,
  REPLAY_KEY,
  type ReplayPlan,
  recordKeysOf,
  replaySecretBox,
  replayUnavailable,
  type StoredOverride,
  sha256Of,
  strategyOf,
} from "../domain/replay.js";
import type { Idempotency, NewReplay, ReplaySource, TaskStore } from "../store/task-store.js";
import { overrideResponse } from "./recorded-model.js";

/** What planning reads from. */
export interface ReplayPlannerDeps {
  store: TaskStore;
  eventLog: EventLog;
  /** How long to wait for the source's last events to reach the log (relay lag). */
  eventWaitMs?: number;
  /** The deployment's secret fingerprints: what a `secret:` override keeps instead of a hash. */
  fingerprints: SecretFingerprints;
}

const VISIBILITY: Partial<Record<Visibility, OverrideVisibility>> = {
  [Visibility.PUBLIC]: "public",
  [Visibility.INTERNAL]: "internal",
  [Visibility.RECEIPT_ONLY]: "receipt_only",
};

/** The event kind a task's settled status (terminal or suspended) is announced with. */
function settlingKind(status: TaskStatus): string | undefined {
  return isTerminal(status) || isSuspended(status) ? taskEventKind(status) : undefined;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Plans a replay of `request.task_id` for a caller scoped to `scope`. */
export async function planReplay(
  deps: ReplayPlannerDeps,
  request: ReplayTaskRequest,
  scope: string | undefined,
  idempotency: Idempotency | undefined,
): Promise<NewReplay> {
  if (request.taskId === "") throw invalidRequest("task_id is required", "task_id");
  const mode = modeName(request.mode);
  const source = await deps.store.getReplaySource(request.taskId, scope);
  const { task, agent } = source;
  const status = task.status;
  if (status === TaskStatus.SUBMITTED || status === TaskStatus.WORKING) {
    throw conflict(
      `task ${task.id} is ${TaskStatus[status]}; replay it once it has finished or suspended`,
      { task_id: task.id, status: TaskStatus[status] ?? String(status) },
    );
  }
  if (source.inputPosition === null || !task.input) {
    throw replayUnavailable(
      task.id,
      "event:user.message",
      "it never started: nothing was recorded",
    );
  }
  if (!source.historyIntact) {
    throw replayUnavailable(
      task.id,
      "transcript",
      `session ${task.sessionId} was truncated after the task ran: the history it ran on is gone`,
      { session_id: task.sessionId },
    );
  }
  // By the backend the source ran on (routing may have moved it off the
  // agent's primary), not the agent's primary alone.
  const strategy = strategyOf(task.assignedBackend || agent.backend, DETERMINISTIC_BACKENDS);
  const overrides = await readOverrides(deps, request, mode, strategy, scope, task.id);

  const events = await sourceEvents(deps, task.workspaceId, task.sessionId, task.id, status);
  const output = task.output;
  const eventOf = messageEvents(events);
  const planned = (message: Message, index: string): PlannedMessage => {
    const event = eventOf.get(message.id);
    if (!event) {
      throw replayUnavailable(
        task.id,
        `event:${message.id}`,
        `the event log has no event for its ${index} (message ${message.id})`,
        { message_id: message.id },
      );
    }
    return {
      messageId: message.id,
      eventId: event.id,
      sequence: Number(event.sequence),
      keys: recordKeysOf(message),
    };
  };
  const input = planned(task.input, "input");
  const messages = output.map((m, i) => planned(m, `output message ${i}`));

  if (strategy === "model") {
    const missing = firstMissingModelRecord(output);
    if (missing) {
      const event = eventOf.get(missing.messageId);
      throw replayUnavailable(
        task.id,
        missing.key,
        `the recorded ${missing.key.startsWith("llm:") ? "model response" : "tool result"} ${missing.key} is missing from message ${missing.messageId}`,
        { message_id: missing.messageId, original_event_id: event?.id ?? "" },
      );
    }
  }

  const checkpoint =
    mode === "from_checkpoint" ? findCheckpoint(source, request, events) : undefined;
  if (mode !== "from_checkpoint" && (request.checkpointId || request.checkpointEventId)) {
    throw invalidRequest(
      "checkpoint_id and checkpoint_event_id are for mode from_checkpoint",
      request.checkpointId ? "checkpoint_id" : "checkpoint_event_id",
    );
  }
  const labelOf = (signalId: string) =>
    signalId.startsWith(`${task.id}:`) ? signalId.slice(task.id.length + 1) : signalId;
  // Signals the source got, minus those that resumed the checkpoints a
  // from_checkpoint replay starts after (the restored one included).
  const signals: PlannedSignal[] = source.signals.map((s) => ({
    label: labelOf(s.signalId),
    payload: s.payload,
  }));
  let restore: NewReplay["restore"];
  if (checkpoint) {
    const upTo = source.checkpoints.slice(0, checkpoint.index + 1);
    for (const c of upTo) {
      const at = signals.findIndex((s) => s.label === labelOf(c.signalId));
      if (at < 0) {
        throw replayUnavailable(
          task.id,
          `signal:${c.signalId}`,
          `the source never resumed from checkpoint ${c.id}: no signal was recorded for ${c.signalId}`,
          { checkpoint_id: c.id },
        );
      }
      const [used] = signals.splice(at, 1);
      if (c === checkpoint.row) {
        restore = {
          inputPosition: source.inputPosition,
          checkpoint: checkpoint.row.checkpoint,
          payload: used?.payload ?? null,
        };
      }
    }
  }

  const plan: ReplayPlan = {
    sourceTaskId: task.id,
    sourceSessionId: task.sessionId,
    mode,
    strategy,
    backend: agent.backend,
    input,
    messages,
    signals,
    ...(checkpoint ? { checkpoint: checkpoint.planned } : {}),
    memoryReads: memoryReadsOf(events),
    ...(request.refreshMemory ? { refreshMemory: true } : {}),
    source: sourceEnding(task),
  };
  const taskId = newId("task");
  let replayInput: Message;
  if (restore) {
    // Restored with the history: the input is the source's, already in the fork.
    replayInput = clone(MessageSchema, task.input);
  } else {
    replayInput = clone(MessageSchema, task.input);
    replayInput.id = "";
    replayInput.createdAt = undefined;
    replayInput.metadata = {
      ...(replayInput.metadata ?? {}),
      [REPLAY_KEY]: markerFor(plan, taskId, input) as unknown as JsonValue,
    };
  }
  const userMetadata = (request.metadata ?? {}) as JsonObject;
  return {
    taskId,
    plan,
    overrides,
    forkCount: checkpoint ? checkpoint.row.transcriptLength : source.inputPosition,
    forkEventId: checkpoint?.row.eventId ?? "",
    input: replayInput,
    ...(restore ? { restore } : {}),
    metadata: {
      ...userMetadata,
      [REPLAY_KEY]: {
        source_task_id: task.id,
        mode,
        strategy,
        override_keys: Object.keys(overrides),
        checkpoint_id: checkpoint?.row.id ?? null,
        reason: request.reason || null,
      },
    },
    ...(idempotency ? { idempotency } : {}),
  };
}

/** How the source ended, or what it waits for. */
function sourceEnding(task: ReplaySource["task"]): ReplayPlan["source"] {
  const status = TaskStatus[task.status] ?? String(task.status);
  const failure = task.failure
    ? {
        failure: {
          category: task.failure.category,
          message: task.failure.message,
          retryable: task.failure.retryable,
        },
      }
    : {};
  if (isSuspended(task.status) && task.suspension) {
    const signalId = task.suspension.signalId;
    return {
      status,
      ...failure,
      suspension: {
        label: signalId.startsWith(`${task.id}:`) ? signalId.slice(task.id.length + 1) : signalId,
        kind: task.status === TaskStatus.AUTH_REQUIRED ? "auth" : "input",
        metadata: (task.suspension.metadata ?? {}) as JsonObject,
      },
    };
  }
  return { status, ...failure };
}

/** The checkpoint a from_checkpoint replay restores. */
function findCheckpoint(
  source: ReplaySource,
  request: ReplayTaskRequest,
  events: readonly Event[],
): { row: ReplaySource["checkpoints"][number]; index: number; planned: PlannedCheckpoint } {
  const { task } = source;
  if (!request.checkpointId && !request.checkpointEventId) {
    throw invalidRequest(
      "mode from_checkpoint needs checkpoint_id or checkpoint_event_id",
      "checkpoint_id",
    );
  }
  const index = source.checkpoints.findIndex((c) =>
    request.checkpointId ? c.id === request.checkpointId : c.eventId === request.checkpointEventId,
  );
  const row = source.checkpoints[index];
  if (!row) {
    const id = request.checkpointId || request.checkpointEventId;
    if (!request.checkpointId && events.some((e) => e.id === request.checkpointEventId)) {
      throw invalidRequest(
        `event ${request.checkpointEventId} of task ${task.id} is no checkpoint (checkpoints are its task.input_required / task.auth_required events)`,
        "checkpoint_event_id",
      );
    }
    throw replayUnavailable(
      task.id,
      `checkpoint:${id}`,
      `checkpoint ${id} is not among the recorded checkpoints of the task`,
    );
  }
  const label = row.signalId.startsWith(`${task.id}:`)
    ? row.signalId.slice(task.id.length + 1)
    : row.signalId;
  return {
    row,
    index,
    planned: { id: row.id, eventId: row.eventId, label, outputCount: row.outputCount },
  };
}

/** Message events of the source task by message id. */
function messageEvents(events: readonly Event[]): Map<string, Event> {
  const byMessage = new Map<string, Event>();
  for (const event of events) {
    const payload = event.payload?.kind;
    if (payload?.case === "messageAppended" && payload.value.message?.id) {
      byMessage.set(payload.value.message.id, event);
    }
  }
  return byMessage;
}

/**
 * The source task's events in log order. The last ones may still be on their
 * way from the outbox: waits (briefly) until the event of the task's current
 * status is there.
 */
async function sourceEvents(
  deps: ReplayPlannerDeps,
  workspaceId: string,
  sessionId: string,
  taskId: string,
  status: TaskStatus,
): Promise<Event[]> {
  const wanted = settlingKind(status);
  const deadline = Date.now() + (deps.eventWaitMs ?? 3_000);
  for (;;) {
    const events: Event[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await deps.eventLog.read({
        filter: { workspaceId, sessionId, resource: { object: "task", id: taskId } },
        ...(after ? { after: { afterEventId: after } } : {}),
        limit: 1000,
      });
      events.push(...page.map((e) => e.event));
      if (page.length < 1000) break;
      after = page.at(-1)?.event.id;
    }
    if (wanted === undefined || events.some((e) => e.kind === wanted) || Date.now() >= deadline) {
      return events;
    }
    await delay(50);
  }
}

/** The source's memory reads, from its `agent.memory_read` events (Harn replay: memory as it was read). */
function memoryReadsOf(events: readonly Event[]): PlannedMemoryRead[] {
  const reads: PlannedMemoryRead[] = [];
  for (const event of events) {
    if (event.kind !== EVENT_KIND.memoryRead || event.payload?.kind.case !== "data") continue;
    const data = event.payload.kind.value;
    reads.push({
      eventId: event.id,
      toolCallId: typeof data.tool_call_id === "string" ? data.tool_call_id : "",
      scope: typeof data.scope === "string" ? data.scope : "",
      ownerId: typeof data.owner_id === "string" ? data.owner_id : "",
      memories: Array.isArray(data.memories) ? data.memories : [],
    });
  }
  return reads;
}

/** An RFC 3339 date-time (what a `time:` override's value must be). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** Validates the overrides and resolves their material (inline or from an artifact). */
async function readOverrides(
  deps: ReplayPlannerDeps,
  request: ReplayTaskRequest,
  mode: string,
  strategy: string,
  scope: string | undefined,
  sourceTaskId: string,
): Promise<Record<string, StoredOverride>> {
  const entries = Object.entries(request.overrides);
  if (mode === "exact" && entries.length > 0) {
    throw invalidRequest(
      "an exact replay takes no overrides; use mode with_overrides",
      "overrides",
    );
  }
  if (mode === "with_overrides" && entries.length === 0) {
    throw invalidRequest("mode with_overrides needs at least one override", "overrides");
  }
  const out: Record<string, StoredOverride> = {};
  for (const [key, override] of entries) {
    const { family, target } = parseOverrideKey(key);
    if ((family === "llm" || family === "tool") && strategy !== "model") {
      throw invalidRequest(
        `override ${key}: the source's agent records no ${family === "llm" ? "model calls" : "tool results"} a replay could substitute (only built-in harness agents do)`,
        `overrides.${key}`,
      );
    }
    if (family === "llm" && !/^main:[1-9]\d*$/.test(target)) {
      throw invalidRequest(
        `override ${key}: harness model calls are named main:<n> (main:1, main:2, …)`,
        `overrides.${key}`,
      );
    }
    const kind = overrideKind(key, family, override.kind);
    const value = await overrideValue(deps, key, override, scope, sourceTaskId);
    if (family === "llm") overrideResponse(value, key, "");
    if (
      family === "time" &&
      (typeof value !== "string" || !RFC3339.test(value) || Number.isNaN(Date.parse(value)))
    ) {
      throw invalidRequest(
        `override ${key}: a clock reading is an RFC 3339 date-time string (e.g. "2026-11-22T09:30:00Z")`,
        `overrides.${key}.value`,
      );
    }
    if (family === "secret" && typeof value !== "string") {
      throw invalidRequest(`override ${key}: a secret is a string`, `overrides.${key}.value`);
    }
    // The caller may declare the plain hash of its own value; a secret's is
    // only checked, never kept (the fingerprint is).
    const sha256 = sha256Of(value);
    checkDeclaredHash(key, override.sha256, sha256, family === "secret");
    out[key] = {
      family,
      target: override.target || target,
      kind,
      // A secret is kept sealed (tasks.replays holds no plain value): the
      // executor opens it when a re-run tool reads it.
      ...(family === "secret" && typeof value === "string"
        ? {
            value: replaySecretBox(deps.fingerprints).seal(value),
            fingerprint: deps.fingerprints.of(value),
          }
        : { value, sha256 }),
      visibility: VISIBILITY[override.visibility] ?? "receipt_only",
      eventId: override.eventId,
      reason: override.reason || request.reason,
      artifactId: override.artifactId,
    };
  }
  return out;
}

async function overrideValue(
  deps: ReplayPlannerDeps,
  key: string,
  override: ReplayOverride,
  scope: string | undefined,
  sourceTaskId: string,
): Promise<JsonValue> {
  if (override.value !== undefined && override.artifactId !== "") {
    throw invalidRequest(
      `override ${key}: give value or artifact_id, not both`,
      `overrides.${key}.artifact_id`,
    );
  }
  if (override.value !== undefined) return toJson(ValueSchema, override.value);
  if (override.artifactId === "") {
    throw invalidRequest(
      `override ${key} needs a value or an artifact_id`,
      `overrides.${key}.value`,
    );
  }
  let content: { content: Uint8Array; mimeType: string };
  try {
    content = await deps.store.getArtifactContent(override.artifactId, scope);
  } catch (error) {
    if (!isTrellisError(error) || error.reason !== "resource_not_found") throw error;
    throw replayUnavailable(
      sourceTaskId,
      `artifact:${override.artifactId}`,
      `artifact ${override.artifactId} of override ${key} is not available`,
      { override_key: key },
    );
  }
  const text = new TextDecoder().decode(content.content);
  if (!content.mimeType.includes("json")) return text;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    throw invalidRequest(
      `override ${key}: artifact ${override.artifactId} is not valid JSON`,
      `overrides.${key}.artifact_id`,
    );
  }
}
