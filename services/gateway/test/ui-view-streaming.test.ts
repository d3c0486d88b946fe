// The operator UI's view of streamed tokens (ui/src/contract.ts): `token`
// envelopes grow a per-task preview that the task's `response` envelopes
// confirm, message by message, and that an ended turn never leaves behind.
import { describe, expect, it } from "vitest";
import { applyItem, emptyView, type SessionView } from "../../../ui/src/contract.js";

function apply(view: SessionView, type: string, payload: Record<string, unknown>): SessionView {
  return applyItem(view, { cursor: `evt_${view.cursors.length}:0`, envelope: { type, payload } });
}

const token = (view: SessionView, text: string, task = "task_1") =>
  apply(view, "token", { task_id: task, text });

describe("the UI view of streamed tokens", () => {
  it("grows the preview, then each response consumes the text it confirms", () => {
    let view = emptyView();
    view = token(view, "Hel");
    expect(view.streaming).toEqual({ task_1: "Hel" });
    view = token(view, "lo.");
    view = token(view, "Bye");
    expect(view.streaming).toEqual({ task_1: "Hello.Bye" });
    view = apply(view, "response", { message_id: "m1", task_id: "task_1", text: "Hello." });
    // The rest belongs to the task's next message and stays visible.
    expect(view.streaming).toEqual({ task_1: "Bye" });
    view = token(view, ".");
    view = apply(view, "response", { message_id: "m2", task_id: "task_1", text: "Bye." });
    expect(view.streaming).toEqual({});
    expect(view.chat.map((c) => c.text)).toEqual(["Hello.", "Bye."]);
  });

  it("drops a preview the response does not match (the response is the record)", () => {
    let view = token(emptyView(), "draft");
    view = apply(view, "response", { message_id: "m1", task_id: "task_1", text: "final" });
    expect(view.streaming).toEqual({});
    expect(view.chat.map((c) => c.text)).toEqual(["final"]);
  });

  it("keeps previews of different tasks apart and ends a canceled turn's preview", () => {
    let view = token(emptyView(), "half a rep", "task_1");
    view = token(view, "other", "task_2");
    view = apply(view, "turn_end", { task_id: "task_1", status: "canceled" });
    expect(view.streaming).toEqual({ task_2: "other" });
    expect(view.turns.map((t) => [t.taskId, t.status])).toEqual([["task_1", "canceled"]]);
    expect(view.chat).toEqual([]);
  });
});
