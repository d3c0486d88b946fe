/**
 * Reading a turn's progress from its task's events (harness-chat §9): which
 * event is a chunk, and which one says the task settled. Pure.
 */
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type ChatChunk, ChatChunkSchema, ToolCallPhase } from "@trellis/contracts/chat";
import { type Event, Role, type TaskStatus, ToolResultStatus } from "@trellis/contracts/core";
import { isSettled } from "./outcome.js";

/** The status a task-status event moved the task to, when that settles it. */
export function settledStatusOf(event: Event): TaskStatus | undefined {
  const payload = event.payload?.kind;
  if (payload?.case !== "taskStatusChanged") return undefined;
  return isSettled(payload.value.status) ? payload.value.status : undefined;
}

function dataOf(event: Event): JsonObject {
  const payload = event.payload?.kind;
  return payload?.case === "data" ? payload.value : {};
}

function stringField(data: JsonObject, ...names: string[]): string {
  for (const name of names) {
    const value: JsonValue | undefined = data[name];
    if (typeof value === "string") return value;
  }
  return "";
}

const toolStatuses: Record<string, ToolResultStatus> = {
  ok: ToolResultStatus.OK,
  error: ToolResultStatus.ERROR,
  denied: ToolResultStatus.DENIED,
  timeout: ToolResultStatus.TIMEOUT,
  interrupted: ToolResultStatus.INTERRUPTED,
};

/**
 * The chunk an event of the turn's task carries, if any:
 *
 * - a message appended by the turn (not its input) → `message`;
 * - token / thinking deltas → `text_delta` / `thinking_delta`;
 * - tool call started / finished → `tool_call_progress`.
 */
export function chunkOf(event: Event): ChatChunk | undefined {
  const payload = event.payload?.kind;
  if (payload?.case === "messageAppended") {
    const message = payload.value.message;
    // The turn's own input is history, not progress (harness-chat §7).
    if (!message || message.role === Role.USER || event.kind === "user.message") return undefined;
    return create(ChatChunkSchema, { kind: { case: "message", value: message } });
  }
  const data = dataOf(event);
  switch (event.kind) {
    case "agent.text_delta":
    case "agent.token":
    case "token":
      return create(ChatChunkSchema, {
        kind: { case: "textDelta", value: { text: stringField(data, "text", "delta") } },
      });
    case "agent.thinking_delta":
    case "agent.thinking":
    case "thinking":
      return create(ChatChunkSchema, {
        kind: { case: "thinkingDelta", value: { text: stringField(data, "text", "delta") } },
      });
    case "agent.tool_use":
    case "agent.mcp_tool_use":
    case "tool.requested":
    case "tool_call":
      return create(ChatChunkSchema, {
        kind: {
          case: "toolCallProgress",
          value: {
            toolCallId: stringField(data, "tool_call_id", "toolCallId", "id"),
            name: stringField(data, "name", "tool_name"),
            phase: ToolCallPhase.STARTED,
          },
        },
      });
    case "agent.tool_result":
    case "tool.completed":
    case "tool.failed":
    case "tool_result": {
      const status = stringField(data, "status").toLowerCase();
      return create(ChatChunkSchema, {
        kind: {
          case: "toolCallProgress",
          value: {
            toolCallId: stringField(data, "tool_call_id", "toolCallId", "id"),
            name: stringField(data, "name", "tool_name"),
            phase: ToolCallPhase.FINISHED,
            status:
              toolStatuses[status] ??
              (event.kind === "tool.failed" ? ToolResultStatus.ERROR : ToolResultStatus.OK),
          },
        },
      });
    }
    default:
      return undefined;
  }
}
