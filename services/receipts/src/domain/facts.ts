/**
 * What a receipt needs to know about a task, taken from its events one at a
 * time ({@link extractFacts}) and folded together when the task ends
 * ({@link foldTaskFacts}).
 *
 * Facts never hold content: tool inputs and outputs become hashes, failure
 * texts and approval reasons are stripped of secrets, parts an audience may
 * not see leave only redaction descriptors.
 *
 * Events read (Harn v1 "Event taxonomy"; typed payloads where Trellis has
 * them, a `data` payload otherwise):
 *
 * | kind | payload | fact |
 * |---|---|---|
 * | `task.*` | TaskStatusChanged | lifecycle status and time, failure |
 * | `user.message`, `agent.message`, `agent.tool_result`, `session.message_appended` | MessageAppended | message counts, tool calls and results (status and output hash from the harness's `tool:<id>` record), artifact refs |
 * | `user.tool_confirmation` | SignalDelivered `{approved, tool_call_id?, action?, reason?}` | approval |
 * | `agent.tool_use`, `agent.mcp_tool_use`, `tool.requested` | data `{tool_call_id, name, input, server?}` | tool call (an MCP call's `metadata.mcp_server`) |
 * | `tool.completed`, `tool.failed` | data `{tool_call_id, name, status, output}` | tool result |
 * | `agent.model_call` | data `{provider, model, version, reason, alternatives[], call_id, input_tokens, output_tokens, cost_usd}` | model route, cost (priced by the receipt when `cost_usd` is absent) |
 * | `agent.routed` | data `{backend_id, worker_id, attempt, degraded}` | the backend that ran it (the last placement) |
 * | `agent.network_egress` | data `{destination, purpose, bytes_sent}` | network egress |
 * | `agent.file_write` | data `{path, operation, before_sha256, after_sha256}` | file write |
 * | `agent.handoff` | data `{target_agent, task_id, status, receipt_id}` | A2A handoff |
 * | `artifact.created` | data `{artifact_id, kind, uri, sha256}` | final artifact |
 *
 * Pure: no I/O.
 */

import { type JsonValue, toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ActorKind,
  type Event,
  type Message,
  Role,
  TaskStatus,
  ToolResultStatus,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { roleName as wireRoleName } from "@trellis/messages";
import { isJsonObject } from "@trellis/runtime";
import { canonicalJson, isSha256, sha256Of } from "./canonical.js";
import type {
  A2aHandoff,
  ArtifactRef,
  FileWrite,
  ModelRef,
  NetworkEgress,
  ReceiptApproval,
  Sha256,
  ToolCallEffect,
  TrustTier,
} from "./receipt.js";
import { type RedactionDescriptor, redactJson, redactMessage, redactSecrets } from "./redaction.js";
import {
  foldReplay,
  type ReplayFact,
  type ReplaySummary,
  replayFactOfData,
  replayFactOfMarker,
} from "./replay.js";

/** Task status names as the facts store them. */
export type TaskStatusName =
  | "SUBMITTED"
  | "WORKING"
  | "INPUT_REQUIRED"
  | "AUTH_REQUIRED"
  | "COMPLETED"
  | "FAILED"
  | "CANCELED";

const STATUS_NAMES: Partial<Record<TaskStatus, TaskStatusName>> = {
  [TaskStatus.SUBMITTED]: "SUBMITTED",
  [TaskStatus.WORKING]: "WORKING",
  [TaskStatus.INPUT_REQUIRED]: "INPUT_REQUIRED",
  [TaskStatus.AUTH_REQUIRED]: "AUTH_REQUIRED",
  [TaskStatus.COMPLETED]: "COMPLETED",
  [TaskStatus.FAILED]: "FAILED",
  [TaskStatus.CANCELED]: "CANCELED",
};

const TERMINAL_KINDS: Readonly<Record<string, TaskStatusName>> = {
  [EVENT_KIND.taskCompleted]: "COMPLETED",
  [EVENT_KIND.taskFailed]: "FAILED",
  [EVENT_KIND.taskCanceled]: "CANCELED",
};

/** The approval event kind (Harn v1 "User events"). */
export const APPROVAL_EVENT_KIND = EVENT_KIND.toolConfirmation;

/** A tool call seen in a message or a tool event. */
export interface ToolUseFact {
  callId: string;
  tool: string;
  inputHash?: Sha256;
  /** The MCP server of the tool (`agent.mcp_tool_use`). */
  mcpServer?: string;
}

/** A tool result seen in a message or a tool event. */
export interface ToolResultFact {
  callId: string;
  tool?: string;
  status: ToolCallEffect["status"];
  outputHash?: Sha256;
}

/** A model call reported by an adapter (`agent.model_call`). */
export interface ModelCallFact {
  chosen: ModelRef;
  alternatives: ModelRef[];
  reason?: string;
  /** The adapter's id of the call (`main:1`, …), when it gave one. */
  callId?: string;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  /**
   * Whether the adapter reported the cost (`cost_usd`); false: the receipt
   * prices the tokens (`domain/pricing.ts`). Facts stored before this field
   * existed count as reported.
   */
  costReported?: boolean;
}

/** An approval decision (`user.tool_confirmation`). */
export interface ApprovalFact {
  signalId: string;
  decision: ReceiptApproval["decision"];
  action: string;
  toolCallId?: string;
}

/** What one event contributes (JSON; stored per event). */
export interface EventFacts {
  kind: string;
  /** RFC 3339 UTC time of the event. */
  at: string;
  /** True when the event is on the task's own stream (resource = the task). */
  onTaskStream: boolean;
  /** Per-resource sequence (meaningful when {@link onTaskStream}). */
  sequence: number;
  actor?: { id: string; kind: string };
  status?: TaskStatusName;
  failure?: Record<string, JsonValue>;
  role?: string;
  toolUses?: ToolUseFact[];
  toolResults?: ToolResultFact[];
  artifactIds?: string[];
  approval?: ApprovalFact;
  modelCall?: ModelCallFact;
  egress?: NetworkEgress;
  fsWrite?: FileWrite;
  handoff?: A2aHandoff;
  artifact?: ArtifactRef;
  traceId?: string;
  branchId?: string;
  /** The agent's autonomy tier when this event was recorded (set at task start). */
  agentTier?: TrustTier;
  /** The task's agent, as a status event names it (submitted, started). */
  agentId?: string;
  /** The backend the router placed the run on (`agent.routed`). */
  backend?: string;
  /** What the event says about the replay its task is (replay tasks only). */
  replay?: ReplayFact;
  redactions?: RedactionDescriptor[];
}

/** The task an event is about: its `task_id`, else its resource when that is a task. */
export function taskIdOf(event: Event): string | undefined {
  if (event.taskId) return event.taskId;
  if (event.resource?.object === "task" && event.resource.id) return event.resource.id;
  return undefined;
}

/** The terminal status an event announces (`task.completed` → COMPLETED), if any. */
export function terminalStatusOf(event: Event): TaskStatusName | undefined {
  const byKind = TERMINAL_KINDS[event.kind];
  if (!byKind) return undefined;
  const payload = event.payload?.kind;
  if (payload?.case === "taskStatusChanged") {
    const status = STATUS_NAMES[payload.value.status];
    if (status && status !== byKind) return undefined;
  }
  return byKind;
}

function iso(event: Event): string {
  return (event.createdAt ? timestampDate(event.createdAt) : new Date(0)).toISOString();
}

function actorKindName(kind: ActorKind): string {
  switch (kind) {
    case ActorKind.USER:
      return "user";
    case ActorKind.AGENT:
      return "agent";
    case ActorKind.SERVICE:
      return "service";
    case ActorKind.CONNECTOR:
      return "connector";
    case ActorKind.SYSTEM:
      return "system";
    default:
      return "unspecified";
  }
}

/** The wire name of a role, "unspecified" when unset. */
function roleName(role: Role): string {
  return wireRoleName(role) || "unspecified";
}

function hashJson(value: JsonValue | undefined): Sha256 | undefined {
  if (value === undefined) return undefined;
  return sha256Of(canonicalJson(value));
}

function toolStatusOf(status: ToolResultStatus): ToolCallEffect["status"] {
  switch (status) {
    case ToolResultStatus.ERROR:
    case ToolResultStatus.TIMEOUT:
      return "failed";
    case ToolResultStatus.DENIED:
    case ToolResultStatus.INTERRUPTED:
      return "canceled";
    default:
      return "succeeded";
  }
}

function toolStatusFromText(text: string, fallback: ToolCallEffect["status"]) {
  switch (text.toLowerCase()) {
    case "ok":
    case "success":
    case "succeeded":
    case "completed":
      return "succeeded";
    case "error":
    case "failed":
    case "failure":
    case "timeout":
      return "failed";
    case "denied":
    case "canceled":
    case "cancelled":
    case "interrupted":
      return "canceled";
    default:
      return fallback;
  }
}

type JsonObject = { [key: string]: JsonValue };

function str(data: JsonObject, ...keys: string[]): string {
  for (const key of keys) {
    const value = data[key];
    if (typeof value === "string" && value !== "") return value;
  }
  return "";
}

function num(data: JsonObject, ...keys: string[]): number {
  for (const key of keys) {
    const value = data[key];
    if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value;
  }
  return 0;
}

function int(data: JsonObject, ...keys: string[]): number {
  return Math.floor(num(data, ...keys));
}

function clean(text: string, field: string, redactions: RedactionDescriptor[]): string {
  const result = redactSecrets(text, field);
  redactions.push(...result.redactions);
  return result.text;
}

/**
 * What the built-in harness recorded about a tool call in its tool message's
 * metadata (`tool:<id>` → `{kind: "tool_result", name, status, output,
 * output_sha256}`): the result's status and the output's hash, never the
 * output.
 */
function toolRecordOf(
  message: Message,
  callId: string,
): Pick<ToolResultFact, "status" | "outputHash" | "tool"> | undefined {
  const record = message.metadata?.[`tool:${callId}`];
  if (!isJsonObject(record) || record.kind !== "tool_result") return undefined;
  const stated = str(record, "status");
  // A call the harness refused (bad input) never ran: it failed; a denied one was canceled.
  const status = stated === "rejected" ? "failed" : toolStatusFromText(stated, "succeeded");
  const declared = record.output_sha256;
  const outputHash = isSha256(declared)
    ? declared
    : record.output !== undefined
      ? hashJson(record.output)
      : undefined;
  const tool = str(record, "name");
  return { status, ...(outputHash ? { outputHash } : {}), ...(tool ? { tool } : {}) };
}

function messageFacts(message: Message, facts: EventFacts, redactions: RedactionDescriptor[]) {
  // Receipts are summaries: only what the message did is kept, never its text.
  const visible = redactMessage(message, { allowReceiptOnly: true }, "/message");
  redactions.push(...visible.redactions.filter((r) => r.kind !== "secret_field"));
  facts.role = roleName(message.role);
  const uses: ToolUseFact[] = [];
  const results: ToolResultFact[] = [];
  const artifacts: string[] = [];
  for (const call of message.toolCalls) {
    if (!call.id) continue;
    uses.push({
      callId: call.id,
      tool: call.name || "unknown",
      ...(call.arguments ? { inputHash: hashJson(toJson(ValueSchema, call.arguments)) } : {}),
    });
  }
  for (const part of visible.message.parts) {
    const kind = part.kind;
    if (kind.case === "toolCall" && kind.value.toolCallId) {
      uses.push({
        callId: kind.value.toolCallId,
        tool: kind.value.name || "unknown",
        ...(kind.value.input ? { inputHash: hashJson(toJson(ValueSchema, kind.value.input)) } : {}),
      });
    } else if (kind.case === "toolResult" && kind.value.toolCallId) {
      results.push({
        callId: kind.value.toolCallId,
        status: toolStatusOf(kind.value.status),
        ...(kind.value.output
          ? { outputHash: hashJson(toJson(ValueSchema, kind.value.output)) }
          : {}),
      });
    } else if ((kind.case === "artifactRef" || kind.case === "imageRef") && kind.value.artifactId) {
      artifacts.push(kind.value.artifactId);
    }
  }
  // A TOOL message answers one call even without a tool_result part; the
  // harness's record of it (`tool:<id>`) says how it went and hashes its output.
  if (message.role === Role.TOOL && message.toolCallId) {
    const record = toolRecordOf(message, message.toolCallId);
    const existing = results.find((r) => r.callId === message.toolCallId);
    if (existing && record) {
      existing.status = record.status;
      if (record.outputHash) existing.outputHash ??= record.outputHash;
    } else if (!existing) {
      results.push({ callId: message.toolCallId, status: "succeeded", ...record });
    }
  }
  const replay = replayFactOfMarker(message.metadata?.replay, (t, f) => clean(t, f, redactions));
  if (replay) facts.replay = replay;
  if (uses.length) facts.toolUses = uses;
  if (results.length) facts.toolResults = results;
  if (artifacts.length) facts.artifactIds = artifacts;
}

function approvalFacts(
  signalId: string,
  payload: JsonValue | undefined,
  redactions: RedactionDescriptor[],
): ApprovalFact {
  const data = isJsonObject(payload) ? payload : {};
  let decision: ApprovalFact["decision"] = "denied";
  const stated = str(data, "decision").toLowerCase();
  if (
    stated === "approved" ||
    stated === "denied" ||
    stated === "canceled" ||
    stated === "timeout"
  ) {
    decision = stated;
  } else if (data.approved === true) {
    decision = "approved";
  } else if (data.timeout === true || data.timed_out === true) {
    decision = "timeout";
  } else if (data.canceled === true || data.cancelled === true) {
    decision = "canceled";
  }
  const toolCallId = str(data, "tool_call_id", "toolCallId");
  const action =
    str(data, "action", "tool_name", "tool", "name") ||
    (toolCallId ? `tool_call:${toolCallId}` : "tool_confirmation");
  return {
    signalId,
    decision,
    action: clean(action, "/approval/action", redactions),
    ...(toolCallId ? { toolCallId } : {}),
  };
}

function modelRef(data: JsonObject): ModelRef | undefined {
  const provider = str(data, "provider");
  const model = str(data, "model");
  if (!provider || !model) return undefined;
  const version = str(data, "version");
  const reason = str(data, "reason");
  return { provider, model, ...(version ? { version } : {}), ...(reason ? { reason } : {}) };
}

function dataFacts(event: Event, data: JsonObject, facts: EventFacts, r: RedactionDescriptor[]) {
  switch (event.kind) {
    case EVENT_KIND.toolUse:
    case EVENT_KIND.mcpToolUse:
    case EVENT_KIND.toolRequested: {
      const callId = str(data, "tool_call_id", "toolCallId", "call_id", "id");
      if (callId) {
        const input = data.input ?? data.arguments;
        const server = event.kind === EVENT_KIND.mcpToolUse ? str(data, "server") : "";
        facts.toolUses = [
          {
            callId,
            tool: str(data, "name", "tool_name", "tool") || "unknown",
            ...(input !== undefined ? { inputHash: hashJson(input) } : {}),
            ...(server ? { mcpServer: server } : {}),
          },
        ];
      }
      return;
    }
    case EVENT_KIND.toolCompleted:
    case EVENT_KIND.toolFailed:
    case EVENT_KIND.toolResult: {
      const callId = str(data, "tool_call_id", "toolCallId", "call_id", "id");
      if (callId) {
        const output = data.output ?? data.result;
        const tool = str(data, "name", "tool_name", "tool");
        facts.toolResults = [
          {
            callId,
            ...(tool ? { tool } : {}),
            status: toolStatusFromText(
              str(data, "status"),
              event.kind === EVENT_KIND.toolFailed ? "failed" : "succeeded",
            ),
            ...(output !== undefined ? { outputHash: hashJson(output) } : {}),
          },
        ];
      }
      return;
    }
    case EVENT_KIND.modelCall: {
      const chosen = modelRef(data);
      if (!chosen) return;
      const alternatives = Array.isArray(data.alternatives)
        ? data.alternatives.flatMap((a) => {
            const ref = isJsonObject(a) ? modelRef(a) : undefined;
            return ref ? [ref] : [];
          })
        : [];
      // The top-level reason is the route's, not the chosen model's.
      const { reason: _reason, ...chosenModel } = chosen;
      const reason = str(data, "route_policy_reason", "reason");
      const callId = str(data, "call_id");
      const reported = [data.cost_usd, data.cost].some(
        (v) => typeof v === "number" && Number.isFinite(v) && v >= 0,
      );
      facts.modelCall = {
        chosen: chosenModel,
        alternatives,
        ...(reason ? { reason: clean(reason, "/model_route/reason", r) } : {}),
        ...(callId ? { callId } : {}),
        inputTokens: int(data, "input_tokens"),
        outputTokens: int(data, "output_tokens"),
        costUsd: num(data, "cost_usd", "cost"),
        costReported: reported,
      };
      return;
    }
    case EVENT_KIND.routed: {
      const backend = str(data, "backend_id");
      if (backend) facts.backend = backend;
      return;
    }
    case EVENT_KIND.networkEgress: {
      const destination = str(data, "destination", "host", "url");
      if (!destination) return;
      const bytes = data.bytes_sent;
      facts.egress = {
        destination: clean(destination, "/network_egress/destination", r),
        purpose: clean(str(data, "purpose") || "unspecified", "/network_egress/purpose", r),
        ...(typeof bytes === "number" && Number.isInteger(bytes) && bytes >= 0
          ? { bytes_sent: bytes }
          : {}),
      };
      return;
    }
    case EVENT_KIND.fileWrite: {
      const path = str(data, "path");
      const operation = str(data, "operation");
      if (!path) return;
      const before = data.before_sha256;
      const after = data.after_sha256;
      facts.fsWrite = {
        path: clean(path, "/fs_writes/path", r),
        operation:
          operation === "create" || operation === "delete" || operation === "rename"
            ? operation
            : "modify",
        ...(isSha256(before) ? { before_sha256: before } : {}),
        ...(isSha256(after) ? { after_sha256: after } : {}),
      };
      return;
    }
    case EVENT_KIND.handoff: {
      const target = str(data, "target_agent", "agent_id");
      const taskId = str(data, "task_id");
      if (!target || !taskId) return;
      const status = str(data, "status");
      const receiptId = str(data, "receipt_id");
      facts.handoff = {
        target_agent: target,
        task_id: taskId,
        status:
          status === "rejected" || status === "failed" || status === "completed"
            ? status
            : "accepted",
        ...(receiptId ? { receipt_id: receiptId } : {}),
      };
      return;
    }
    case EVENT_KIND.artifactCreated: {
      const id = str(data, "artifact_id", "id");
      if (!id) return;
      const uri = str(data, "uri");
      const sha = data.sha256;
      facts.artifact = {
        artifact_id: id,
        kind: str(data, "kind") || "other",
        ...(uri ? { uri: clean(uri, "/final_artifacts/uri", r) } : {}),
        ...(isSha256(sha) ? { sha256: sha } : {}),
      };
      return;
    }
    default:
      return;
  }
}

/**
 * The facts one event of a task contributes. `taskId` is the task it is
 * about ({@link taskIdOf}).
 */
export function extractFacts(event: Event, taskId: string): EventFacts {
  const redactions: RedactionDescriptor[] = [];
  const onTaskStream = event.resource?.object === "task" && event.resource.id === taskId;
  const facts: EventFacts = {
    kind: event.kind,
    at: iso(event),
    onTaskStream,
    sequence: onTaskStream ? Number(event.sequence) : 0,
  };
  if (event.actor?.id) facts.actor = { id: event.actor.id, kind: actorKindName(event.actor.kind) };
  if (event.traceId) facts.traceId = event.traceId;
  const payload = event.payload?.kind;
  switch (payload?.case) {
    case "taskStatusChanged": {
      const status = STATUS_NAMES[payload.value.status];
      if (status) facts.status = status;
      if (payload.value.agentId) facts.agentId = payload.value.agentId;
      const failure = payload.value.failure;
      if (failure) {
        const cleaned = redactJson(
          {
            reason: failure.reason,
            ...(failure.domain ? { domain: failure.domain } : {}),
            ...(failure.param ? { param: failure.param } : {}),
            ...(Object.keys(failure.metadata).length ? { metadata: { ...failure.metadata } } : {}),
            ...(payload.value.reason ? { message: payload.value.reason } : {}),
          },
          "/lifecycle/failure",
        );
        redactions.push(...cleaned.redactions);
        facts.failure = cleaned.value as Record<string, JsonValue>;
      }
      break;
    }
    case "messageAppended":
      if (payload.value.message) messageFacts(payload.value.message, facts, redactions);
      break;
    case "signalDelivered":
      if (event.kind === APPROVAL_EVENT_KIND) {
        facts.approval = approvalFacts(
          payload.value.signalId,
          payload.value.payload ? toJson(ValueSchema, payload.value.payload) : undefined,
          redactions,
        );
      }
      break;
    case "data": {
      const data = payload.value;
      dataFacts(event, data, facts, redactions);
      const replay = replayFactOfData(event.kind, data, (t, f) => clean(t, f, redactions));
      if (replay) facts.replay = replay;
      const branch = str(data, "branch_id");
      if (branch) facts.branchId = branch;
      break;
    }
    default:
      break;
  }
  if (redactions.length) facts.redactions = redactions;
  return facts;
}

/** Everything known about a task when its receipt is built. */
export interface TaskSummary {
  taskId: string;
  /** Agent id: as its status events name it, else the first AGENT actor of its events. */
  agentId?: string;
  /**
   * The backend that ran it when the router recorded a placement (another
   * backend than the agent's, a remote worker, a retry): the last one.
   */
  backend?: string;
  /** The agent's autonomy tier recorded when the task started. */
  startTier?: TrustTier;
  createdAt?: string;
  startedAt?: string;
  /** Time of the terminal event. */
  completedAt?: string;
  status?: TaskStatusName;
  failure?: Record<string, JsonValue>;
  traceId?: string;
  branchId?: string;
  messages: Record<string, number>;
  toolCalls: ToolCallEffect[];
  approvals: (ReceiptApproval & { eventId: string })[];
  modelCalls: ModelCallFact[];
  egress: NetworkEgress[];
  fsWrites: FileWrite[];
  handoffs: A2aHandoff[];
  artifacts: ArtifactRef[];
  redactions: RedactionDescriptor[];
  /** The replay this task is (undefined for a task that is no replay). */
  replay?: ReplaySummary;
  /** Sequences of the task-stream events seen, ascending. */
  sequences: number[];
  /** Hashes of the task-stream events in sequence order (for the Merkle root). */
  streamHashes: Sha256[];
  /** Number of events folded (task stream and others). */
  events: number;
}

/** A stored event of a task: its id, hash and facts. */
export interface TaskEventRecord {
  eventId: string;
  eventHash: Sha256;
  facts: EventFacts;
}

/**
 * Folds a task's events (in log order) into a {@link TaskSummary}. Tool
 * calls are paired with their results by call id; a call with no result by
 * the end counts as `canceled` (it never returned). With `throughSequence`,
 * task-stream events after that sequence (recorded after the task ended)
 * are left out.
 */
export function foldTaskFacts(
  taskId: string,
  all: readonly TaskEventRecord[],
  options: { throughSequence?: number } = {},
): TaskSummary {
  const through = options.throughSequence;
  const records =
    through === undefined
      ? all
      : all.filter((r) => !r.facts.onTaskStream || r.facts.sequence <= through);
  const summary: TaskSummary = {
    taskId,
    messages: {},
    toolCalls: [],
    approvals: [],
    modelCalls: [],
    egress: [],
    fsWrites: [],
    handoffs: [],
    artifacts: [],
    redactions: [],
    sequences: [],
    streamHashes: [],
    events: records.length,
  };
  const calls = new Map<string, ToolCallEffect>();
  const onStream = records
    .filter((r) => r.facts.onTaskStream)
    .sort((a, b) => a.facts.sequence - b.facts.sequence);
  for (const record of onStream) {
    summary.sequences.push(record.facts.sequence);
    summary.streamHashes.push(record.eventHash);
  }
  const seenArtifacts = new Set<string>();
  for (const { eventId, eventHash, facts } of records) {
    if (!summary.agentId && facts.agentId) summary.agentId = facts.agentId;
    if (!summary.agentId && facts.actor?.kind === "agent") summary.agentId = facts.actor.id;
    if (!summary.traceId && facts.traceId) summary.traceId = facts.traceId;
    if (!summary.startTier && facts.agentTier) summary.startTier = facts.agentTier;
    if (!summary.branchId && facts.branchId) summary.branchId = facts.branchId;
    // A retried run may move: the last placement is the one that ran it.
    if (facts.backend) summary.backend = facts.backend;
    switch (facts.status) {
      case "SUBMITTED":
        summary.createdAt ??= facts.at;
        break;
      case "WORKING":
        summary.startedAt ??= facts.at;
        break;
      default:
        break;
    }
    if (TERMINAL_KINDS[facts.kind] && facts.status === TERMINAL_KINDS[facts.kind]) {
      summary.status = facts.status;
      summary.completedAt = facts.at;
      if (facts.failure) summary.failure = facts.failure;
    }
    if (facts.role) summary.messages[facts.role] = (summary.messages[facts.role] ?? 0) + 1;
    for (const use of facts.toolUses ?? []) {
      const existing = calls.get(use.callId);
      if (existing) {
        if (use.inputHash && !existing.input_hash) existing.input_hash = use.inputHash;
        if (use.mcpServer) existing.metadata = { ...existing.metadata, mcp_server: use.mcpServer };
        continue;
      }
      const call: ToolCallEffect = {
        tool: use.tool,
        call_id: use.callId,
        status: "canceled",
        ...(use.inputHash ? { input_hash: use.inputHash } : {}),
        ...(use.mcpServer ? { metadata: { mcp_server: use.mcpServer } } : {}),
      };
      calls.set(use.callId, call);
      summary.toolCalls.push(call);
    }
    for (const result of facts.toolResults ?? []) {
      let call = calls.get(result.callId);
      if (!call) {
        call = { tool: result.tool ?? "unknown", call_id: result.callId, status: result.status };
        calls.set(result.callId, call);
        summary.toolCalls.push(call);
      }
      call.status = result.status;
      if (result.outputHash) call.output_hash = result.outputHash;
    }
    if (facts.approval) {
      summary.approvals.push({
        eventId,
        approval_id: facts.approval.signalId || eventId,
        actor: facts.actor?.id ?? "unknown",
        action: facts.approval.action,
        decision: facts.approval.decision,
        decided_at: facts.at,
        evidence_hash: eventHash,
      });
    }
    if (facts.modelCall) summary.modelCalls.push(facts.modelCall);
    if (facts.egress) summary.egress.push(facts.egress);
    if (facts.fsWrite) summary.fsWrites.push(facts.fsWrite);
    if (facts.handoff) summary.handoffs.push(facts.handoff);
    if (facts.artifact && !seenArtifacts.has(facts.artifact.artifact_id)) {
      seenArtifacts.add(facts.artifact.artifact_id);
      summary.artifacts.push(facts.artifact);
    }
    for (const id of facts.artifactIds ?? []) {
      if (seenArtifacts.has(id)) continue;
      seenArtifacts.add(id);
      summary.artifacts.push({ artifact_id: id, kind: "other" });
    }
    summary.redactions.push(...(facts.redactions ?? []));
  }
  const replay = foldReplay(records.map((r) => r.facts.replay));
  if (replay) summary.replay = replay;
  return summary;
}

/**
 * Whether the task's own stream was seen without gaps: sequences 1…n with
 * the terminal event last. Events can arrive out of order after a
 * redelivery; a receipt built from a gapped stream would miss facts.
 */
export function streamIsComplete(summary: TaskSummary): boolean {
  const seq = summary.sequences;
  if (seq.length === 0) return false;
  for (let i = 0; i < seq.length; i++) if (seq[i] !== i + 1) return false;
  return true;
}
