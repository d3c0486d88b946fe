import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ToolCallPhase } from "@trellis/contracts/chat";
import {
  type Event,
  EventSchema,
  type Message,
  TaskStatus,
  ToolResultStatus,
} from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { describe, expect, it } from "vitest";
import { dispatchPathOf } from "../src/domain/dispatch.js";
import { outcomeFromDispatchError } from "../src/domain/outcome.js";
import { chunkOf, settledStatusOf } from "../src/domain/progress.js";
import { DEFAULT_REPLY_TEMPLATES } from "../src/domain/replies.js";
import {
  beginsTask,
  newlyPending,
  postResumeMessages,
  ResumeTracker,
  taskIdOf,
} from "../src/domain/resume-tracker.js";
import { resumedTail, tailByIndex, turnTail } from "../src/domain/tail.js";
import { inboundProblem } from "../src/domain/validation.js";

let seq = 0;
const status = (to: TaskStatus, from: TaskStatus, taskId = "t1"): Event =>
  create(EventSchema, {
    id: `e${++seq}`,
    kind: "task.status",
    resource: { object: "task", id: taskId },
    taskId,
    payload: { kind: { case: "taskStatusChanged", value: { status: to, previousStatus: from } } },
  });
const appended = (message: Message, taskId = "t1"): Event =>
  create(EventSchema, {
    id: `e${++seq}`,
    kind: "agent.message",
    resource: { object: "task", id: taskId },
    taskId,
    payload: { kind: { case: "messageAppended", value: { message } } },
  });
const user = (text: string) => chatToMessage({ role: "user", content: text });
const assistant = (text: string) => chatToMessage({ role: "assistant", content: text });
const { SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELED, UNSPECIFIED } = TaskStatus;

describe("harness-chat §7: tail by index", () => {
  it("takes everything from the pre-invoke length on, in order", () => {
    expect(tailByIndex(["a", "b", "c"], 1)).toEqual(["b", "c"]);
    expect(tailByIndex(["a"], 1)).toEqual([]);
    expect(() => tailByIndex([], -1)).toThrow(RangeError);
  });

  it("does not match by content: an identical message is still new", () => {
    const hello = assistant("hello");
    expect(tailByIndex([user("hi"), hello, assistant("hello")], 1)).toHaveLength(2);
  });

  it("reads a turn's tail from Task.output, skipping the input by position", () => {
    const input = { ...user("hi"), id: "m1" };
    const reply = { ...assistant("yo"), id: "m2" };
    expect(turnTail({ status: COMPLETED, input, output: [reply] })).toEqual([reply]);
    expect(turnTail({ status: COMPLETED, input, output: [input, reply] })).toEqual([reply]);
    // Suspended: the pending messages are in the output already (harness-chat §8.1).
    expect(
      turnTail({
        status: INPUT_REQUIRED,
        input,
        output: [reply],
        suspension: { pendingMessages: [reply] },
      }),
    ).toEqual([reply]);
    expect(resumedTail([reply, reply, reply], 2)).toHaveLength(1);
    expect(resumedTail([reply], 5)).toEqual([]);
  });
});

describe("harness-chat §6: dispatch path by history", () => {
  it("takes the new-session path for a missing or empty session", () => {
    expect(dispatchPathOf(undefined)).toBe("new_session");
    expect(dispatchPathOf({ messageCount: 0n })).toBe("new_session");
    expect(dispatchPathOf({ messageCount: 2n })).toBe("existing_session");
  });
});

describe("harness-chat §3.1 / §5.1: inbound checks", () => {
  it("refuses an empty session id before looking at the message", () => {
    expect(inboundProblem({ sessionId: " ", message: user("hi") })?.path).toBe("session_id");
    expect(inboundProblem({ sessionId: "s", message: undefined })?.path).toBe("message");
    expect(inboundProblem({ sessionId: "s", message: user("hi") })).toBeUndefined();
  });

  it("answers a message the tasks service refused as chat_message_shape_invalid", () => {
    const outcome = outcomeFromDispatchError(
      "s",
      {
        code: Code.InvalidArgument,
        reason: "invalid_request",
        param: "input.tool_call_id",
        message: "tool_call_id c1 does not match an earlier assistant tool call",
      },
      DEFAULT_REPLY_TEMPLATES,
    );
    expect(outcome?.kind.case).toBe("errored");
    if (outcome?.kind.case !== "errored") return;
    expect(outcome.kind.value.errorCategory).toBe("chat_message_shape_invalid");
    expect(outcome.kind.value.diagnostic).toContain("message.tool_call_id");
  });
});

describe("harness-chat §8.2: which turns the listener reports", () => {
  const run = (events: Event[]) => {
    const tracker = new ResumeTracker("t1");
    return { tracker, verdicts: events.flatMap((e) => tracker.observe(e) ?? []) };
  };

  it("never reports a turn that did not suspend", () => {
    const { tracker, verdicts } = run([
      status(SUBMITTED, UNSPECIFIED),
      appended(user("hi")),
      status(WORKING, SUBMITTED),
      appended(assistant("hello")),
      status(COMPLETED, WORKING),
    ]);
    expect(verdicts).toEqual([]);
    expect(tracker.finished).toBe(true);
  });

  it("reports the resumed turn once, never the suspending one", () => {
    const suspension = status(INPUT_REQUIRED, WORKING);
    suspension.createdAt = {
      $typeName: "google.protobuf.Timestamp",
      seconds: 1_000n,
      nanos: 5_000_000,
    };
    const done = status(COMPLETED, WORKING);
    const { tracker, verdicts } = run([
      status(SUBMITTED, UNSPECIFIED),
      status(WORKING, SUBMITTED),
      suspension,
      status(WORKING, INPUT_REQUIRED),
      done,
    ]);
    expect(verdicts).toEqual([
      { taskId: "t1", status: COMPLETED, eventId: done.id, suspendedAtMs: 1_000_005 },
    ]);
    expect(tracker.finished).toBe(true);
  });

  it("reports each resume of a task that suspends again", () => {
    const { verdicts } = run([
      status(SUBMITTED, UNSPECIFIED),
      status(WORKING, SUBMITTED),
      status(INPUT_REQUIRED, WORKING),
      status(WORKING, INPUT_REQUIRED),
      status(INPUT_REQUIRED, WORKING),
      status(WORKING, INPUT_REQUIRED),
      status(COMPLETED, WORKING),
    ]);
    expect(verdicts.map((v) => v.status)).toEqual([INPUT_REQUIRED, COMPLETED]);
  });

  it("reports a suspended turn that the signal failed or canceled", () => {
    for (const end of [FAILED, CANCELED]) {
      const { verdicts } = run([
        status(WORKING, SUBMITTED),
        status(INPUT_REQUIRED, WORKING),
        status(end, INPUT_REQUIRED),
      ]);
      expect(verdicts.map((v) => v.status)).toEqual([end]);
    }
  });

  it("is in a suspension cycle from the suspension until the resumed run settles", () => {
    const tracker = new ResumeTracker("t1");
    tracker.observe(status(WORKING, SUBMITTED));
    expect(tracker.inSuspensionCycle).toBe(false);
    tracker.observe(status(INPUT_REQUIRED, WORKING));
    expect(tracker.inSuspensionCycle).toBe(true);
    tracker.observe(status(WORKING, INPUT_REQUIRED));
    expect(tracker.inSuspensionCycle).toBe(true);
    tracker.observe(status(COMPLETED, WORKING));
    expect(tracker.inSuspensionCycle).toBe(false);
  });

  it("ignores status notes that change nothing", () => {
    const tracker = new ResumeTracker("t1");
    tracker.observe(status(WORKING, SUBMITTED));
    expect(tracker.observe(status(WORKING, WORKING))).toBeUndefined();
  });

  it("knows which task an event is about and whether it begins one", () => {
    const first = status(SUBMITTED, UNSPECIFIED, "t7");
    expect(taskIdOf(first)).toBe("t7");
    expect(beginsTask(first)).toBe(true);
    expect(beginsTask(status(WORKING, SUBMITTED))).toBe(false);
    expect(taskIdOf(create(EventSchema, { resource: { object: "session", id: "s" } }))).toBe(
      undefined,
    );
  });
});

describe("harness-chat §8.2: the post-resume messages", () => {
  const at = (ms: number) => ({
    $typeName: "google.protobuf.Timestamp" as const,
    seconds: BigInt(Math.floor(ms / 1000)),
    nanos: (ms % 1000) * 1_000_000,
  });
  const pendingMsg = { ...assistant("waiting for approval"), id: "m1", createdAt: at(1_000) };
  const sent = { ...assistant("sent"), id: "m2", createdAt: at(2_000) };

  it("leaves out the pending messages by id", () => {
    expect(postResumeMessages([pendingMsg, sent], { ids: new Set(["m1"]) })).toEqual([sent]);
  });

  it("falls back to the suspension's time when the ids are unknown", () => {
    expect(postResumeMessages([pendingMsg, sent], { suspendedAtMs: 1_500 })).toEqual([sent]);
    expect(postResumeMessages([pendingMsg, sent], {})).toEqual([pendingMsg, sent]);
  });

  it("reports only newly pending messages of a second suspension", () => {
    const again = { ...assistant("one more approval"), id: "m3", createdAt: at(3_000) };
    expect(newlyPending([pendingMsg, again], { ids: new Set(["m1"]) })).toEqual([again]);
  });
});

describe("harness-chat §9: progress chunks", () => {
  it("streams appended replies, not the input", () => {
    expect(chunkOf(appended(user("hi")))).toBeUndefined();
    const chunk = chunkOf(appended(assistant("hello")));
    expect(chunk?.kind.case).toBe("message");
  });

  it("maps deltas and tool progress", () => {
    const data = (kind: string, value: Record<string, string>) =>
      create(EventSchema, { kind, payload: { kind: { case: "data", value } } });
    expect(chunkOf(data("agent.text_delta", { text: "he" }))?.kind).toEqual({
      case: "textDelta",
      value: expect.objectContaining({ text: "he" }),
    });
    expect(chunkOf(data("agent.thinking_delta", { text: "hm" }))?.kind.case).toBe("thinkingDelta");
    const started = chunkOf(data("agent.tool_use", { tool_call_id: "c1", name: "weather" }));
    expect(started?.kind.case === "toolCallProgress" && started.kind.value.phase).toBe(
      ToolCallPhase.STARTED,
    );
    const finished = chunkOf(data("tool.failed", { tool_call_id: "c1", name: "weather" }));
    expect(finished?.kind.case === "toolCallProgress" && finished.kind.value.status).toBe(
      ToolResultStatus.ERROR,
    );
    expect(chunkOf(data("artifact.created", {}))).toBeUndefined();
  });

  it("says when an event settles the task", () => {
    expect(settledStatusOf(status(COMPLETED, WORKING))).toBe(COMPLETED);
    expect(settledStatusOf(status(INPUT_REQUIRED, WORKING))).toBe(INPUT_REQUIRED);
    expect(settledStatusOf(status(WORKING, SUBMITTED))).toBeUndefined();
  });
});
