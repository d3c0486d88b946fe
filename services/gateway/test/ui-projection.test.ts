// The UI event projection, as a pure function of log events: every mapping,
// tool_call_id keeping calls apart, tiers, cursors, and the contract check
// that the types the projection can emit are exactly the types the UI handles.
import { create, fromJson, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type Event,
  EventSchema,
  type Message,
  MessageSchema,
  Role,
  SessionState,
  TaskStatus,
  ToolResultStatus,
} from "@trellis/contracts/core";
import { SessionSchema } from "@trellis/contracts/tasks";
import { describe, expect, it } from "vitest";
import { applyItem, emptyView, HANDLED_EVENT_TYPES } from "../../../ui/src/contract.js";
import {
  envelopeForTier,
  formatCursor,
  type ProjectedEnvelope,
  parseCursor,
  UI_EVENT_TIERS,
  UI_EVENT_TYPES,
  UI_TYPES_WITHOUT_EVENTS,
  UiProjector,
} from "../src/ui/projection/index.js";
import { bootstrapFrame, framesOf } from "../src/ui/stream.js";

const SESSION = "ses_ui";
let clock = Date.UTC(2026, 10, 22, 12, 0, 0);
let seq = 0;

function event(
  kind: string,
  fields: MessageInitShape<typeof EventSchema> = {},
  stepMs = 10,
): Event {
  clock += stepMs;
  seq += 1;
  return create(EventSchema, {
    id: `evt_${seq}`,
    kind,
    sessionId: SESSION,
    workspaceId: "default",
    createdAt: timestampFromMs(clock),
    sequence: BigInt(seq),
    ...fields,
  });
}

function sessionEvent(kind: string, state: SessionState, reason = ""): Event {
  return event(kind, {
    resource: { object: "session", id: SESSION },
    payload: {
      kind: { case: "sessionStateChanged", value: { state, previousState: 0, reason } },
    },
  });
}

function taskEvent(taskId: string, kind: string, status: TaskStatus, reason = "", stepMs = 10) {
  return event(
    kind,
    {
      taskId,
      resource: { object: "task", id: taskId },
      payload: {
        kind: { case: "taskStatusChanged", value: { status, previousStatus: 0, reason } },
      },
    },
    stepMs,
  );
}

function messageEvent(kind: string, taskId: string, message: Message, position: number, ms = 10) {
  return event(
    kind,
    {
      taskId,
      resource: taskId ? { object: "task", id: taskId } : { object: "session", id: SESSION },
      payload: {
        kind: { case: "messageAppended", value: { message, position: BigInt(position) } },
      },
    },
    ms,
  );
}

function text(role: Role, id: string, value: string): Message {
  return create(MessageSchema, {
    id,
    role,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
}

function dataEvent(kind: string, taskId: string, data: JsonObject, ms = 10): Event {
  return event(
    kind,
    {
      taskId,
      resource: { object: "task", id: taskId },
      payload: { kind: { case: "data", value: data } },
    },
    ms,
  );
}

function signal(kind: string, taskId: string, payload: JsonObject): Event {
  return event(kind, {
    taskId,
    resource: { object: "task", id: taskId },
    payload: {
      kind: {
        case: "signalDelivered",
        value: {
          signalId: `${taskId}:approval`,
          payload: fromJson(ValueSchema, payload),
        },
      },
    },
  });
}

/**
 * A recorded session touching every mapping: two turns, a gated tool that
 * waits for approval, two calls of the same tool, progress events, a failed
 * turn with an unanswered call, an artifact, a receipt, an unknown kind.
 */
function recordedSession(): Event[] {
  const assistantCalls = create(MessageSchema, {
    id: "msg_calls",
    role: Role.ASSISTANT,
    parts: [{ kind: { case: "text", value: { text: "Looking it up twice." } } }],
    toolCalls: [
      {
        id: "call_a",
        name: "search",
        arguments: create(ValueSchema, { kind: { case: "stringValue", value: "x" } }),
      },
      { id: "call_b", name: "search" },
    ],
  });
  const resultA = create(MessageSchema, {
    id: "msg_ra",
    role: Role.TOOL,
    toolCallId: "call_a",
    parts: [
      {
        kind: {
          case: "toolResult",
          value: {
            toolCallId: "call_a",
            status: ToolResultStatus.OK,
            output: create(ValueSchema, { kind: { case: "stringValue", value: "found a" } }),
          },
        },
      },
    ],
  });
  const resultB = create(MessageSchema, {
    id: "msg_rb",
    role: Role.TOOL,
    toolCallId: "call_b",
    parts: [
      {
        kind: {
          case: "toolResult",
          value: { toolCallId: "call_b", status: ToolResultStatus.TIMEOUT },
        },
      },
    ],
  });
  const gated = create(MessageSchema, {
    id: "msg_gate",
    role: Role.ASSISTANT,
    toolCalls: [{ id: "call_w", name: "write_file" }],
  });
  const written = create(MessageSchema, {
    id: "msg_w",
    role: Role.TOOL,
    toolCallId: "call_w",
    name: "write_file",
    parts: [
      { kind: { case: "text", value: { text: "wrote it" } } },
      { kind: { case: "artifactRef", value: { artifactId: "art_1" } } },
    ],
  });
  return [
    sessionEvent("session.created", SessionState.ACTIVE, "created"),
    taskEvent("task_1", "task.submitted", TaskStatus.SUBMITTED),
    messageEvent("user.message", "task_1", text(Role.USER, "msg_u1", "find x"), 0),
    taskEvent("task_1", "task.started", TaskStatus.WORKING),
    dataEvent("agent.thinking_delta", "task_1", { text: "hmm" }),
    dataEvent("agent.text_delta", "task_1", { text: "Look" }),
    dataEvent("agent.model_call", "task_1", {
      provider: "scripted",
      model: "m1",
      input_tokens: 12,
      output_tokens: 5,
    }),
    dataEvent("context.warning", "task_1", {
      estimated_tokens: 850,
      budget_tokens: 1000,
      usage_percent: 85,
      message_count: 12,
    }),
    dataEvent("context.compacted", "task_1", {
      original_count: 12,
      compacted_count: 5,
      preserved_messages: 4,
      tokens_saved: 600,
      strategy: "first_line",
      summary: "Summary of 3 earlier turns",
      summarized_through_position: 7,
    }),
    dataEvent("agent.tool_use", "task_1", {
      tool_call_id: "call_a",
      name: "search",
      input: { q: "x" },
    }),
    messageEvent("agent.message", "task_1", assistantCalls, 1, 5),
    messageEvent("agent.tool_result", "task_1", resultA, 2, 40),
    messageEvent("agent.tool_result", "task_1", resultB, 3, 60),
    messageEvent("agent.message", "task_1", gated, 4),
    taskEvent("task_1", "task.input_required", TaskStatus.INPUT_REQUIRED, "waiting for signal"),
    signal("user.tool_confirmation", "task_1", { approved: true }),
    taskEvent("task_1", "task.started", TaskStatus.WORKING, "resumed"),
    messageEvent("agent.tool_result", "task_1", written, 5, 100),
    messageEvent("agent.message", "task_1", text(Role.ASSISTANT, "msg_done", "Done."), 6),
    dataEvent("artifact.created", "task_1", {
      artifact_id: "art_1",
      name: "out.txt",
      size_bytes: "8",
    }),
    taskEvent("task_1", "task.completed", TaskStatus.COMPLETED, "completed"),
    event("receipt.issued", {
      taskId: "task_1",
      receiptId: "rcpt_1",
      resource: { object: "receipt", id: "rcpt_1" },
      payload: {
        kind: {
          case: "data",
          value: { receipt_id: "rcpt_1", final_state: "completed", chain_index: 0, key_id: "k1" },
        },
      },
    }),
    taskEvent("task_2", "task.submitted", TaskStatus.SUBMITTED),
    taskEvent("task_2", "task.started", TaskStatus.WORKING),
    dataEvent("tool.requested", "task_2", { tool_call_id: "call_a", name: "fetch" }),
    taskEvent("task_2", "task.failed", TaskStatus.FAILED, "provider down"),
    dataEvent("vendor.custom", "task_2", { anything: true }),
    sessionEvent("session.closed", SessionState.CLOSED, "done"),
  ];
}

function projectAll(events: readonly Event[]): ProjectedEnvelope[] {
  const projector = new UiProjector({ sessionId: SESSION });
  return events.flatMap((e) => projector.project(e));
}

describe("the UI projection", () => {
  it("emits exactly the declared types, each of them, and the UI handles exactly those", () => {
    const envelopes = projectAll(recordedSession());
    const emitted = new Set(envelopes.map((e) => e.type));
    // A branch's first event (the recorded session is no branch).
    const branch = new UiProjector({
      sessionId: SESSION,
      lineage: { parentSessionId: "ses_parent", forkedFromEventId: "evt_1" },
    });
    for (const e of branch.project(sessionEvent("session.thread_forked", SessionState.ACTIVE))) {
      emitted.add(e.type);
    }
    // The bootstrap envelope is the stream's, not the projector's.
    emitted.add(bootstrapFrame(create(SessionSchema, { id: SESSION }), "default", "").type);
    expect([...emitted].sort()).toEqual([...UI_EVENT_TYPES].sort());
    expect([...HANDLED_EVENT_TYPES].sort()).toEqual([...UI_EVENT_TYPES].sort());
    // A type the contract names but nothing records is listed, never emitted.
    for (const missing of Object.keys(UI_TYPES_WITHOUT_EVENTS)) {
      expect(UI_EVENT_TYPES).not.toContain(missing);
    }
  });

  it("keeps two calls of the same tool apart by tool_call_id, with outcomes and elapsed time", () => {
    const envelopes = projectAll(recordedSession());
    const calls = envelopes.filter((e) => e.type === "tool_call").map((e) => e.payload);
    expect(calls.map((c) => [c.task_id, c.tool_call_id, c.name])).toEqual([
      ["task_1", "call_a", "search"],
      ["task_1", "call_b", "search"],
      ["task_1", "call_w", "write_file"],
      ["task_2", "call_a", "fetch"],
    ]);
    const outcomes = envelopes.filter((e) => e.type === "tool_outcome").map((e) => e.payload);
    expect(outcomes.map((o) => [o.task_id, o.tool_call_id, o.status, o.elapsed_ms])).toEqual([
      // call_a was first reported by agent.tool_use: timed from then (5 + 40 ms).
      ["task_1", "call_a", "ok", 45],
      ["task_1", "call_b", "timeout", 100],
      // Answered after the approval: 10+10+10+100 ms after its call.
      ["task_1", "call_w", "artifact", 130],
      // The turn failed before the tool returned.
      ["task_2", "call_a", "error", 10],
    ]);
    for (const e of envelopes.filter((x) => x.type.startsWith("tool_"))) {
      expect(typeof e.payload.tool_call_id).toBe("string");
      expect(e.payload.tool_call_id).not.toBe("");
    }
    const results = envelopes.filter((e) => e.type === "tool_result").map((e) => e.payload);
    expect(results.map((r) => [r.tool_call_id, r.text])).toEqual([
      ["call_a", "found a"],
      ["call_w", "wrote it"],
    ]);
  });

  it("makes an MCP tool call (agent.mcp_tool_use) a tool row like any other, naming its server", () => {
    const projector = new UiProjector({ sessionId: SESSION });
    const envelopes = [
      dataEvent("agent.mcp_tool_use", "task_m", {
        tool_call_id: "call_m",
        name: "docs__search",
        server: "docs",
        input: { q: "roadmap" },
      }),
      messageEvent(
        "agent.tool_result",
        "task_m",
        create(MessageSchema, {
          id: "msg_mr",
          role: Role.TOOL,
          toolCallId: "call_m",
          name: "docs__search",
          parts: [{ kind: { case: "text", value: { text: "3 hits" } } }],
        }),
        1,
        25,
      ),
    ].flatMap((e) => projector.project(e));
    const call = envelopes.find((e) => e.type === "tool_call");
    expect(call?.payload).toEqual({
      tool_call_id: "call_m",
      task_id: "task_m",
      name: "docs__search",
      server: "docs",
    });
    expect(call?.debug).toMatchObject({ arguments: { q: "roadmap" } });
    const outcome = envelopes.find((e) => e.type === "tool_outcome");
    expect(outcome?.payload).toMatchObject({ tool_call_id: "call_m", status: "ok" });
    // The UI reduces it to one finished row.
    let view = emptyView();
    for (const e of envelopes)
      view = applyItem(view, { envelope: { type: e.type, payload: e.payload } });
    expect(view.tools.map((t) => [t.toolCallId, t.name, t.server, t.status])).toEqual([
      ["call_m", "docs__search", "docs", "ok"],
    ]);
  });

  it("maps the turn, approval and session lifecycle", () => {
    const envelopes = projectAll(recordedSession());
    const types = envelopes.map((e) => e.type);
    expect(types.filter((t) => t === "turn_start")).toHaveLength(2);
    const approval = envelopes.find((e) => e.type === "approval_required")!.payload;
    expect(approval).toMatchObject({
      request_id: "task_1",
      kind: "input",
      tool_call_id: "call_w",
      tool_name: "write_file",
    });
    expect(envelopes.find((e) => e.type === "approval_applied")!.payload).toMatchObject({
      request_id: "task_1",
      decision: "approved",
      signal_id: "task_1:approval",
    });
    const ends = envelopes.filter((e) => e.type === "turn_end").map((e) => e.payload);
    expect(ends.map((e) => [e.task_id, e.status])).toEqual([
      ["task_1", "completed"],
      ["task_2", "failed"],
    ]);
    expect(envelopes.find((e) => e.type === "error")!.payload).toMatchObject({
      task_id: "task_2",
      code: "turn_failed",
      message: "provider down",
    });
    const states = envelopes.filter((e) => e.type === "session_state").map((e) => e.payload.status);
    expect(states[0]).toBe("active");
    expect(states).toContain("awaiting_approval");
    expect(states.at(-1)).toBe("closed");
    expect(envelopes.filter((e) => e.type === "response").map((e) => e.payload.text)).toEqual([
      "Looking it up twice.",
      "Done.",
    ]);
    expect(envelopes.find((e) => e.type === "message")!.payload).toMatchObject({
      role: "user",
      text: "find x",
    });
  });

  it("hides debug types and debug fields from the default tier", () => {
    const envelopes = projectAll(recordedSession());
    const visible = envelopes.flatMap((e) => envelopeForTier(e, "default") ?? []);
    for (const envelope of visible) {
      expect(UI_EVENT_TIERS[envelope.type]).toBe("default");
      for (const key of ["arguments", "result", "source_event_id", "receipt_hash", "data"]) {
        expect(envelope.payload).not.toHaveProperty(key);
      }
    }
    expect(visible.map((e) => e.type)).not.toContain("usage");
    expect(visible.map((e) => e.type)).not.toContain("turn_start");
    expect(visible.map((e) => e.type)).not.toContain("raw_event");
    const debug = envelopes.flatMap((e) => envelopeForTier(e, "debug") ?? []);
    expect(debug).toHaveLength(envelopes.length);
    const call = debug.find((e) => e.type === "tool_call" && e.payload.tool_call_id === "call_a");
    expect(call?.payload.arguments).toEqual({ q: "x" });
    expect(debug.find((e) => e.type === "usage")?.payload).toMatchObject({
      input_tokens: 12,
      output_tokens: 5,
    });
  });

  it("numbers envelopes per event, whatever the tier, and parses cursors back", () => {
    const projector = new UiProjector({ sessionId: SESSION });
    const frames = recordedSession().flatMap((e) => framesOf(projector, e, "default"));
    const ids = frames.map((f) => f.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(parseCursor(formatCursor("evt_9", 3))).toEqual({ eventId: "evt_9", index: 3 });
    expect(parseCursor("evt_9")).toEqual({ eventId: "evt_9" });
    expect(parseCursor("")).toBeUndefined();
    expect(parseCursor("a:b")).toBeUndefined();
    expect(parseCursor("has space:1")).toBeUndefined();
  });

  it("builds the operator view from the frames, ignoring a repeated frame", () => {
    const projector = new UiProjector({ sessionId: SESSION });
    const frames = recordedSession().flatMap((e) => framesOf(projector, e, "default"));
    let view = emptyView();
    for (const frame of frames) {
      view = applyItem(view, {
        ...(frame.id ? { cursor: frame.id } : {}),
        envelope: { type: frame.type, payload: frame.payload },
      });
    }
    const again = frames[5]!;
    view = applyItem(view, {
      cursor: again.id!,
      envelope: { type: again.type, payload: again.payload },
    });
    expect(view.duplicates).toBe(1);
    expect(view.cursors).toHaveLength(frames.length);
    expect(view.chat.map((c) => [c.role, c.text])).toEqual([
      ["user", "find x"],
      ["assistant", "Looking it up twice."],
      ["assistant", "Done."],
    ]);
    expect(view.tools.map((t) => [t.key, t.status])).toEqual([
      ["task_1/call_a", "ok"],
      ["task_1/call_b", "timeout"],
      ["task_1/call_w", "artifact"],
      ["task_2/call_a", "error"],
    ]);
    expect(view.approvals.map((a) => a.decision)).toEqual(["approved"]);
    expect(view.receipts.map((r) => r.receiptId)).toEqual(["rcpt_1"]);
    expect(view.turns.map((t) => t.status)).toEqual(["completed", "failed"]);
    // The streamed text was replaced by the final response of its turn.
    expect(view.streaming).toEqual({});
  });

  it("ends a gated tool call as denied when the operator denies the approval", () => {
    const projector = new UiProjector({ sessionId: SESSION });
    const gate = create(MessageSchema, {
      id: "msg_g",
      role: Role.ASSISTANT,
      toolCalls: [{ id: "call_x", name: "delete_repo" }],
    });
    const envelopes = [
      taskEvent("task_9", "task.started", TaskStatus.WORKING),
      messageEvent("agent.message", "task_9", gate, 0),
      taskEvent("task_9", "task.input_required", TaskStatus.INPUT_REQUIRED, "waiting", 200),
      signal("user.tool_confirmation", "task_9", { approved: false }),
      taskEvent("task_9", "task.started", TaskStatus.WORKING),
      taskEvent("task_9", "task.completed", TaskStatus.COMPLETED),
    ].flatMap((e) => projector.project(e));
    expect(envelopes.find((e) => e.type === "approval_applied")!.payload.decision).toBe("denied");
    const outcomes = envelopes.filter((e) => e.type === "tool_outcome");
    expect(
      outcomes.map((e) => [e.payload.tool_call_id, e.payload.status, e.payload.elapsed_ms]),
    ).toEqual([["call_x", "denied", 210]]);
    expect(envelopes.filter((e) => e.type === "tool_result")).toEqual([]);
  });

  it("seeds a branch with a resume_seed checkpoint naming its parent and fork point", () => {
    const projector = new UiProjector({
      sessionId: SESSION,
      lineage: { parentSessionId: "ses_parent", forkedFromEventId: "evt_parent_7" },
    });
    const envelopes = projector.project(
      sessionEvent("session.thread_forked", SessionState.ACTIVE, "forked"),
    );
    expect(envelopes.map((e) => e.type)).toEqual(["session_state", "session_checkpoint"]);
    expect(envelopes[0]!.payload).toMatchObject({
      transition: "forked",
      parent_session_id: "ses_parent",
      branch_source_event_id: "evt_parent_7",
    });
    expect(envelopes[1]!.payload).toMatchObject({
      checkpoint_type: "resume_seed",
      parent_session_id: "ses_parent",
      resume_cursor: "evt_parent_7",
    });
  });
});
