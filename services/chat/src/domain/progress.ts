/**
 * Reading a turn's progress from its task's events (harness-chat §9): which
 * event is a chunk, and which one says the task settled. Pure.
 */

import { create, type JsonObject } from "@bufbuild/protobuf";
import { type ChatChunk, ChatChunkSchema, ToolCallPhase } from "@trellis/contracts/chat";
import { type Event, Role, type TaskStatus, ToolResultStatus } from "@trellis/contracts/core";
import { EVENT_KIND, textDelta, toolFinished, toolUse } from "@trellis/contracts/event-kinds";
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
    if (!message || message.role === Role.USER || event.kind === EVENT_KIND.userMessage)
      return undefined;
    return create(ChatChunkSchema, { kind: { case: "message", value: message } });
  }
  const data = dataOf(event);
  switch (event.kind) {
    case EVENT_KIND.textDelta:
    case EVENT_KIND.token:
    case "token":
      return create(ChatChunkSchema, {
        kind: { case: "textDelta", value: { text: textDelta.decode(data).text } },
      });
    case EVENT_KIND.thinkingDelta:
    case EVENT_KIND.thinking:
    case "thinking":
      return create(ChatChunkSchema, {
        kind: { case: "thinkingDelta", value: { text: textDelta.decode(data).text } },
      });
    case EVENT_KIND.toolUse:
    case EVENT_KIND.mcpToolUse:
    case EVENT_KIND.toolRequested:
    case "tool_call": {
      const call = toolUse.decode(data);
      return create(ChatChunkSchema, {
        kind: {
          case: "toolCallProgress",
          value: { toolCallId: call.toolCallId, name: call.name, phase: ToolCallPhase.STARTED },
        },
      });
    }
    case EVENT_KIND.toolResult:
    case EVENT_KIND.toolCompleted:
    case EVENT_KIND.toolFailed:
    case "tool_result": {
      const finished = toolFinished.decode(data);
      return create(ChatChunkSchema, {
        kind: {
          case: "toolCallProgress",
          value: {
            toolCallId: finished.toolCallId,
            name: finished.name,
            phase: ToolCallPhase.FINISHED,
            status:
              toolStatuses[finished.status.toLowerCase()] ??
              (event.kind === EVENT_KIND.toolFailed ? ToolResultStatus.ERROR : ToolResultStatus.OK),
          },
        },
      });
    }
    default:
      return undefined;
  }
}
