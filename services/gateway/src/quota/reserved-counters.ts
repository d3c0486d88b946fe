/**
 * Exact counters across replicas without a statement per request: a replica
 * takes units from the shared table in blocks and grants from its block in
 * memory. Used for write rates and the daily task quota wherever several
 * gateway replicas may share the table (PostgreSQL).
 *
 * | rule | how |
 * |---|---|
 * | exact | every unit granted was first counted in the table by the statement that refuses past the limit, so all replicas together never grant more than the limit |
 * | the request's own unit | a request whose counters all have units in the replica's blocks runs no statement; otherwise one statement takes, for each counter short of units, its cost plus a block of spare units, in order, stopping at the first refusal (as {@link QuotaCounters.takeAll} does) |
 * | block size | doubles with each refill of a bucket in use (1, 2, 4, … up to `maxBlock`), and is never more than an eighth of what the table had left: near the limit every request is counted on its own, exactly as without blocks. One refill of a bucket at a time asks for spare units; requests short of units meanwhile ask for their own (a burst does not take a block each). A refill refused for its spare units is asked again without them |
 * | spare units given back | units unused for `holdMs`, at {@link ReservedCounters.close}, and refunds of units of the current block; units of a window that ended are dropped (they no longer count) |
 * | the price | a replica may be refused while another holds spare units it has not used, for at most `holdMs`; a replica that crashes takes its spare units with it until the window ends (under-admits, never over-admits); usage reports count other replicas' spare units as used |
 */
import type { CounterResult, CounterTake, QuotaCounters } from "./store.js";

interface Block {
  windowStart: Date;
  resetAt: Date;
  periodMs: number;
  /** Units taken in the table and not granted yet. */
  spare: number;
  /** The table's count after this replica's last take (spare units included). */
  counted: number;
  /** Spare units the next refill asks for (before the limit's share). */
  nextBlock: number;
  /** When a unit was last granted from the block. */
  lastUsedAt: number;
}

export interface ReservedCountersOptions {
  /** The largest block of spare units one refill takes (1: none, a statement per request). */
  maxBlock: number;
  /** How long unused spare units stay with the replica before they are given back. */
  holdMs: number;
  onError: (error: unknown) => void;
}

export class ReservedCounters {
  private readonly blocks = new Map<string, Block>();
  /** Buckets with a refill asking for spare units in flight. */
  private readonly refilling = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** Closed: every take goes to the table, and no block is kept. */
  private closed = false;

  constructor(
    private readonly counters: QuotaCounters,
    private readonly options: ReservedCountersOptions,
  ) {}

  /**
   * Take several counters in order, as {@link QuotaCounters.takeAll} does:
   * the results of the granted counters, then the refused one's.
   */
  async takeAll(takes: readonly CounterTake[]): Promise<CounterResult[]> {
    if (this.options.maxBlock <= 1 || takes.length === 0 || this.closed) {
      return this.counters.takeAll(takes);
    }
    const now = Date.now();
    // Served from the blocks at once (before any await, so concurrent calls
    // cannot grant the same spare unit twice); the others (`short`) from the table.
    const short: number[] = [];
    const results: (CounterResult | undefined)[] = takes.map((take, i) => {
      const block = this.current(take, now);
      const cost = take.cost ?? 1;
      if (block === undefined || block.spare < cost) {
        short.push(i);
        return undefined;
      }
      block.spare -= cost;
      block.lastUsedAt = now;
      return this.granted(block);
    });
    if (short.length > 0) {
      const fromTable = await this.refill(takes, short, now);
      for (const [j, result] of fromTable.entries()) results[short[j] as number] = result;
      const refusedAt = fromTable.findIndex((r) => !r.allowed);
      if (refusedAt >= 0) {
        // Counters after the refused one are not counted: their units go back.
        const stop = short[refusedAt] as number;
        const returns: Promise<void>[] = [];
        for (let i = stop + 1; i < takes.length; i++) {
          const take = takes[i] as CounterTake;
          const served = results[i];
          if (served) returns.push(this.refund(take.bucket, served.windowStart, take.cost ?? 1));
        }
        results.length = stop + 1;
        await Promise.all(returns);
      }
    }
    // A refill that was out when the counters closed gives its spare units back.
    if (this.closed) await this.release(0);
    else if (this.blocks.size > 0) this.schedule();
    return results as CounterResult[];
  }

  /** The bucket's block, when it belongs to the window now running. */
  private current(take: CounterTake, now: number): Block | undefined {
    const block = this.blocks.get(take.bucket);
    if (block === undefined) return undefined;
    if (block.periodMs !== take.periodMs || now >= block.resetAt.getTime()) {
      this.blocks.delete(take.bucket);
      return undefined;
    }
    return block;
  }

  /**
   * Take the counters at `short` (indexes into `takes`) from the table, each
   * with spare units where the limit leaves room; a counter refused for its
   * spare units is asked again for its cost alone. One result per counter
   * taken, stopping at the first refusal.
   */
  private async refill(
    takes: readonly CounterTake[],
    short: readonly number[],
    now: number,
  ): Promise<CounterResult[]> {
    const wanted = short.map((i) => {
      const take = takes[i] as CounterTake;
      const cost = take.cost ?? 1;
      const block = this.blocks.get(take.bucket);
      // A first use is counted alone: it learns the window and the count.
      // So is a request short while another refill of the bucket is out.
      const left =
        block === undefined || this.refilling.has(take.bucket)
          ? 0
          : take.limit - block.counted - cost;
      const spare = Math.max(
        0,
        Math.min(block?.nextBlock ?? 0, this.options.maxBlock - 1, Math.floor(left / 8)),
      );
      return { take, cost, spare };
    });
    const asking = wanted.filter((w) => w.spare > 0).map((w) => w.take.bucket);
    for (const bucket of asking) this.refilling.add(bucket);
    let results: CounterResult[];
    try {
      results = await this.counters.takeAll(
        wanted.map(({ take, cost, spare }) => ({ ...take, cost: cost + spare })),
      );
    } finally {
      for (const bucket of asking) this.refilling.delete(bucket);
    }
    const refused = results.length - 1;
    const last = results[refused];
    if (last !== undefined && !last.allowed && (wanted[refused]?.spare ?? 0) > 0) {
      // Refused for its spare units: the rest again, each for its cost alone.
      for (const w of wanted.slice(refused)) w.spare = 0;
      const again = await this.counters.takeAll(
        wanted.slice(refused).map(({ take, cost }) => ({ ...take, cost })),
      );
      results.splice(refused, 1, ...again);
    }
    for (const [j, result] of results.entries()) {
      if (!result.allowed) break;
      const { take, spare } = wanted[j] as (typeof wanted)[number];
      const old = this.blocks.get(take.bucket);
      const sameWindow = old?.windowStart.getTime() === result.windowStart.getTime();
      this.blocks.set(take.bucket, {
        windowStart: result.windowStart,
        resetAt: result.resetAt,
        periodMs: take.periodMs,
        spare: (sameWindow ? (old?.spare ?? 0) : 0) + spare,
        counted: result.used,
        // Grows with each refill that took spare units (a first use starts it at 1).
        nextBlock:
          old === undefined || spare > 0
            ? Math.min(this.options.maxBlock - 1, Math.max(1, (old?.nextBlock ?? 0) * 2))
            : old.nextBlock,
        lastUsedAt: now,
      });
      // Units used: the count less this block's spare ones.
      results[j] = { ...result, used: result.used - spare };
    }
    return results;
  }

  private granted(block: Block): CounterResult {
    return {
      allowed: true,
      used: block.counted - block.spare,
      resetAt: block.resetAt,
      windowStart: block.windowStart,
    };
  }

  /** Give `cost` units back to the window starting at `windowStart` (to the block when it is current). */
  async refund(bucket: string, windowStart: Date, cost = 1): Promise<void> {
    const block = this.blocks.get(bucket);
    if (block !== undefined && block.windowStart.getTime() === windowStart.getTime()) {
      block.spare += cost;
      return;
    }
    await this.counters.refund(bucket, windowStart, cost);
  }

  /** Units used in the current window of `bucket`: the table's count less this replica's spare units. */
  async usage(bucket: string, periodMs: number): Promise<{ used: number; resetAt: Date }> {
    const usage = await this.counters.usage(bucket, periodMs);
    const block = this.blocks.get(bucket);
    if (block === undefined || block.resetAt.getTime() !== usage.resetAt.getTime()) return usage;
    return { used: Math.max(0, usage.used - block.spare), resetAt: usage.resetAt };
  }

  /** Give back the spare units of blocks unused for `holdMs` (all of them with `idleMs` 0). */
  async release(idleMs = this.options.holdMs): Promise<void> {
    const now = Date.now();
    const returns: Promise<void>[] = [];
    for (const [bucket, block] of this.blocks) {
      if (now >= block.resetAt.getTime()) {
        this.blocks.delete(bucket);
        continue;
      }
      if (now - block.lastUsedAt < idleMs) continue;
      this.blocks.delete(bucket);
      if (block.spare > 0) {
        returns.push(
          this.counters.refund(bucket, block.windowStart, block.spare).catch((error: unknown) => {
            // Not given back: the replica under-admits until the window ends.
            this.options.onError(error);
          }),
        );
      }
    }
    await Promise.all(returns);
  }

  /** Stop the timer and give every spare unit back. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.release(0);
  }

  private schedule(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.release().finally(() => {
        if (this.blocks.size > 0) this.schedule();
      });
    }, this.options.holdMs);
    this.timer.unref();
  }
}
