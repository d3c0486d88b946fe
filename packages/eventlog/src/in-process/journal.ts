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

/**
 * Append-only entries with strictly increasing positions, of which only the
 * newest may be kept: {@link trimTo} drops the oldest ones (their positions
 * are then at or below {@link trimmedThrough}). Entries are addressed by an
 * absolute index (0 = the first entry ever stored, not the first one still
 * held), so an index taken before a trim stays meaningful after it: it is
 * below {@link start} once its entry is gone.
 */
export class Journal<T> {
  #entries: JournalEntry<T>[] = [];
  #base = 0;
  #trimmedThrough = 0n;
  #lastPosition = 0n;
  readonly changed = new Notifier();
  closed = false;

  /** Position of the newest entry ever stored (0 when none). */
  get lastPosition(): bigint {
    return this.#lastPosition;
  }

  /** Every entry at or below this position has been trimmed (0 when none). */
  get trimmedThrough(): bigint {
    return this.#trimmedThrough;
  }

  /** Absolute index of the oldest entry held. */
  get start(): number {
    return this.#base;
  }

  /** Absolute index after the newest entry. */
  get end(): number {
    return this.#base + this.#entries.length;
  }

  /** How many entries are held. */
  get size(): number {
    return this.#entries.length;
  }

  /** The entry at an absolute index, or undefined when trimmed or not yet stored. */
  at(index: number): JournalEntry<T> | undefined {
    return index < this.#base ? undefined : this.#entries[index - this.#base];
  }

  /** The held entries, oldest first (a copy). */
  held(): JournalEntry<T>[] {
    return this.#entries.slice();
  }

  push(value: T, position = this.#lastPosition + 1n): JournalEntry<T> {
    const entry = { position, value };
    this.#entries.push(entry);
    this.#lastPosition = position;
    return entry;
  }

  /**
   * Declare that positions at or below `position` are kept elsewhere (a
   * journal that starts with a later part of a longer history). Only while
   * empty.
   */
  startAfter(position: bigint): void {
    if (this.#entries.length > 0 || this.#lastPosition > position) {
      throw new Error("a journal can only start after a position while empty");
    }
    this.#trimmedThrough = position;
    this.#lastPosition = position;
  }

  /** Drop the oldest entries until at most `count` are held. Returns them, oldest first. */
  trimTo(count: number): JournalEntry<T>[] {
    const drop = this.#entries.length - count;
    if (drop <= 0) return [];
    const dropped = this.#entries.splice(0, drop);
    this.#base += drop;
    this.#trimmedThrough = (dropped.at(-1) as JournalEntry<T>).position;
    return dropped;
  }

  /**
   * Absolute index of the first held entry with a position greater than
   * `position` (binary search); {@link start} when `position` is before
   * everything held.
   */
  indexAfter(position: bigint): number {
    let lo = 0;
    let hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#entries[mid] as JournalEntry<T>).position <= position) lo = mid + 1;
      else hi = mid;
    }
    return this.#base + lo;
  }

  close(): void {
    this.closed = true;
    this.changed.notify();
  }
}

/**
 * Where a {@link DurableCursor} finds the entries its journal no longer
 * holds: up to `limit` entries after `afterPosition` and at or below
 * `throughPosition`, in position order (entries the cursor would skip may be
 * left out).
 */
export type JournalBackfill<T> = (
  afterPosition: bigint,
  throughPosition: bigint,
  limit: number,
) => Promise<JournalEntry<T>[]>;

/** Entries a durable cursor asks its backfill for at a time. */
const BACKFILL_PAGE = 1000;

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
 * - a floor below what the journal still holds (a new consumer, or one that
 *   fell behind a trimmed journal) is caught up from `backfill`, page by page,
 *   in position order, before the held entries.
 */
export class DurableCursor<T> {
  #floor: bigint;
  /** Every entry at or below this position has been looked at (handed out or skipped). */
  #scanned: bigint;
  /** Entries fetched from the backfill and not yet looked at, oldest first. */
  #backlog: JournalEntry<T>[] = [];
  /** The backfill has been read through this position (the backlog included). */
  #fetched: bigint;
  #fetching: Promise<void> | undefined;
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
    private readonly backfill?: JournalBackfill<T>,
  ) {
    this.#floor = floor;
    this.#scanned = floor;
    this.#fetched = floor;
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
        // Behind the journal's window: catch up from the backfill first.
        let backlogged = this.#backlog.shift();
        while (backlogged) {
          this.#scanned = backlogged.position;
          if (this.#wanted(backlogged)) return this.#deliver(backlogged);
          backlogged = this.#backlog.shift();
        }
        if (this.#fetched > this.#scanned) this.#scanned = this.#fetched;
        if (this.backfill && this.#scanned < this.journal.trimmedThrough) {
          // Competing takers share one fetch.
          this.#fetching ??= this.#fetch(this.backfill).finally(() => {
            this.#fetching = undefined;
          });
          try {
            await this.#fetching;
          } catch (error) {
            // The backing store may close first when everything shuts down.
            if (this.journal.closed) return undefined;
            throw error;
          }
          continue;
        }
        const end = this.journal.end;
        for (let i = this.journal.indexAfter(this.#scanned); i < end; i++) {
          const entry = this.journal.at(i) as JournalEntry<T>;
          this.#scanned = entry.position;
          if (this.#wanted(entry)) return this.#deliver(entry);
        }
        await woken;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  async #fetch(backfill: JournalBackfill<T>): Promise<void> {
    // Only what the journal no longer holds; what it holds is read from memory.
    const through = this.journal.trimmedThrough;
    const page = await backfill(this.#scanned, through, BACKFILL_PAGE);
    const last = page.at(-1);
    this.#backlog = page.filter((entry) => entry.position > this.#scanned);
    // A short page means nothing more up to `through`.
    this.#fetched = page.length < BACKFILL_PAGE || !last ? through : last.position;
  }

  #wanted(entry: JournalEntry<T>): boolean {
    if (entry.position <= this.#floor || this.#acked.has(entry.position)) return false;
    return this.matches(entry.value);
  }

  /** Mark processed; resolves once the new floor (if it moved) is saved. */
  async ack(position: bigint): Promise<void> {
    this.#settle(position);
    this.#removeRedelivery(position);
    this.#deliveries.delete(position);
    if (position > this.#floor) this.#acked.add(position);
    this.#advanceFloor();
    await this.#saving;
  }
  /** Still being worked on: the ack wait of a held entry starts again. */
  touch(position: bigint): void {
    const held = this.#inflight.get(position);
    if (!held) return;
    clearTimeout(held.timer);
    this.#inflight.delete(position);
    this.#hold(held.entry);
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
    this.#hold(entry);
    return { entry, deliveryCount };
  }

  /** Hold an entry out until it is acked, naked or its ack wait runs out. */
  #hold(entry: JournalEntry<T>): void {
    const timer = setTimeout(() => {
      // Ack wait expired: give it to whoever asks next.
      if (this.#inflight.get(entry.position)?.timer !== timer) return;
      this.#inflight.delete(entry.position);
      this.#requeue(entry);
    }, this.ackWaitMs);
    timer.unref();
    this.#inflight.set(entry.position, { entry, timer });
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
    // Everything scanned is acked or not ours, except what is still out or queued again.
    let floor = this.#scanned;
    for (const position of this.#inflight.keys()) if (position - 1n < floor) floor = position - 1n;
    const oldestRedelivery = this.#redeliver[0]?.position;
    if (oldestRedelivery !== undefined && oldestRedelivery - 1n < floor) {
      floor = oldestRedelivery - 1n;
    }
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
