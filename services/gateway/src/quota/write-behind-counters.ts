/**
 * Rate counters with write-behind: counting each request with its own
 * statement would add a write to every read (the most frequent requests)
 * and to every write request. Instead each gateway replica keeps, per
 * bucket, the count the shared table last reported plus the units it granted
 * since, and writes those in one statement every `flushMs` (all buckets at
 * once).
 *
 * - The first use of a bucket (and the first after its window ended) is
 *   counted in the shared table at once, which also tells the replica the
 *   window (cut from the database's clock) and what other replicas used.
 * - A unit is granted locally while `known + pending + 1 <= limit`; past
 *   that the replica flushes and asks the table (exact: refused when the
 *   shared count is at the limit). {@link WriteBehindCounters.takeAll}
 *   grants a request's counters locally only when every one of them fits,
 *   else the table decides them all, in order, as before.
 * - A flush adds the pending units to the window they were granted in and
 *   learns the shared count, other replicas' units included. Units pending
 *   for a window that has ended are dropped (they no longer count).
 *
 * The bound this buys its statement with: with one replica the limit is
 * exact (a crash loses at most the last `flushMs` of counts). With several,
 * a replica does not see the others' units until its next flush, so a
 * window can admit up to limit + (units the other replicas granted locally
 * in one flush interval) — bounded by the rate × `flushMs` per replica.
 * `flushMs = 0` turns write-behind off (one statement per request, exact
 * across replicas). The gateway uses it for reads always, and for writes
 * where it is the only replica by construction (embedded, on PGlite).
 */
import type { CounterResult, CounterTake, QuotaCounters } from "./store.js";

interface BucketState {
  /** The shared count when last synced (this replica's flushed reads included). */
  known: number;
  /** Reads granted here and not yet written. */
  pending: number;
  /** Pending reads being written by the flush in progress. */
  flushing: number;
  windowStart: Date;
  resetAt: Date;
  periodMs: number;
}

export class WriteBehindCounters {
  private readonly buckets = new Map<string, BucketState>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly counters: QuotaCounters,
    private readonly flushMs: number,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Count one unit of `bucket`; refused when the limit is used up. */
  async take(bucket: string, periodMs: number, limit: number): Promise<CounterResult> {
    const [taken] = await this.takeAll([{ bucket, periodMs, limit }]);
    if (taken === undefined) throw new Error("write-behind counters: a take returned no result");
    return taken;
  }

  /**
   * Take several counters in order, as {@link QuotaCounters.takeAll} does
   * (stopping at the first refusal): locally when every one of them fits,
   * else in the table after writing what this replica holds.
   */
  async takeAll(takes: readonly CounterTake[]): Promise<CounterResult[]> {
    if (this.flushMs <= 0 || takes.length === 0) return this.counters.takeAll(takes);
    const now = Date.now();
    const local: BucketState[] = [];
    for (const take of takes) {
      const state = this.buckets.get(take.bucket);
      if (
        state === undefined ||
        state.periodMs !== take.periodMs ||
        now >= state.resetAt.getTime() ||
        state.known + state.pending + state.flushing + (take.cost ?? 1) > take.limit
      )
        break;
      local.push(state);
    }
    if (local.length === takes.length) {
      this.schedule();
      return takes.map((take, i) => {
        const state = local[i] as BucketState;
        state.pending += take.cost ?? 1;
        return {
          allowed: true,
          used: state.known + state.pending + state.flushing,
          resetAt: state.resetAt,
          windowStart: state.windowStart,
        };
      });
    }
    if (takes.some((take) => this.held(take.bucket))) await this.flush();
    const results = await this.counters.takeAll(takes);
    for (const [i, taken] of results.entries()) {
      const take = takes[i] as CounterTake;
      if (taken.allowed) this.learn(take.bucket, take.periodMs, taken);
    }
    return results;
  }

  /** Give `cost` units back to the window starting at `windowStart`. */
  async refund(bucket: string, windowStart: Date, cost = 1): Promise<void> {
    const state = this.buckets.get(bucket);
    if (state !== undefined && state.windowStart.getTime() === windowStart.getTime()) {
      const fromPending = Math.min(state.pending, cost);
      state.pending -= fromPending;
      cost -= fromPending;
      if (cost === 0) return;
      state.known = Math.max(0, state.known - cost);
    }
    await this.counters.refund(bucket, windowStart, cost);
  }

  /** Units used in the current window of `bucket`, this replica's unwritten ones included. */
  async usage(bucket: string, periodMs: number): Promise<{ used: number; resetAt: Date }> {
    if (this.held(bucket)) await this.flush();
    return this.counters.usage(bucket, periodMs);
  }

  private held(bucket: string): boolean {
    const state = this.buckets.get(bucket);
    return state !== undefined && state.pending + state.flushing > 0;
  }

  /** What the table said about `bucket` after a take it granted. */
  private learn(bucket: string, periodMs: number, taken: CounterResult): void {
    const current = this.buckets.get(bucket);
    if (current !== undefined && current.windowStart.getTime() === taken.windowStart.getTime()) {
      // Reads granted meanwhile stay pending; the count is the table's.
      current.known = Math.max(current.known, taken.used - current.flushing);
      current.periodMs = periodMs;
    } else if (current === undefined || current.pending + current.flushing === 0) {
      this.buckets.set(bucket, {
        known: taken.used,
        pending: 0,
        flushing: 0,
        windowStart: taken.windowStart,
        resetAt: taken.resetAt,
        periodMs,
      });
    }
  }

  /** Write every pending read now (also run every `flushMs` while reads are pending). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    const batch: { bucket: string; state: BucketState; cost: number }[] = [];
    const now = Date.now();
    for (const [bucket, state] of this.buckets) {
      if (now >= state.resetAt.getTime()) {
        // The window is over: its pending reads no longer count anywhere.
        this.buckets.delete(bucket);
        continue;
      }
      if (state.pending === 0) continue;
      state.flushing = state.pending;
      state.pending = 0;
      batch.push({ bucket, state, cost: state.flushing });
    }
    if (batch.length === 0) return;
    const run = (async () => {
      try {
        const counts = await this.counters.addAll(
          batch.map(({ bucket, state, cost }) => ({
            bucket,
            windowStart: state.windowStart,
            resetAt: state.resetAt,
            cost,
          })),
        );
        for (const { bucket, state } of batch) {
          const count = counts.get(bucket);
          state.flushing = 0;
          // undefined: the table has a newer window (another replica's clock
          // passed ours); the next read asks the table.
          if (count === undefined) this.buckets.delete(bucket);
          else state.known = count;
        }
      } catch (error) {
        // Not written: the reads stay pending for the next flush.
        for (const { state, cost } of batch) {
          state.flushing = 0;
          state.pending += cost;
        }
        throw error;
      }
    })();
    this.flushing = run.finally(() => {
      this.flushing = undefined;
    });
    await this.flushing;
  }

  /** Stop the timer and write what is pending. */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().then(
        () => {
          if ([...this.buckets.values()].some((s) => s.pending > 0)) this.schedule();
        },
        (error: unknown) => {
          this.onError(error);
          this.schedule();
        },
      );
    }, this.flushMs);
    this.timer.unref();
  }
}
