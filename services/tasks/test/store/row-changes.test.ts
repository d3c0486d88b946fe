import { describe, expect, it } from "vitest";
import {
  decodeRowChanges,
  encodeRowChanges,
  type RowChange,
  rowWrites,
} from "../../src/store/row-changes.js";

describe("row changes as journal bodies", () => {
  it("round-trip bigints, bytes (views included), dates, nulls and nested values through the bytes", () => {
    const backing = new Uint8Array([9, 1, 2, 3, 9]);
    const changes: RowChange[] = [
      {
        op: "insert",
        table: "messages",
        values: {
          id: "msg_1",
          position: 12345678901234567890n,
          content: backing.subarray(1, 4),
          created_at: new Date("2026-11-29T19:40:00.123Z"),
          failure: null,
          count: 3,
          done: false,
          skipped: undefined,
          meta: { at: new Date(0), ids: [1n, "a"] },
        },
      },
      { op: "update", table: "sessions", id: "ses_1", set: { turn_count: 2n, state: 1 } },
    ];
    const body = encodeRowChanges(changes);
    // A copy of the bytes: parsed, not taken from this process's memory.
    const decoded = decodeRowChanges(new Uint8Array(body));
    expect(decoded).not.toBe(changes);
    const { skipped: _, ...values } = (changes[0] as { values: Record<string, unknown> }).values;
    expect(decoded).toEqual([
      {
        op: "insert",
        table: "messages",
        values: { ...values, content: new Uint8Array([1, 2, 3]) },
      },
      changes[1],
    ]);
    expect(decodeRowChanges(body)).toBe(changes);
  });
});

describe("a batch's row changes as one statement's writes", () => {
  const at = new Date("2026-12-02T05:00:00Z");
  const message = (session: string, workspace?: string): RowChange => ({
    op: "insert",
    table: "messages",
    values: {
      id: `msg_${session}`,
      session_id: session,
      ...(workspace ? { workspace_id: workspace } : {}),
    },
  });
  const task = (id: string, runState: string): RowChange => ({
    op: "insert",
    table: "tasks",
    values: { id, session_id: "ses_1", workspace_id: "default", run_state: runState },
  });
  const runState = (id: string, state: string): RowChange => ({
    op: "update",
    table: "tasks",
    id,
    set: { run_state: state, updated_at: at },
  });

  it("gives one write per table and shape for a turn's changes", () => {
    const writes = rowWrites([
      task("task_1", "running"),
      message("ses_1", "default"),
      runState("task_1", "done"),
      {
        op: "update",
        table: "sessions",
        id: "ses_1",
        workspaceId: "default",
        set: { turn_count: 1n },
      },
    ]);
    // The task's insert takes its later update; messages; the session's update.
    expect(writes).toHaveLength(3);
  });

  it("stages a hand-over's writes and declines a batch that needs a read first", () => {
    // A task takes the session's mailbox another task of the batch releases:
    // the release runs first (a unique index, row by row).
    const stages = { first: [expect.any(Function)], rest: [expect.any(Function)] };
    expect(rowWrites([runState("task_0", "done"), task("task_1", "running")])).toMatchObject(
      stages,
    );
    expect(rowWrites([runState("task_1", "running"), runState("task_0", "done")])).toMatchObject(
      stages,
    );
    // An old journal's message without its workspace: found by a read first.
    expect(rowWrites([message("ses_1")])).toBeUndefined();
    // Taking alone, or releasing alone, is one statement.
    expect(rowWrites([task("task_1", "running")])).toHaveLength(1);
    expect(rowWrites([runState("task_0", "done")])).toHaveLength(1);
  });
});
