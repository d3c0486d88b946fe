// IdleBackoff: a polling loop that finds nothing wakes less and less often,
// up to a bound, and polls at its base interval again as soon as work shows.
// Fake timers: the assertions count rounds over simulated time, never wall time.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { IdleBackoff } from "../src/idle-backoff.js";

/** A loop like the services' sweeps: wait, poll, grow or reset. */
function loop(backoff: IdleBackoff, hasWork: () => boolean) {
  const stop = new AbortController();
  const rounds: number[] = [];
  const start = Date.now();
  const running = (async () => {
    while (!stop.signal.aborted) {
      await backoff.wait(stop.signal);
      if (stop.signal.aborted) return;
      rounds.push(Date.now() - start);
      if (hasWork()) backoff.reset();
      else backoff.idle();
    }
  })();
  return {
    rounds,
    async stop() {
      stop.abort();
      await running;
    },
  };
}

describe("IdleBackoff", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("doubles the wait of an idle loop up to its bound", async () => {
    const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 8000 });
    const l = loop(backoff, () => false);
    await vi.advanceTimersByTimeAsync(60_000);
    // 1, 2, 4, 8, then 8 s each: 1, 3, 7, 15, 23, 31, 39, 47, 55.
    expect(l.rounds).toEqual([1000, 3000, 7000, 15_000, 23_000, 31_000, 39_000, 47_000, 55_000]);
    expect(backoff.delayMs).toBe(8000);
    await l.stop();
  });

  it("polls at the base interval while every round finds work", async () => {
    const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 16_000 });
    const l = loop(backoff, () => true);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(l.rounds).toHaveLength(10);
    expect(backoff.delayMs).toBe(1000);
    await l.stop();
  });

  it("cuts a long idle wait short when work arrives", async () => {
    const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 16_000 });
    const l = loop(backoff, () => false);
    await vi.advanceTimersByTimeAsync(31_000); // rounds at 1, 3, 7, 15, 31: now waiting 16 s
    expect(l.rounds).toEqual([1000, 3000, 7000, 15_000, 31_000]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(l.rounds).toHaveLength(5);
    // Work arrives 5 s into a 16 s wait: more than the base has passed, so at once.
    backoff.reset();
    await vi.advanceTimersByTimeAsync(0);
    expect(l.rounds).toEqual([1000, 3000, 7000, 15_000, 31_000, 36_000]);
    await l.stop();
  });

  it("ends a wait reset early at the base interval from its start, not sooner", async () => {
    const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 8000 });
    backoff.idle();
    backoff.idle(); // 4 s
    let ended = false;
    const waiting = backoff.wait().then(() => {
      ended = true;
    });
    await vi.advanceTimersByTimeAsync(300);
    backoff.reset();
    await vi.advanceTimersByTimeAsync(600);
    expect(ended).toBe(false);
    await vi.advanceTimersByTimeAsync(100);
    expect(ended).toBe(true);
    await waiting;
    expect(backoff.delayMs).toBe(1000);
  });

  it("ends a wait when its signal aborts and leaves no timer behind", async () => {
    const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 8000 });
    const stop = new AbortController();
    const waiting = backoff.wait(stop.signal);
    expect(vi.getTimerCount()).toBe(1);
    stop.abort();
    await waiting;
    expect(vi.getTimerCount()).toBe(0);
    // Already aborted: resolves without a timer.
    await backoff.wait(stop.signal);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("grows a zero base too, and refuses bounds that make no sense", () => {
    const zero = new IdleBackoff({ baseMs: 0, maxMs: 100 });
    zero.idle();
    expect(zero.delayMs).toBe(2);
    expect(() => new IdleBackoff({ baseMs: 1000, maxMs: 500 })).toThrow(RangeError);
    expect(() => new IdleBackoff({ baseMs: -1, maxMs: 500 })).toThrow(RangeError);
    expect(() => new IdleBackoff({ baseMs: 1, maxMs: 5, factor: 0.5 })).toThrow(RangeError);
  });
});
