import { describe, expect, it } from "vitest";
import { decodeRowChanges, encodeRowChanges, type RowChange } from "../../src/store/row-changes.js";

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
