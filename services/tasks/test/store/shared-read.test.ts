// sharedRead (leased-task-store.ts): concurrent reads of the journal's head
// share statements, and no caller gets a read that started before its call.
import { describe, expect, it } from "vitest";
import { sharedRead } from "../../src/store/leased-task-store.js";

describe("sharedRead", () => {
  it("gives each caller a read started after its call, shared by the callers that wait together", async () => {
    let value = 0;
    const started: number[] = [];
    const releases: (() => void)[] = [];
    const read = sharedRead(async () => {
      started.push(value);
      const seen = value;
      await new Promise<void>((resolve) => releases.push(resolve));
      return seen;
    });
    const first = read();
    // Written after the first read started: the later callers must see it.
    value = 1;
    const second = read();
    const third = read();
    expect(started).toEqual([0]);
    releases.shift()?.();
    expect(await first).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    // One more read, shared by both waiting callers.
    expect(started).toEqual([0, 1]);
    releases.shift()?.();
    expect(await second).toBe(1);
    expect(await third).toBe(1);
    // Idle again: a new call starts its own read.
    value = 2;
    const fourth = read();
    expect(started).toEqual([0, 1, 2]);
    releases.shift()?.();
    expect(await fourth).toBe(2);
  });

  it("passes a failed read on to its callers and recovers", async () => {
    let fail = true;
    const read = sharedRead(async () => {
      if (fail) throw new Error("down");
      return 7;
    });
    await expect(read()).rejects.toThrow("down");
    fail = false;
    expect(await read()).toBe(7);
  });
});
