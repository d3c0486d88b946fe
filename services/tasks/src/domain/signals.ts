/**
 * Signals: how a suspended task is addressed and what a delivery means.
 * Pure: no I/O.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { isJsonObject } from "@trellis/runtime";

/** The signal id a suspended task waits on: `<task_id>:<label>`. */
export function signalIdFor(taskId: string, label: string): string {
  return `${taskId}:${label}`;
}

/** What a signal payload asks for, and the Harn event that records it. */
export interface SignalMeaning {
  cancel: boolean;
  /** `user.cancel_requested`, `user.tool_confirmation` or `user.input_submitted`. */
  eventKind: string;
}

/**
 * `{cancel: true}` cancels; a payload with an `approved` field is a tool
 * confirmation (approve / deny); anything else is input.
 */
export function classifySignal(payload: JsonValue | undefined): SignalMeaning {
  if (isJsonObject(payload) && payload.cancel === true) {
    return { cancel: true, eventKind: EVENT_KIND.cancelRequested };
  }
  if (isJsonObject(payload) && "approved" in payload) {
    return { cancel: false, eventKind: EVENT_KIND.toolConfirmation };
  }
  return { cancel: false, eventKind: EVENT_KIND.inputSubmitted };
}
