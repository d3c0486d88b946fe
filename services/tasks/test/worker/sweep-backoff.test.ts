// The mailbox sweep (the cross-replica fallback) backs off while it finds
// nothing, and sweeps at its base interval again once it finds work. A store
// that only answers the sweep's two reads; fake timers, counted sweeps.

import type { AgentExecutor } from "@trellis/execution";
import { createLogger } from "@trellis/runtime";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { TaskStore } from "../../src/store/task-store.js";
import { TurnRunner } from "../../src/worker/turn-runner.js";

function sweepCountingStore(queued: () => string[]) {
  const counts = { sweeps: 0, claims: 0 };
  const store = {
    async recoverExpired() {
      counts.sweeps++;
      return [];
    },
    async sessionsWithQueuedWork() {
      return queued();
    },
    async claimNext() {
      counts.claims++;
      return undefined; // another replica was quicker
    },
    async renewLeases() {
      return [];
    },
  };
  return { store: store as unknown as TaskStore, counts };
}

describe("the mailbox sweep while idle", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function runner(store: TaskStore) {
    return new TurnRunner({
      store,
      executor: {} as AgentExecutor,
      owner: "replica-1",
      leaseMs: 30_000,
      sweepMs: 1000,
      sweepIdleMaxMs: 8000,
      cancelGraceMs: 100,
      shutdownGraceMs: 100,
      logger: createLogger({ service: "sweep-test", level: "error" }),
    });
  }

  it("sweeps less and less often while it finds nothing", async () => {
    const { store, counts } = sweepCountingStore(() => []);
    const r = runner(store);
    await r.start();
    expect(counts.sweeps).toBe(1); // at start
    await vi.advanceTimersByTimeAsync(60_000);
    // Every second before: 60 more. Now at 1, 3, 7, 15, then every 8 s: 9 more.
    expect(counts.sweeps).toBe(1 + 9);
    await r.stop();
  });

  it("sweeps at the base interval while sweeps find queued work", async () => {
    const { store, counts } = sweepCountingStore(() => ["ses_1"]);
    const r = runner(store);
    await r.start();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(counts.sweeps).toBe(1 + 10);
    expect(counts.claims).toBe(11);
    await r.stop();
  });

  it("comes back to the base interval as soon as work shows up", async () => {
    let queued: string[] = [];
    const { store, counts } = sweepCountingStore(() => queued);
    const r = runner(store);
    await r.start();
    await vi.advanceTimersByTimeAsync(31_000); // sweeps at 0, 1, 3, 7, 15, 23, 31: next in 8 s
    expect(counts.sweeps).toBe(7);
    queued = ["ses_1"];
    await vi.advanceTimersByTimeAsync(8000); // the long wait ends; it finds work
    expect(counts.sweeps).toBe(8);
    await vi.advanceTimersByTimeAsync(3000);
    expect(counts.sweeps).toBe(11);
    await r.stop();
  });
});
