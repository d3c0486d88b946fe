/**
 * The catalogue of event kinds a turn's progress emits (Harn names), with a
 * typed payload codec for each kind whose payload more than one service
 * reads. Producers build payloads with `encode`, consumers read them with
 * `decode`, and both name kinds through {@link EVENT_KIND} instead of bare
 * strings.
 *
 * A decoder takes the event's JSON data as stored (`unknown`: events come
 * from other versions and other producers) and returns the typed payload,
 * reading the older aliases some producers wrote (`toolCallId`, `id`,
 * `tool_name`, `delta`); a field of the wrong type reads as absent.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/**
 * Event kinds (Harn v1 names), grouped by who emits them. Every service names
 * a kind through this table; a kind spelled as a bare string elsewhere in
 * `src/` is a defect (tests may spell them, to pin the wire names).
 */
export const EVENT_KIND = {
  // A turn's progress (agent events).
  textDelta: "agent.text_delta",
  thinkingDelta: "agent.thinking_delta",
  toolUse: "agent.tool_use",
  mcpToolUse: "agent.mcp_tool_use",
  toolResult: "agent.tool_result",
  modelCall: "agent.model_call",
  routed: "agent.routed",
  agentMessage: "agent.message",
  blocked: "agent.blocked",
  memoryRead: "agent.memory_read",
  memoryWrite: "agent.memory_write",
  networkEgress: "agent.network_egress",
  fileWrite: "agent.file_write",
  handoff: "agent.handoff",
  /** Older producers' name of a text delta. */
  token: "agent.token",
  /** Older producers' name of a thinking delta. */
  thinking: "agent.thinking",

  // Tool calls seen from outside the model.
  toolRequested: "tool.requested",
  toolApprovalRequired: "tool.approval_required",
  toolCompleted: "tool.completed",
  toolFailed: "tool.failed",

  // A task's lifecycle.
  taskSubmitted: "task.submitted",
  taskStarted: "task.started",
  taskInputRequired: "task.input_required",
  taskAuthRequired: "task.auth_required",
  taskCompleted: "task.completed",
  taskFailed: "task.failed",
  taskCanceled: "task.canceled",
  taskStatusChanged: "task.status_changed",

  // What a user sends into a session.
  userMessage: "user.message",
  cancelRequested: "user.cancel_requested",
  toolConfirmation: "user.tool_confirmation",
  inputSubmitted: "user.input_submitted",

  // Sessions and the resources they hold.
  sessionCreated: "session.created",
  sessionClosed: "session.closed",
  sessionTruncated: "session.truncated",
  threadForked: "session.thread_forked",
  messageAppended: "session.message_appended",
  branchCreated: "branch.created",
  artifactCreated: "artifact.created",
  receiptIssued: "receipt.issued",

  // A session's context window and replays of a task.
  contextWarning: "context.warning",
  contextCompacted: "context.compacted",
  replayStarted: "replay.started",
  replayCompleted: "replay.completed",
  replayFailed: "replay.failed",
} as const;

/** The kinds that end a task: nothing of the task follows one of them. */
export const TERMINAL_TASK_KINDS: readonly EventKind[] = [
  EVENT_KIND.taskCompleted,
  EVENT_KIND.taskFailed,
  EVENT_KIND.taskCanceled,
];

/** One of {@link EVENT_KIND}'s values. */
export type EventKind = (typeof EVENT_KIND)[keyof typeof EVENT_KIND];

/** `agent.text_delta` / `agent.thinking_delta`: a piece of streamed text. */
export interface TextDelta {
  text: string;
}

/** `agent.tool_use` / `agent.mcp_tool_use`: a tool call started. */
export interface ToolUse {
  toolCallId: string;
  name: string;
  input?: JsonValue;
  /** The MCP server of an `agent.mcp_tool_use`. */
  server?: string;
}

/** `tool.completed` / `tool.failed` / `agent.tool_result`: a tool call finished. */
export interface ToolFinished {
  toolCallId: string;
  name: string;
  /** As the producer wrote it (`ok`, `error`, `denied`, …); "" when absent. */
  status: string;
}

function record(data: unknown): Record<string, unknown> {
  return typeof data === "object" && data !== null && !Array.isArray(data)
    ? (data as Record<string, unknown>)
    : {};
}

function str(data: Record<string, unknown>, ...keys: string[]): string {
  for (const key of keys) {
    const value = data[key];
    if (typeof value === "string") return value;
  }
  return "";
}

/** Payload codecs, one per shared payload shape. */
export const textDelta = {
  encode: (value: TextDelta): JsonObject => ({ text: value.text }),
  decode: (data: unknown): TextDelta => ({ text: str(record(data), "text", "delta") }),
};

export const toolUse = {
  encode: (value: ToolUse): JsonObject => ({
    tool_call_id: value.toolCallId,
    name: value.name,
    ...(value.input === undefined ? {} : { input: value.input }),
    ...(value.server ? { server: value.server } : {}),
  }),
  decode: (data: unknown): ToolUse => {
    const r = record(data);
    const server = str(r, "server", "server_name");
    return {
      toolCallId: str(r, "tool_call_id", "toolCallId", "id"),
      name: str(r, "name", "tool_name"),
      ...(r.input === undefined ? {} : { input: r.input as JsonValue }),
      ...(server ? { server } : {}),
    };
  },
};

export const toolFinished = {
  encode: (value: ToolFinished): JsonObject => ({
    tool_call_id: value.toolCallId,
    name: value.name,
    status: value.status,
  }),
  decode: (data: unknown): ToolFinished => {
    const r = record(data);
    return {
      toolCallId: str(r, "tool_call_id", "toolCallId", "id"),
      name: str(r, "name", "tool_name"),
      status: str(r, "status"),
    };
  },
};
