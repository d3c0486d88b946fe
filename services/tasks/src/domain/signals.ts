/**
 * Signals: how a suspended task is addressed and what a delivery means.
 * Pure: no I/O.
 */
import type { JsonValue } from "@bufbuild/protobuf";
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
    return { cancel: true, eventKind: "user.cancel_requested" };
  }
  if (isJsonObject(payload) && "approved" in payload) {
    return { cancel: false, eventKind: "user.tool_confirmation" };
  }
  return { cancel: false, eventKind: "user.input_submitted" };
}
