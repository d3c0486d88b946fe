/**
 * The UI event projection: canonical log events of one session in, frontend
 * contract envelopes out (spec `003`, "Canonical Event Inventory").
 *
 * Pure and deterministic: the output depends only on the events, in log
 * order, and on the session's lineage (parent and fork point, fixed when the
 * session is created). Projecting a session's log from its first event gives
 * the same envelopes whether the events arrive live or are replayed later,
 * which is what makes cursor resume exact. Timing (`elapsed_ms`) comes from
 * the events' own timestamps, never from the clock.
 *
 * What maps to what:
 *
 * | log event | envelopes |
 * |---|---|
 * | `session.created` / `closed` / `truncated` | `session_state` |
 * | `session.thread_forked` | `session_state` + `session_checkpoint` (`resume_seed`) |
 * | `task.submitted` / `task.status_changed` | `session_state` |
 * | `task.started` (first of a task) | `turn_start` (debug) + `session_state` |
 * | `task.input_required` / `auth_required` | `session_state` + `approval_required` |
 * | `task.completed` | `completed` + `turn_end` + `session_state` |
 * | `task.failed` / `task.canceled` | `error` + `turn_end` + `session_state` |
 * | `user.tool_confirmation` / `input_submitted` / `cancel_requested` | `approval_applied` (when one is pending); a denial also ends the gated call: `tool_outcome` `denied` |
 * | `agent.message` | `response` (text), `tool_call` (each call) |
 * | tool-role message (`agent.tool_result`, `session.message_appended`) | `tool_result` (success) + `tool_outcome` |
 * | `user.message`, system messages | `message` |
 * | `agent.text_delta` / `agent.token` | `token` |
 * | `agent.thinking_delta` / `agent.thinking` | `thinking` |
 * | `agent.tool_use`, `agent.mcp_tool_use`, `tool.completed` / `tool.failed` | `tool_call`, `tool_outcome` |
 * | `agent.model_call` | `usage` (debug) |
 * | `context.warning` / `context.compacted` (tasks' compactor) | `context_warning` / `context_compacted` |
 * | `artifact.created` | `artifact` |
 * | `receipt.issued` | `receipt` |
 * | anything else | `raw_event` (debug) |
 *
 * Tool events always carry `tool_call_id` (and `task_id`): two calls of the
 * same tool stay apart, and each call gets at most one `tool_call` and one
 * `tool_outcome` even when a backend reports it both as progress and in a
 * message.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import {
  type Event,
  type Message,
  Role,
  TaskStatus,
  ToolResultStatus,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { timestampJson, valueJson } from "../../domain/harn-json.js";
import type { ProjectedEnvelope } from "./envelopes.js";

/** The lineage of a forked session (from its Session; fixed at creation). */
export interface SessionLineage {
  parentSessionId: string;
  /** The parent's event the fork was taken at. */
  forkedFromEventId: string;
}

/** Options of {@link UiProjector}. */
export interface UiProjectorOptions {
  sessionId: string;
  lineage?: SessionLineage;
}

/** Terminal status of a tool call in the contract (`tool_outcome.status`). */
export type ToolOutcomeStatus = "ok" | "timeout" | "error" | "denied" | "artifact";

interface ToolCallState {
  taskId: string;
  name: string;
  startedAtMs: number | undefined;
  settled: boolean;
}

interface TaskState {
  firstStartMs: number | undefined;
  awaiting: boolean;
}

// Longest rendered tool result text in the default tier.
const RESULT_PREVIEW_CHARS = 2000;

function eventMs(event: Event): number | undefined {
  return event.createdAt ? Number(timestampMs(event.createdAt)) : undefined;
}

function elapsed(from: number | undefined, to: number | undefined): number | null {
  if (from === undefined || to === undefined) return null;
  return Math.max(0, to - from);
}

function textOf(message: Message): string {
  return message.parts.map((p) => (p.kind.case === "text" ? p.kind.value.text : "")).join("");
}

function dataOf(event: Event): JsonObject {
  const payload = event.payload?.kind;
  return payload?.case === "data" ? payload.value : {};
}

function str(data: JsonObject, ...names: string[]): string {
  for (const name of names) {
    const value: JsonValue | undefined = data[name];
    if (typeof value === "string" && value !== "") return value;
  }
  return "";
}

function num(data: JsonObject, ...names: string[]): number | null {
  for (const name of names) {
    const value: JsonValue | undefined = data[name];
    if (typeof value === "number" && Number.isFinite(value)) return value;
    if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) {
      return Number(value);
    }
  }
  return null;
}

function preview(value: JsonValue): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > RESULT_PREVIEW_CHARS ? `${text.slice(0, RESULT_PREVIEW_CHARS)}…` : text;
}

const toolStatusNames: Record<string, ToolOutcomeStatus> = {
  ok: "ok",
  success: "ok",
  succeeded: "ok",
  error: "error",
  failed: "error",
  interrupted: "error",
  denied: "denied",
  timeout: "timeout",
  artifact: "artifact",
};

function toolStatusOf(status: ToolResultStatus): ToolOutcomeStatus {
  switch (status) {
    case ToolResultStatus.ERROR:
    case ToolResultStatus.INTERRUPTED:
      return "error";
    case ToolResultStatus.DENIED:
      return "denied";
    case ToolResultStatus.TIMEOUT:
      return "timeout";
    default:
      return "ok";
  }
}

/** Projects one session's events, in log order, into UI envelopes. */
export class UiProjector {
  readonly #sessionId: string;
  readonly #lineage: SessionLineage | undefined;
  readonly #tasks = new Map<string, TaskState>();
  // Keyed by `<task id> <tool call id>`: ids only need to be unique per turn.
  readonly #calls = new Map<string, ToolCallState>();
  // Latest call key per tool call id, for results that name no task.
  readonly #latestCall = new Map<string, string>();

  constructor(options: UiProjectorOptions) {
    this.#sessionId = options.sessionId;
    this.#lineage = options.lineage;
  }

  /** The envelopes `event` projects to (every tier; apply the tier when sending). */
  project(event: Event): ProjectedEnvelope[] {
    const out: ProjectedEnvelope[] = [];
    const emit = (type: ProjectedEnvelope["type"], payload: JsonObject, debug?: JsonObject) => {
      out.push({
        type,
        payload,
        debug: { ...debug, source_event_id: event.id, source_event_kind: event.kind },
      });
    };
    const payload = event.payload?.kind;
    switch (payload?.case) {
      case "sessionStateChanged":
        this.#session(event, emit);
        break;
      case "taskStatusChanged":
        this.#task(event, payload.value.status, emit);
        break;
      case "signalDelivered":
        this.#signal(event, payload.value.signalId, valueJson(payload.value.payload), emit);
        break;
      case "messageAppended":
        if (payload.value.message) {
          this.#message(event, payload.value.message, Number(payload.value.position), emit);
        }
        break;
      default:
        this.#data(event, dataOf(event), emit);
    }
    return out;
  }

  #state(status: string, event: Event, extra: JsonObject = {}): JsonObject {
    return {
      session_id: this.#sessionId,
      status,
      ...extra,
      updated_at: timestampJson(event.createdAt),
    };
  }

  #session(event: Event, emit: Emit): void {
    const reason = this.#reasonOf(event);
    switch (event.kind) {
      case EVENT_KIND.sessionCreated:
        emit("session_state", this.#state("active", event, { transition: "created", reason }));
        return;
      case EVENT_KIND.sessionClosed:
        emit(
          "session_state",
          this.#state("closed", event, {
            transition: "closed",
            reason,
            ended_at: timestampJson(event.createdAt),
          }),
        );
        return;
      case EVENT_KIND.sessionTruncated:
        emit("session_state", this.#state("active", event, { transition: "truncated", reason }));
        return;
      case EVENT_KIND.threadForked: {
        const parent = this.#lineage?.parentSessionId ?? "";
        const from = this.#lineage?.forkedFromEventId ?? "";
        emit(
          "session_state",
          this.#state("active", event, {
            transition: "forked",
            reason,
            parent_session_id: parent || null,
            branch_source_event_id: from || null,
            branch_resume_cursor: from || null,
          }),
        );
        // The branch is seeded with its parent's history up to the fork point:
        // a client renders it from the parent's stream, `until` that event.
        emit("session_checkpoint", {
          session_id: this.#sessionId,
          sequence: Number(event.sequence),
          checkpoint_type: "resume_seed",
          status: "completed",
          summary_text: reason ?? "",
          parent_session_id: parent || null,
          resume_cursor: from || null,
        });
        return;
      }
      default:
        emit("raw_event", { kind: event.kind }, { data: this.#rawPayload(event) });
    }
  }

  #task(event: Event, status: TaskStatus, emit: Emit): void {
    const taskId = event.taskId || event.resource?.id || "";
    const task = this.#taskState(taskId);
    const at = eventMs(event);
    const reason = this.#reasonOf(event);
    if (event.kind === EVENT_KIND.taskStatusChanged) {
      emit("session_state", this.#state("recovering", event, { task_id: taskId, reason }));
      return;
    }
    switch (status) {
      case TaskStatus.SUBMITTED:
        emit("session_state", this.#state("queued", event, { task_id: taskId }));
        return;
      case TaskStatus.WORKING:
        if (task.firstStartMs === undefined) {
          task.firstStartMs = at ?? 0;
          emit("turn_start", { turn_id: taskId, task_id: taskId });
        }
        emit("session_state", this.#state("running", event, { task_id: taskId }));
        return;
      case TaskStatus.INPUT_REQUIRED:
      case TaskStatus.AUTH_REQUIRED: {
        const kind = status === TaskStatus.AUTH_REQUIRED ? "auth" : "input";
        task.awaiting = true;
        emit(
          "session_state",
          this.#state(kind === "auth" ? "awaiting_auth" : "awaiting_approval", event, {
            task_id: taskId,
            approval_request_id: taskId,
          }),
        );
        // A turn that stops right after calling a tool is waiting to run it.
        const gated = this.#openCallOf(taskId);
        emit("approval_required", {
          request_id: taskId,
          task_id: taskId,
          kind,
          reason: reason ?? "",
          tool_call_id: gated?.toolCallId ?? null,
          tool_name: gated?.name || null,
        });
        return;
      }
      case TaskStatus.COMPLETED:
      case TaskStatus.FAILED:
      case TaskStatus.CANCELED: {
        task.awaiting = false;
        const outcome =
          status === TaskStatus.COMPLETED
            ? "completed"
            : status === TaskStatus.FAILED
              ? "failed"
              : "canceled";
        if (status !== TaskStatus.COMPLETED) this.#settleOpenCalls(taskId, at, outcome, emit);
        if (status === TaskStatus.COMPLETED) {
          emit("completed", { turn_id: taskId, task_id: taskId });
        } else {
          const failure = event.payload?.kind;
          const detail = failure?.case === "taskStatusChanged" ? failure.value.failure : undefined;
          emit("error", {
            turn_id: taskId,
            task_id: taskId,
            code:
              status === TaskStatus.CANCELED ? "turn_canceled" : detail?.reason || "turn_failed",
            message: reason ?? "",
            retryable: status === TaskStatus.CANCELED,
          });
        }
        emit("turn_end", {
          turn_id: taskId,
          task_id: taskId,
          status: outcome,
          elapsed_ms: elapsed(task.firstStartMs, at),
        });
        emit("session_state", this.#state("idle", event, { task_id: taskId }));
        return;
      }
      default:
        emit("raw_event", { kind: event.kind }, { data: this.#rawPayload(event) });
    }
  }

  #signal(event: Event, signalId: string, payload: JsonValue, emit: Emit): void {
    const taskId = event.taskId || event.resource?.id || "";
    const task = this.#taskState(taskId);
    if (!task.awaiting) {
      // A signal that answered no pending request (e.g. a cancel of a running turn).
      emit("raw_event", { kind: event.kind, task_id: taskId }, { data: payload });
      return;
    }
    task.awaiting = false;
    const approved =
      typeof payload === "object" && payload !== null && !Array.isArray(payload)
        ? payload.approved
        : undefined;
    const decision =
      event.kind === EVENT_KIND.cancelRequested
        ? "canceled"
        : event.kind === EVENT_KIND.toolConfirmation
          ? approved === true
            ? "approved"
            : "denied"
          : "answered";
    emit(
      "approval_applied",
      { request_id: taskId, task_id: taskId, signal_id: signalId, decision },
      { signal_payload: payload },
    );
    // A denied approval is the terminal outcome of the tool call it gated.
    const gated = decision === "denied" ? this.#openCallOf(taskId) : undefined;
    if (gated) {
      this.#toolResult(
        taskId,
        gated.toolCallId,
        gated.name,
        "denied",
        null,
        "",
        eventMs(event),
        emit,
      );
    }
  }

  #message(event: Event, message: Message, position: number, emit: Emit): void {
    const taskId = event.taskId;
    const at = eventMs(event);
    switch (message.role) {
      case Role.ASSISTANT:
      case Role.AGENT: {
        const text = textOf(message);
        const artifacts = message.parts.flatMap((p) =>
          p.kind.case === "artifactRef" ? [p.kind.value.artifactId] : [],
        );
        if (text !== "" || artifacts.length > 0) {
          emit("response", {
            message_id: message.id,
            task_id: taskId || null,
            position,
            text,
            ...(artifacts.length > 0 ? { artifact_ids: artifacts } : {}),
          });
        }
        const seen = new Set<string>();
        for (const part of message.parts) {
          if (part.kind.case !== "toolCall") continue;
          const call = part.kind.value;
          seen.add(call.toolCallId);
          this.#toolCall(taskId, call.toolCallId, call.name, valueJson(call.input), at, emit);
        }
        for (const call of message.toolCalls) {
          if (seen.has(call.id)) continue;
          seen.add(call.id);
          this.#toolCall(taskId, call.id, call.name, valueJson(call.arguments), at, emit);
        }
        return;
      }
      case Role.TOOL: {
        let answered = false;
        const artifact = message.parts.some((p) => p.kind.case === "artifactRef");
        for (const part of message.parts) {
          if (part.kind.case !== "toolResult") continue;
          answered = true;
          const result = part.kind.value;
          const status = toolStatusOf(result.status);
          this.#toolResult(
            taskId,
            result.toolCallId,
            "",
            status === "ok" && artifact ? "artifact" : status,
            valueJson(result.output),
            message.id,
            at,
            emit,
          );
        }
        if (!answered && message.toolCallId !== "") {
          this.#toolResult(
            taskId,
            message.toolCallId,
            message.name,
            artifact ? "artifact" : "ok",
            textOf(message),
            message.id,
            at,
            emit,
          );
        }
        if (!answered && message.toolCallId === "") {
          emit("message", this.#plainMessage(message, taskId, position, "tool"));
        }
        return;
      }
      case Role.USER:
        emit("message", this.#plainMessage(message, taskId, position, "user"));
        return;
      default:
        emit("message", this.#plainMessage(message, taskId, position, "system"));
    }
  }

  #plainMessage(message: Message, taskId: string, position: number, role: string): JsonObject {
    return {
      message_id: message.id,
      task_id: taskId || null,
      position,
      role,
      text: textOf(message),
    };
  }

  #data(event: Event, data: JsonObject, emit: Emit): void {
    const taskId = event.taskId;
    const at = eventMs(event);
    switch (event.kind) {
      case EVENT_KIND.textDelta:
      case EVENT_KIND.token:
        emit("token", { task_id: taskId || null, text: str(data, "text", "delta") });
        return;
      case EVENT_KIND.thinkingDelta:
      case EVENT_KIND.thinking:
        emit("thinking", { task_id: taskId || null, text: str(data, "text", "delta") });
        return;
      case EVENT_KIND.toolUse:
      case EVENT_KIND.mcpToolUse:
      case EVENT_KIND.toolRequested: {
        const id = str(data, "tool_call_id", "toolCallId", "call_id", "id");
        if (id === "") break;
        const input = data.input ?? data.arguments ?? null;
        // An MCP tool's row is a tool row; it also names the server it ran on.
        const server =
          event.kind === EVENT_KIND.mcpToolUse ? str(data, "server", "server_name") || null : null;
        this.#toolCall(taskId, id, str(data, "name", "tool_name", "tool"), input, at, emit, server);
        return;
      }
      case EVENT_KIND.toolCompleted:
      case EVENT_KIND.toolFailed: {
        const id = str(data, "tool_call_id", "toolCallId", "call_id", "id");
        if (id === "") break;
        const named = toolStatusNames[str(data, "status").toLowerCase()];
        const status = named ?? (event.kind === EVENT_KIND.toolFailed ? "error" : "ok");
        const output = data.output ?? data.result ?? null;
        this.#toolResult(
          taskId,
          id,
          str(data, "name", "tool_name", "tool"),
          status,
          output,
          "",
          at,
          emit,
        );
        return;
      }
      case EVENT_KIND.modelCall:
        emit("usage", {
          task_id: taskId || null,
          provider: str(data, "provider") || null,
          model: str(data, "model") || null,
          input_tokens: num(data, "input_tokens"),
          output_tokens: num(data, "output_tokens"),
          cost_usd: num(data, "cost_usd", "cost"),
        });
        return;
      case EVENT_KIND.contextWarning:
        emit(
          "context_warning",
          {
            task_id: taskId || null,
            estimated_tokens: num(data, "estimated_tokens"),
            budget_tokens: num(data, "budget_tokens"),
            usage_percent: num(data, "usage_percent"),
            message: str(data, "message"),
          },
          { message_count: num(data, "message_count") },
        );
        return;
      case EVENT_KIND.contextCompacted: {
        const summary = str(data, "summary");
        emit(
          "context_compacted",
          {
            task_id: taskId || null,
            original_count: num(data, "original_count"),
            compacted_count: num(data, "compacted_count"),
            preserved_messages: num(data, "preserved_messages"),
            tokens_saved: num(data, "tokens_saved"),
            strategy: str(data, "strategy") || null,
            summary: summary.length > 240 ? `${summary.slice(0, 240)}…` : summary,
            resume_cursor: str(data, "resume_cursor") || null,
          },
          {
            summary_text: summary,
            summarized_through_position: num(data, "summarized_through_position"),
            tokens_before: num(data, "tokens_before"),
            tokens_after: num(data, "tokens_after"),
            budget_tokens: num(data, "budget_tokens"),
            // Model summaries: the strategy asked for, whether the stored
            // summary was reused, and why the model's was not used (if so).
            requested_strategy: str(data, "requested_strategy") || null,
            summary_reused: typeof data.summary_reused === "boolean" ? data.summary_reused : null,
            fallback_reason: str(data, "fallback_reason") || null,
          },
        );
        return;
      }
      case EVENT_KIND.artifactCreated:
        emit("artifact", {
          artifact_id: str(data, "artifact_id", "id") || event.resource?.id || "",
          task_id: taskId || null,
          name: str(data, "name"),
          size_bytes: num(data, "size_bytes"),
          sha256: str(data, "sha256") || null,
        });
        return;
      case EVENT_KIND.receiptIssued: {
        const subject = data.subject;
        emit(
          "receipt",
          {
            receipt_id: str(data, "receipt_id") || event.receiptId,
            task_id: taskId || null,
            subject: subject ?? null,
            final_state: str(data, "final_state") || null,
            chain_index: num(data, "chain_index"),
          },
          {
            receipt_hash: str(data, "receipt_hash") || null,
            previous_receipt_hash: str(data, "previous_receipt_hash") || null,
            key_id: str(data, "key_id") || null,
          },
        );
        return;
      }
    }
    emit("raw_event", { kind: event.kind, task_id: taskId || null }, { data });
  }

  #toolCall(
    taskId: string,
    toolCallId: string,
    name: string,
    input: JsonValue,
    at: number | undefined,
    emit: Emit,
    server: string | null = null,
  ): void {
    const key = `${taskId} ${toolCallId}`;
    const known = this.#calls.get(key);
    if (known) {
      // Reported twice (progress, then the message): one row, the first time wins.
      if (known.name === "" && name !== "") known.name = name;
      return;
    }
    this.#calls.set(key, { taskId, name, startedAtMs: at, settled: false });
    this.#latestCall.set(toolCallId, key);
    emit(
      "tool_call",
      {
        tool_call_id: toolCallId,
        task_id: taskId || null,
        name,
        ...(server !== null ? { server } : {}),
      },
      { arguments: input },
    );
  }

  #toolResult(
    taskId: string,
    toolCallId: string,
    name: string,
    status: ToolOutcomeStatus,
    output: JsonValue,
    messageId: string,
    at: number | undefined,
    emit: Emit,
  ): void {
    // A result appended outside a turn (no task) answers the latest call with its id.
    const key = this.#calls.has(`${taskId} ${toolCallId}`)
      ? `${taskId} ${toolCallId}`
      : (this.#latestCall.get(toolCallId) ?? `${taskId} ${toolCallId}`);
    const call = this.#calls.get(key);
    if (call?.settled) return;
    const toolName = call?.name || name;
    const callTask = call?.taskId ?? taskId;
    if (call) call.settled = true;
    else this.#calls.set(key, { taskId, name, startedAtMs: undefined, settled: true });
    if (status === "ok" || status === "artifact") {
      emit(
        "tool_result",
        {
          tool_call_id: toolCallId,
          task_id: callTask || null,
          tool_name: toolName,
          message_id: messageId || null,
          text: preview(output),
        },
        { result: output },
      );
    }
    emit(
      "tool_outcome",
      {
        tool_call_id: toolCallId,
        task_id: callTask || null,
        tool_name: toolName,
        status,
        elapsed_ms: elapsed(call?.startedAtMs, at),
      },
      { result: output },
    );
  }

  /**
   * A turn that failed or was canceled settles its unanswered tool calls as
   * errors, so no row stays "running" after its turn ended.
   */
  #settleOpenCalls(taskId: string, at: number | undefined, outcome: string, emit: Emit): void {
    for (const [key, call] of this.#calls) {
      if (call.settled || call.taskId !== taskId) continue;
      call.settled = true;
      emit("tool_outcome", {
        tool_call_id: key.slice(taskId.length + 1),
        task_id: taskId || null,
        tool_name: call.name,
        status: "error",
        elapsed_ms: elapsed(call.startedAtMs, at),
        reason: `the turn ${outcome === "canceled" ? "was canceled" : "failed"} before the tool returned`,
      });
    }
  }

  /** The latest unanswered tool call of a task. */
  #openCallOf(taskId: string): { toolCallId: string; name: string } | undefined {
    let found: { toolCallId: string; name: string } | undefined;
    for (const [key, call] of this.#calls) {
      if (call.settled || call.taskId !== taskId) continue;
      found = { toolCallId: key.slice(taskId.length + 1), name: call.name };
    }
    return found;
  }

  #taskState(taskId: string): TaskState {
    let task = this.#tasks.get(taskId);
    if (!task) {
      task = { firstStartMs: undefined, awaiting: false };
      this.#tasks.set(taskId, task);
    }
    return task;
  }

  #reasonOf(event: Event): string | null {
    const payload = event.payload?.kind;
    if (payload?.case === "taskStatusChanged" || payload?.case === "sessionStateChanged") {
      return payload.value.reason || null;
    }
    return null;
  }

  #rawPayload(event: Event): JsonValue {
    const payload = event.payload?.kind;
    if (payload?.case === "data") return payload.value;
    return null;
  }
}

type Emit = (type: ProjectedEnvelope["type"], payload: JsonObject, debug?: JsonObject) => void;
