/**
 * The in-memory, append-only list behind the in-process log and signal bus,
 * plus the durable-consumer state machine both share. Single-threaded by
 * construction (one Node.js event loop), so no locks: every mutation runs to
 * completion before another task looks.
 */
import { closedError } from "../errors.js";

/** One stored item with its log position. */
export interface JournalEntry<T> {
  position: bigint;
  value: T;
}

/** Persists the acked position of durable consumers (embedded mode keeps it in the database). */
export interface ConsumerPositionStore {
  /** The last saved position of `name`, or undefined when the consumer is new. */
  load(name: string): Promise<bigint | undefined>;
  /** Save that every event of `name` up to `position` is acked. Called in order. */
  save(name: string, position: bigint): Promise<void>;
}

/** A {@link ConsumerPositionStore} in a Map (tests; restarts within one process). */
export class MemoryConsumerPositionStore implements ConsumerPositionStore {
  readonly positions = new Map<string, bigint>();
  async load(name: string): Promise<bigint | undefined> {
    return this.positions.get(name);
  }
  async save(name: string, position: bigint): Promise<void> {
    this.positions.set(name, position);
  }
}

/** A one-shot wake-up everybody waiting can share. */
export class Notifier {
  #promise: Promise<void>;
  #resolve!: () => void;
  readonly #followers = new Set<Notifier>();
  constructor() {
    this.#promise = this.#fresh();
  }
  /** Resolves at the next {@link notify}. Take it *before* checking state to never miss one. */
  get next(): Promise<void> {
    return this.#promise;
  }
  notify(): void {
    const resolve = this.#resolve;
    this.#promise = this.#fresh();
    resolve();
    for (const follower of this.#followers) follower.notify();
  }
  /**
   * Notify `follower` too at every {@link notify} of this one, until
   * {@link unfollow}. A waiter that must wake on either of two notifiers
   * waits on the follower alone: racing two promises, one of which may stay
   * pending for long, leaves a reaction on it per wait (a leak).
   */
  follow(follower: Notifier): void {
    this.#followers.add(follower);
  }
  unfollow(follower: Notifier): void {
    this.#followers.delete(follower);
  }
  #fresh(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
  }
}

/** Append-only entries with strictly increasing positions. */
export class Journal<T> {
  readonly entries: JournalEntry<T>[] = [];
  readonly changed = new Notifier();
  closed = false;

  get lastPosition(): bigint {
    return this.entries.at(-1)?.position ?? 0n;
  }

  push(value: T, position = this.lastPosition + 1n): JournalEntry<T> {
    const entry = { position, value };
    this.entries.push(entry);
    return entry;
  }

  /** Index of the first entry with a position greater than `position` (binary search). */
  indexAfter(position: bigint): number {
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.entries[mid] as JournalEntry<T>).position <= position) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  close(): void {
    this.closed = true;
    this.changed.notify();
  }
}

/** What {@link DurableCursor.take} hands out. */
export interface Delivery<T> {
  entry: JournalEntry<T>;
  deliveryCount: number;
}

/**
 * The state of one durable consumer over a {@link Journal}: JetStream's
 * explicit-ack pull consumer in miniature.
 *
 * - `floor`: every matching entry at or below it is acked (what gets persisted);
 * - entries are handed out once each (`take`) and come back after `ackWaitMs`
 *   or on `nak`; acks above the floor are kept in a set until the floor passes
 *   them. After a restart only the floor survives, so acks above it are
 *   redelivered: at-least-once, like JetStream.
 */
export class DurableCursor<T> {
  #floor: bigint;
  #scan: number;
  readonly #acked = new Set<bigint>();
  readonly #inflight = new Map<bigint, { entry: JournalEntry<T>; timer: NodeJS.Timeout }>();
  readonly #redeliver: JournalEntry<T>[] = [];
  readonly #deliveries = new Map<bigint, number>();
  readonly #wake = new Notifier();
  readonly #delayed = new Set<NodeJS.Timeout>();
  #saving: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    private readonly journal: Journal<T>,
    public matches: (value: T) => boolean,
    public ackWaitMs: number,
    floor: bigint,
    private readonly store: ConsumerPositionStore | undefined,
  ) {
    this.#floor = floor;
    this.#scan = journal.indexAfter(floor);
    // One wake-up for everything a waiting take() cares about: appends,
    // redeliveries and (below) its caller's abort.
    journal.changed.follow(this.#wake);
  }

  /** The next delivery, waiting for one; undefined once `signal` aborts or the journal closes. */
  async take(signal?: AbortSignal): Promise<Delivery<T> | undefined> {
    const onAbort = () => this.#wake.notify();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for (;;) {
        if (this.journal.closed || signal?.aborted) return undefined;
        // Take the wake-up before looking, so a change in between is not missed.
        const woken = this.#wake.next;
        const redelivery = this.#redeliver.shift();
        if (redelivery) return this.#deliver(redelivery);
        const entries = this.journal.entries;
        while (this.#scan < entries.length) {
          const entry = entries[this.#scan++] as JournalEntry<T>;
          if (entry.position <= this.#floor || this.#acked.has(entry.position)) continue;
          if (this.matches(entry.value)) return this.#deliver(entry);
        }
        await woken;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Mark processed; resolves once the new floor (if it moved) is saved. */
  async ack(position: bigint): Promise<void> {
    this.#settle(position);
    this.#removeRedelivery(position);
    if (position > this.#floor) this.#acked.add(position);
    this.#advanceFloor();
    await this.#saving;
  }

  /** Hand back for redelivery after `delayMs`. */
  nak(position: bigint, delayMs = 0): void {
    const held = this.#inflight.get(position);
    if (!held) return;
    this.#settle(position);
    if (delayMs <= 0) {
      this.#requeue(held.entry);
      return;
    }
    const timer = setTimeout(() => {
      this.#delayed.delete(timer);
      this.#requeue(held.entry);
    }, delayMs);
    timer.unref();
    this.#delayed.add(timer);
  }

  /** Drop timers (the log is closing). */
  dispose(): void {
    for (const { timer } of this.#inflight.values()) clearTimeout(timer);
    for (const timer of this.#delayed) clearTimeout(timer);
    this.#inflight.clear();
    this.#delayed.clear();
    this.journal.changed.unfollow(this.#wake);
    this.#wake.notify();
  }

  #deliver(entry: JournalEntry<T>): Delivery<T> {
    const deliveryCount = (this.#deliveries.get(entry.position) ?? 0) + 1;
    this.#deliveries.set(entry.position, deliveryCount);
    const timer = setTimeout(() => {
      // Ack wait expired: give it to whoever asks next.
      if (this.#inflight.get(entry.position)?.timer !== timer) return;
      this.#inflight.delete(entry.position);
      this.#requeue(entry);
    }, this.ackWaitMs);
    timer.unref();
    this.#inflight.set(entry.position, { entry, timer });
    return { entry, deliveryCount };
  }

  #settle(position: bigint): void {
    const held = this.#inflight.get(position);
    if (held) clearTimeout(held.timer);
    this.#inflight.delete(position);
  }

  #requeue(entry: JournalEntry<T>): void {
    if (entry.position <= this.#floor || this.#acked.has(entry.position)) return;
    // Keep redeliveries in position order (oldest first, as JetStream tends to).
    let i = this.#redeliver.length;
    while (i > 0 && (this.#redeliver[i - 1] as JournalEntry<T>).position > entry.position) i--;
    this.#redeliver.splice(i, 0, entry);
    this.#wake.notify();
  }

  #removeRedelivery(position: bigint): void {
    const i = this.#redeliver.findIndex((e) => e.position === position);
    if (i >= 0) this.#redeliver.splice(i, 1);
  }

  #advanceFloor(): void {
    // Everything scanned below the oldest outstanding entry is acked or not ours.
    let lowest: bigint | undefined = this.journal.entries[this.#scan]?.position;
    for (const position of this.#inflight.keys())
      if (lowest === undefined || position < lowest) lowest = position;
    const oldestRedelivery = this.#redeliver[0]?.position;
    if (oldestRedelivery !== undefined && (lowest === undefined || oldestRedelivery < lowest)) {
      lowest = oldestRedelivery;
    }
    const floor = lowest === undefined ? this.journal.lastPosition : lowest - 1n;
    if (floor <= this.#floor) return;
    this.#floor = floor;
    for (const position of this.#acked) if (position <= floor) this.#acked.delete(position);
    const store = this.store;
    if (store) {
      // Chain saves so they land in order; a failed save surfaces on the ack that awaits it.
      this.#saving = this.#saving.catch(() => {}).then(() => store.save(this.name, floor));
    }
  }
}

/** Throw if a journal-backed handle was closed. */
export function assertOpen(journal: Journal<unknown>, what: string): void {
  if (journal.closed) throw closedError(what);
}
