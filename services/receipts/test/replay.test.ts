// Replay tasks in receipts, unit level: synthetic events shaped like the
// tasks service's (replay.started, replayed messages' metadata.replay,
// replay.completed / replay.failed) → facts → receipt, and the replay
// projection (README "Replays"). The end-to-end case, real tasks service and
// recorded harness, is replay-receipts.test.ts.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ActorKind, type Event, EventSchema, Role } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import { replayProjection } from "../src/domain/replay-projection.js";
import { newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { messageAppended } from "../src/testing/task-events.js";
import { receiptSchemaValidator, taskEvents } from "./support.js";

const SOURCE = "task_source";
const BEFORE = `sha256:${"a".repeat(64)}`;
const AFTER = `sha256:${"b".repeat(64)}`;

interface ReplayScript {
  taskId: string;
  at?: Date;
  final?: "COMPLETED" | "FAILED";
  /** Leave out replay.completed / replay.failed (deltas then come from the messages). */
  withoutEnd?: boolean;
  mode?: "exact" | "with_overrides";
  after?: string;
}

function dataEvent(taskId: string, kind: string, value: JsonObject): Event {
  return create(EventSchema, {
    kind,
    resource: { object: "task", id: taskId },
    taskId,
    actor: { id: "agent_echo", kind: ActorKind.AGENT },
    payload: { kind: { case: "data", value } },
  });
}

/** A replay task's events: the usual lifecycle plus what the tasks service adds for a replay. */
function replayEvents(script: ReplayScript): Event[] {
  const { taskId } = script;
  const mode = script.mode ?? "with_overrides";
  const after = script.after ?? AFTER;
  const base = taskEvents({ taskId, final: script.final ?? "COMPLETED", at: script.at });
  const marker = {
    source_task_id: SOURCE,
    replay_task_id: taskId,
    original_event_id: "evt_source_9",
    original_message_id: "msg_source_3",
    replay_cursor: `${SOURCE}:9`,
    mode,
    override_key: mode === "exact" ? null : "llm:main:2",
    ...(mode === "exact"
      ? {}
      : {
          receipt_delta_id: `${taskId}:llm:main:2`,
          override: {
            kind: "llm_provider_response",
            material: "metadata.llm:main:2.response",
            before_sha256: BEFORE,
            after_sha256: after,
            visibility: "receipt_only",
            reason: "try token sk-abcdefghijklmnopqrstuvwxyz0123456789",
          },
        }),
  };
  const replayed = create(EventSchema, {
    kind: "agent.message",
    resource: { object: "task", id: taskId },
    taskId,
    actor: { id: "agent_echo", kind: ActorKind.AGENT },
    payload: messageAppended(1n, {
      role: Role.ASSISTANT,
      parts: [{ kind: { case: "text", value: { text: "replayed" } } }],
      metadata: { replay: marker },
    }),
  });
  const overrides =
    mode === "exact"
      ? []
      : [{ override_key: "llm:main:2", kind: "llm_provider_response", sha256: after }];
  const started = dataEvent(taskId, "replay.started", {
    source_task_id: SOURCE,
    replay_task_id: taskId,
    mode,
    strategy: "model",
    checkpoint_id: null,
    checkpoint_event_id: null,
    overrides: overrides.map((o) => ({ ...o, visibility: "receipt_only" })),
  });
  const failed = script.final === "FAILED";
  const ended = dataEvent(taskId, failed ? "replay.failed" : "replay.completed", {
    source_task_id: SOURCE,
    replay_task_id: taskId,
    mode,
    status: failed ? "FAILED" : "COMPLETED",
    deltas:
      mode === "exact"
        ? []
        : [
            {
              delta_id: `${taskId}:llm:main:2`,
              override_key: "llm:main:2",
              kind: "llm_provider_response",
              original_event_id: "evt_source_9",
              material: "metadata.llm:main:2.response",
              before_sha256: BEFORE,
              after_sha256: after,
              reason: "what if",
            },
          ],
    unused_override_keys: [],
    ...(failed
      ? {
          failure: {
            category: "replay_dependency_unavailable",
            message: "tool:call_7 was not recorded",
          },
        }
      : {}),
  });
  const last = base.at(-1) as Event;
  const middle = [started, ...base.slice(1, -1), replayed, ...(script.withoutEnd ? [] : [ended])];
  const all = [base[0] as Event, ...middle.slice(0), last];
  const t0 = (script.at ?? new Date("2026-11-22T10:00:00Z")).getTime();
  return all.map((event, i) => {
    const copy = create(EventSchema, { ...event });
    copy.id = `evt_${taskId}_${i + 1}`;
    copy.sequence = BigInt(i + 1);
    copy.workspaceId = last.workspaceId;
    copy.sessionId = `ses_${taskId}`;
    copy.createdAt = timestampFromDate(new Date(t0 + (i + 1) * 1000));
    return copy;
  });
}

describe("receipts of replay tasks", () => {
  const key = newKey("key_replay");
  const validate = receiptSchemaValidator();

  it("carries the source, the mode and cursor, the overrides and one delta per applied override", () => {
    const { document } = receiptOf(replayEvents({ taskId: "task_r1" }), key);
    expect(validate(document)).toEqual([]);
    expect(document.replay_input.determinism).toBe("byte_deterministic");
    const [source, own, override] = document.replay_input.materials;
    expect(source).toMatchObject({
      kind: "event_log",
      id: SOURCE,
      metadata: { role: "replay_source", mode: "with_overrides", replay_cursor: `${SOURCE}:9` },
    });
    expect(own).toMatchObject({ kind: "event_log", id: "task_r1" });
    expect(override).toEqual({
      kind: "llm_provider_response",
      id: "llm:main:2",
      sha256: AFTER,
      metadata: {
        role: "replay_override",
        override_key: "llm:main:2",
        override_kind: "llm_provider_response",
        visibility: "receipt_only",
      },
    });
    expect(document.deltas).toEqual([
      {
        delta_id: "task_r1:llm:main:2",
        operation: "replace",
        path: "metadata.llm:main:2.response",
        override_key: "llm:main:2",
        event_id: "evt_source_9",
        before_sha256: BEFORE,
        after_sha256: AFTER,
        reason: "what if",
      },
    ]);
    expect(document.metadata).toMatchObject({
      trellis: { replay_of: SOURCE, replay_mode: "with_overrides" },
    });
  });

  it("takes the deltas from the replayed messages when no replay end event was seen, secrets redacted", () => {
    const { document, text } = receiptOf(
      replayEvents({ taskId: "task_r2", withoutEnd: true }),
      key,
    );
    expect(validate(document)).toEqual([]);
    expect(document.deltas).toHaveLength(1);
    expect(document.deltas?.[0]).toMatchObject({
      override_key: "llm:main:2",
      before_sha256: BEFORE,
      after_sha256: AFTER,
    });
    expect(document.deltas?.[0]?.reason).not.toContain("sk-abcdefghijklmnopqrstuvwxyz");
    expect(text).not.toContain("sk-abcdefghijklmnopqrstuvwxyz");
    expect(document.redactions?.some((r) => r.field === "/deltas/reason")).toBe(true);
  });

  it("is unavailable, naming the missing dependency, when the replay could not proceed", () => {
    const { document } = receiptOf(replayEvents({ taskId: "task_r3", final: "FAILED" }), key);
    expect(validate(document)).toEqual([]);
    expect(document.lifecycle.final_state).toBe("FAILED");
    expect(document.replay_input.determinism).toBe("unavailable");
    expect(document.replay_input.unavailable_reason).toContain("tool:call_7 was not recorded");
  });

  it("gives the same replay projection for two runs of one replay, and another for another override", () => {
    const one = receiptOf(replayEvents({ taskId: "task_run1" }), key);
    const two = receiptOf(
      replayEvents({ taskId: "task_run2_longer", at: new Date("2026-11-23T08:00:00Z") }),
      newKey("key_other"),
      `sha256:${"c".repeat(64)}`,
    );
    expect(one.hash).not.toBe(two.hash);
    const projection = replayProjection(one.text);
    expect(replayProjection(two.text)).toBe(projection);
    expect(replayProjection(two.document)).toBe(projection);
    expect(projection).not.toContain("task_run1");
    expect(projection).not.toContain("2026-11-22T");
    expect(projection).toContain('"delta_id":"<task_id>:llm:main:2"');
    expect(projection).toContain(SOURCE);
    expect(projection).toContain(AFTER);

    const other = receiptOf(
      replayEvents({ taskId: "task_run3", after: `sha256:${"d".repeat(64)}` }),
      key,
    );
    expect(replayProjection(other.text)).not.toBe(projection);
    const exact = receiptOf(replayEvents({ taskId: "task_run4", mode: "exact" }), key);
    expect(exact.document.deltas).toEqual([]);
    expect(replayProjection(exact.text)).not.toBe(projection);
  });

  it("leaves receipts of tasks that are no replay as they were", () => {
    const { document } = receiptOf(taskEvents({ taskId: "task_plain", sequenced: true }), key);
    expect(document.deltas).toBeUndefined();
    expect(document.replay_input.materials.map((m) => m.kind)).toEqual(["event_log"]);
    expect(document.metadata).not.toHaveProperty("trellis.replay_of");
  });
});
