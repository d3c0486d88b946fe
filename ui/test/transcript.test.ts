// The event-contract reducer and the transcript built from it, without a
// browser: envelopes in the order the gateway's projection sends them.
import { describe, expect, it } from "vitest";
import { applyItem, emptyView, type SessionView, type StreamItem } from "../src/contract.ts";
import {
  activeTurn,
  addMessagePage,
  argumentsSummary,
  asksToScrollUp,
  calmResumePoints,
  durationText,
  emptyDetails,
  flagsOn,
  isTyping,
  relativeTime,
  titleOf,
  transcriptOf,
  withoutIds,
} from "../src/transcript.ts";

let n = 0;
function item(type: string, payload: Record<string, unknown>): StreamItem {
  n += 1;
  return { cursor: `evt_${n}:0`, envelope: { type, payload } };
}

function play(items: StreamItem[], view: SessionView = emptyView()): SessionView {
  return items.reduce(applyItem, view);
}

/** A gated turn: a call that ran, then a call waiting for approval. */
function gatedTurn(): StreamItem[] {
  return [
    item("session_state", {
      status: "running",
      task_id: "task_1",
      updated_at: "2026-11-29T06:00:00Z",
    }),
    item("message", { message_id: "msg_u", task_id: "task_1", role: "user", text: "Paris" }),
    item("response", { message_id: "msg_a1", task_id: "task_1", text: "Checking." }),
    item("tool_call", { tool_call_id: "call_1", task_id: "task_1", name: "weather" }),
    item("tool_result", {
      tool_call_id: "call_1",
      task_id: "task_1",
      tool_name: "weather",
      text: "sunny",
    }),
    item("tool_outcome", {
      tool_call_id: "call_1",
      task_id: "task_1",
      tool_name: "weather",
      status: "ok",
      elapsed_ms: 84,
    }),
    item("response", { message_id: "msg_a2", task_id: "task_1", text: "May I write it?" }),
    item("tool_call", { tool_call_id: "call_2", task_id: "task_1", name: "write_file" }),
    item("session_state", {
      status: "awaiting_approval",
      task_id: "task_1",
      updated_at: "2026-11-29T06:00:05Z",
    }),
    item("approval_required", {
      request_id: "task_1",
      task_id: "task_1",
      kind: "input",
      reason: "waiting for signal approval",
      tool_call_id: "call_2",
      tool_name: "write_file",
    }),
  ];
}

describe("the transcript", () => {
  it("puts tool calls in place, between the messages around them, in stream order", () => {
    const view = play(gatedTurn());
    const items = transcriptOf(view, emptyDetails());
    expect(
      items.map((i) =>
        i.kind === "message" ? i.entry.text : i.kind === "tool" ? `tool:${i.row.name}` : i.kind,
      ),
    ).toEqual(["Paris", "Checking.", "tool:weather", "May I write it?", "tool:write_file"]);
  });

  it("shows the gated call as awaiting approval, with its approval attached and its arguments", () => {
    const view = play(gatedTurn());
    const details = addMessagePage(emptyDetails(), [
      {
        id: "msg_a2",
        created_at: "2026-11-29T06:00:04Z",
        role: "assistant",
        parts: [
          { type: "text", text: "May I write it?" },
          {
            type: "tool_call",
            tool_call_id: "call_2",
            name: "write_file",
            input: { path: "forecast.txt" },
          },
        ],
      },
    ]);
    const items = transcriptOf(view, details);
    const gated = items.find((i) => i.kind === "tool" && i.row.toolCallId === "call_2");
    expect(gated?.kind).toBe("tool");
    if (gated?.kind !== "tool") return;
    expect(gated.state).toBe("awaiting_approval");
    expect(gated.approval?.toolName).toBe("write_file");
    expect(gated.arguments).toEqual({ path: "forecast.txt" });
    // The approval shows once: with its call, not again on its own.
    expect(items.filter((i) => i.kind === "approval")).toHaveLength(0);
    // Message times come from the transcript when it has them, else the stream's clock.
    const times = items.flatMap((i) => (i.kind === "message" ? [[i.entry.key, i.at]] : []));
    expect(times).toEqual([
      ["msg_u", "2026-11-29T06:00:00Z"],
      ["msg_a1", "2026-11-29T06:00:00Z"],
      ["msg_a2", "2026-11-29T06:00:04Z"],
    ]);
    const done = items.find((i) => i.kind === "tool" && i.row.toolCallId === "call_1");
    expect(done?.kind === "tool" && [done.state, done.row.elapsedMs, done.row.resultText]).toEqual([
      "ok",
      84,
      "sunny",
    ]);
  });

  it("ends a denied call denied and an unanswered one of an ended turn as no result", () => {
    const denied = play([
      ...gatedTurn(),
      item("approval_applied", { request_id: "task_1", decision: "denied" }),
      item("tool_outcome", {
        tool_call_id: "call_2",
        task_id: "task_1",
        tool_name: "write_file",
        status: "denied",
      }),
      item("turn_end", { task_id: "task_1", status: "completed", elapsed_ms: 900 }),
      item("session_state", { status: "idle", task_id: "task_1" }),
    ]);
    const states = transcriptOf(denied, emptyDetails()).flatMap((i) =>
      i.kind === "tool" ? [i.state] : [],
    );
    expect(states).toEqual(["ok", "denied"]);
    expect(activeTurn(denied)).toBeNull();

    const dangling = play([
      item("tool_call", { tool_call_id: "call_x", task_id: "task_9", name: "slow" }),
      item("turn_end", { task_id: "task_9", status: "completed" }),
    ]);
    const [row] = transcriptOf(dangling, emptyDetails());
    expect(row?.kind === "tool" && row.state).toBe("no_result");
  });

  it("keeps an approval that names no known call as its own item", () => {
    const view = play([
      item("approval_required", {
        request_id: "task_5",
        task_id: "task_5",
        kind: "input",
        reason: "",
        tool_call_id: null,
      }),
    ]);
    expect(transcriptOf(view, emptyDetails()).map((i) => i.kind)).toEqual(["approval"]);
  });

  it("renders an MCP tool call (tool_call with a server) like any tool row", () => {
    const view = play([
      item("tool_call", {
        tool_call_id: "call_m",
        task_id: "task_m",
        name: "docs__search",
        server: "docs",
      }),
      item("tool_outcome", {
        tool_call_id: "call_m",
        task_id: "task_m",
        tool_name: "docs__search",
        status: "error",
        elapsed_ms: 3,
      }),
    ]);
    const [row] = transcriptOf(view, emptyDetails());
    expect(row?.kind === "tool" && [row.row.name, row.row.server, row.state]).toEqual([
      "docs__search",
      "docs",
      "error",
    ]);
  });

  it("knows the running turn (what Stop cancels) and when the agent is typing", () => {
    const running = play([item("session_state", { status: "running", task_id: "task_7" })]);
    expect(activeTurn(running)).toEqual({ taskId: "task_7", state: "running" });
    expect(isTyping(running)).toBe(true);
    const waiting = play(gatedTurn());
    expect(activeTurn(waiting)).toEqual({ taskId: "task_1", state: "awaiting_approval" });
    expect(isTyping(waiting)).toBe(false);
    const idle = play([item("session_state", { status: "idle", task_id: "task_7" })], running);
    expect(activeTurn(idle)).toBeNull();
  });

  it("counts a repeated cursor instead of applying it twice", () => {
    const first = item("message", { message_id: "m1", role: "user", text: "hi" });
    const view = play([first, first]);
    expect(view.chat).toHaveLength(1);
    expect(view.duplicates).toBe(1);
  });
});

describe("the calm panels", () => {
  it("de-duplicates resume points, drops the repeated kind and keeps the last few", () => {
    const points = [1, 2, 3, 4].map((i) => ({
      kind: "turn_completed",
      event_id: `evt_${i}`,
      resume_cursor: `evt_${i}:0`,
      task_id: `task_${i}`,
      summary:
        i === 4
          ? "turn completed: Echo: one"
          : `turn completed: Echo: ${["one", "two", "three"][i - 1]}`,
    }));
    const { shown, hidden } = calmResumePoints(points, 2);
    expect(shown.map((p) => [p.event_id, p.text])).toEqual([
      ["evt_3", "Echo: three"],
      ["evt_4", "Echo: one"],
    ]);
    // evt_1 repeats evt_4 (same kind and text): kept once, the latest.
    expect(hidden).toBe(1);
  });

  it("lists only the health flags that are on", () => {
    expect(flagsOn({ flags: { stuck: false, waiting: true, budget_pressure: true } })).toEqual([
      { flag: "waiting", label: "waiting" },
      { flag: "budget_pressure", label: "budget pressure" },
    ]);
    expect(flagsOn({ flags: { stuck: false } })).toEqual([]);
    expect(flagsOn(null)).toEqual([]);
  });

  it("writes times, titles, durations and arguments for people", () => {
    const now = Date.parse("2026-11-29T12:00:00Z");
    expect(relativeTime("2026-11-29T11:59:30Z", now)).toBe("just now");
    expect(relativeTime("2026-11-29T11:55:00Z", now)).toBe("5 min ago");
    expect(relativeTime("2026-11-29T09:00:00Z", now)).toBe("3 h ago");
    expect(relativeTime("2026-11-27T12:00:00Z", now)).toBe("2 d ago");
    expect(relativeTime("2026-10-01T12:00:00Z", now)).toBe("2026-10-01");
    expect(relativeTime("not a date", now)).toBe("");
    expect(titleOf("  first line\nsecond")).toBe("first line");
    expect(titleOf("x".repeat(100), 10)).toBe(`${"x".repeat(9)}…`);
    expect(titleOf("   ")).toBeNull();
    expect(durationText(84)).toBe("84 ms");
    expect(durationText(1250)).toBe("1.3 s");
    expect(durationText(125_000)).toBe("2 min 5 s");
    expect(argumentsSummary({ city: "Paris", days: 3 })).toBe('city: "Paris", days: 3');
    expect(withoutIds("turn task_01m8k03wyg2w9f9hwdtwyrbgpy waits for an operator")).toBe(
      "turn waits for an operator",
    );
    expect(withoutIds("signal task_01m8k03wyg2w:approval pending")).toBe("signal pending");
  });
});

describe("scroll intent", () => {
  it("tells inputs that scroll the transcript up from those that do not", () => {
    expect(asksToScrollUp({ kind: "wheel", deltaY: -120 })).toBe(true);
    expect(asksToScrollUp({ kind: "wheel", deltaY: 120 })).toBe(false);
    expect(asksToScrollUp({ kind: "wheel", deltaY: 0 })).toBe(false);
    for (const key of ["ArrowUp", "PageUp", "Home"]) {
      expect(asksToScrollUp({ kind: "key", key })).toBe(true);
    }
    for (const key of ["ArrowDown", "PageDown", "End", "Enter", "a"]) {
      expect(asksToScrollUp({ kind: "key", key })).toBe(false);
    }
    // A finger dragging down moves the content up.
    expect(asksToScrollUp({ kind: "drag", fromY: 300, toY: 340 })).toBe(true);
    expect(asksToScrollUp({ kind: "drag", fromY: 300, toY: 260 })).toBe(false);
    expect(asksToScrollUp({ kind: "drag", fromY: 300, toY: 300 })).toBe(false);
  });
});
