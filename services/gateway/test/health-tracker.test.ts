// Session health as a projection of log events judged against a policy at a
// given time: each flag, the score, breaches, enforcement read back from the
// log, snapshot keys that change only when the health does, and typed errors
// for a malformed policy.
import { create, fromJson, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { HealthTracker, healthPolicyOf } from "../src/health/index.js";

const SESSION = "ses_health";
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

/** Builds events at explicit times (ms after T0). */
function recorder() {
  let seq = 0;
  const event = (at: number, kind: string, fields: MessageInitShape<typeof EventSchema>) => {
    seq += 1;
    return create(EventSchema, {
      id: `evt_${seq}`,
      kind,
      sessionId: SESSION,
      createdAt: timestampFromMs(T0 + at),
      sequence: BigInt(seq),
      ...fields,
    });
  };
  return {
    task: (at: number, taskId: string, kind: string, status: TaskStatus, reason = "") =>
      event(at, kind, {
        taskId,
        resource: { object: "task", id: taskId },
        payload: {
          kind: { case: "taskStatusChanged", value: { status, previousStatus: 0, reason } },
        },
      }),
    data: (at: number, taskId: string, kind: string, data: JsonObject) =>
      event(at, kind, {
        taskId,
        resource: { object: "task", id: taskId },
        payload: { kind: { case: "data", value: data } },
      }),
    toolCall: (at: number, taskId: string, id: string, name: string, args: JsonObject) =>
      event(at, "agent.message", {
        taskId,
        payload: {
          kind: {
            case: "messageAppended",
            value: {
              position: BigInt(seq),
              message: create(MessageSchema, {
                id: `msg_${seq}`,
                role: Role.ASSISTANT,
                toolCalls: [{ id, name, arguments: fromJson(ValueSchema, args) }],
              }),
            },
          },
        },
      }),
  };
}

function tracked(events: Event[]): HealthTracker {
  const tracker = new HealthTracker(SESSION);
  for (const e of events) tracker.apply(e);
  return tracker;
}

const noPolicy = healthPolicyOf(undefined);

describe("session health", () => {
  it("is healthy with score 100 for an idle session whose turn completed", () => {
    const r = recorder();
    const tracker = tracked([
      r.task(0, "t1", "task.submitted", TaskStatus.SUBMITTED),
      r.task(10, "t1", "task.started", TaskStatus.WORKING),
      r.task(1010, "t1", "task.completed", TaskStatus.COMPLETED),
    ]);
    const { snapshot, breaches } = tracker.snapshot(T0 + 60_000, noPolicy);
    expect(snapshot).toMatchObject({
      session_id: SESSION,
      score: 100,
      status: "healthy",
      flags: { stuck: false, waiting: false, degraded: false, budget_pressure: false },
      last_event_id: "evt_3",
    });
    expect((snapshot.metrics as JsonObject).runtime_ms).toBe(1000);
    expect(breaches).toEqual([]);
  });

  it("flags a running turn stuck once it recorded nothing for stuck_after_seconds", () => {
    const r = recorder();
    const policy = healthPolicyOf({ health_policy: { stuck_after_seconds: 30 } });
    const tracker = tracked([
      r.task(0, "t1", "task.started", TaskStatus.WORKING),
      r.data(5_000, "t1", "agent.text_delta", { text: "thinking about it" }),
    ]);
    const before = tracker.snapshot(T0 + 34_000, policy);
    expect(before.snapshot.flags).toMatchObject({ stuck: false });
    const after = tracker.snapshot(T0 + 35_000, policy);
    expect(after.snapshot.flags).toMatchObject({ stuck: true });
    expect(after.snapshot.score).toBe(60);
    expect(after.snapshot.reasons).toEqual([
      expect.objectContaining({ flag: "stuck", message: expect.stringContaining("turn t1") }),
    ]);
    expect(after.key).not.toBe(before.key);
    // The clock alone does not change the key while nothing else changes.
    expect(tracker.snapshot(T0 + 90_000, policy).key).toBe(after.key);
    // Progress clears it.
    tracker.apply(r.data(91_000, "t1", "agent.text_delta", { text: "…" }));
    expect(tracker.snapshot(T0 + 92_000, policy).snapshot.flags).toMatchObject({ stuck: false });
  });

  it("flags waiting (not stuck) while a turn waits for approval", () => {
    const r = recorder();
    const policy = healthPolicyOf({ health_policy: { stuck_after_seconds: 1 } });
    const tracker = tracked([
      r.task(0, "t1", "task.started", TaskStatus.WORKING),
      r.toolCall(10, "t1", "call_1", "write_file", { path: "a" }),
      r.task(20, "t1", "task.input_required", TaskStatus.INPUT_REQUIRED),
    ]);
    const { snapshot, activeTaskId } = tracker.snapshot(T0 + 60_000, policy);
    expect(snapshot.flags).toMatchObject({ waiting: true, stuck: false });
    expect(snapshot.recovery_hint).toBe("answer the pending approval");
    expect(activeTaskId).toBe("t1");
  });

  it("counts failed tools and loops, flags degraded, and crosses the policy's limits", () => {
    const r = recorder();
    const policy = healthPolicyOf({
      health_policy: { max_failed_tool_calls: 2, max_loop_warnings: 1, max_tokens: 1000 },
    });
    expect(policy.action).toBe("cancel_turn");
    const events = [
      r.task(0, "t1", "task.started", TaskStatus.WORKING),
      r.data(10, "t1", "agent.model_call", { input_tokens: 700, output_tokens: 150 }),
    ];
    // The same call three times in a row is a loop warning.
    for (let i = 1; i <= 3; i++) {
      events.push(
        r.data(10 + i * 10, "t1", "agent.tool_use", {
          tool_call_id: `c${i}`,
          name: "search",
          input: { q: "same" },
        }),
      );
      events.push(
        r.data(15 + i * 10, "t1", "tool.failed", { tool_call_id: `c${i}`, status: "error" }),
      );
    }
    const tracker = tracked(events);
    const { snapshot, breaches, activeTaskId } = tracker.snapshot(T0 + 100, policy);
    expect(snapshot.metrics).toMatchObject({
      total_tokens: 850,
      failed_tool_calls: 3,
      loop_warnings: 1,
    });
    expect(snapshot.flags).toMatchObject({ degraded: true, budget_pressure: true });
    expect(breaches.map((b) => b.metric).sort()).toEqual(["failed_tool_calls", "loop_warnings"]);
    // 850 of 1000 tokens is pressure, not a breach.
    expect((snapshot.reasons as JsonObject[]).map((x) => x.message)).toContain(
      "tokens at 85% of 1000",
    );
    expect(activeTaskId).toBe("t1");
    expect(snapshot.status).toBe("unhealthy");
  });

  it("reads the enforcement back from the turn the policy canceled", () => {
    const r = recorder();
    const tracker = tracked([
      r.task(0, "t1", "task.started", TaskStatus.WORKING),
      r.task(
        100,
        "t1",
        "task.canceled",
        TaskStatus.CANCELED,
        "health policy: runtime_minutes 0.02 reached the limit 0.01",
      ),
    ]);
    const { snapshot, activeTaskId } = tracker.snapshot(T0 + 200, noPolicy);
    expect((snapshot.policy as JsonObject).enforcement).toMatchObject({
      action: "cancel_turn",
      task_id: "t1",
      reason: expect.stringContaining("runtime_minutes"),
    });
    // A canceled turn is not a degraded session, and nothing is active any more.
    expect(snapshot.flags).toMatchObject({ degraded: false });
    expect(activeTaskId).toBeUndefined();
  });

  it("raises budget pressure on a context warning until the context is compacted", () => {
    const r = recorder();
    const tracker = tracked([
      r.data(0, "t1", "context.warning", { estimated_tokens: 900, budget_tokens: 1000 }),
    ]);
    expect(tracker.snapshot(T0, noPolicy).snapshot.flags).toMatchObject({ budget_pressure: true });
    tracker.apply(r.data(10, "t1", "context.compacted", { original_count: 9, compacted_count: 3 }));
    expect(tracker.snapshot(T0, noPolicy).snapshot.flags).toMatchObject({ budget_pressure: false });
  });

  it("refuses a malformed policy with a typed error naming the field", () => {
    const cases: Array<[JsonObject, string]> = [
      [{ health_policy: "strict" }, "metadata.health_policy"],
      [{ health_policy: { max_tokens: -1 } }, "metadata.health_policy.max_tokens"],
      [{ health_policy: { max_cost: 3 } }, "metadata.health_policy.max_cost"],
      [{ health_policy: { action: "explode" } }, "metadata.health_policy.action"],
      [{ health_policy: { stuck_after_seconds: 0 } }, "metadata.health_policy.stuck_after_seconds"],
    ];
    for (const [metadata, param] of cases) {
      let caught: unknown;
      try {
        healthPolicyOf(metadata);
      } catch (error) {
        caught = error;
      }
      expect(isTrellisError(caught), JSON.stringify(metadata)).toBe(true);
      expect(caught).toMatchObject({ reason: "invalid_request", param });
    }
  });
});
