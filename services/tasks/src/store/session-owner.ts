/**
 * The embedded session owner (`TRELLIS_TASKS_JOURNAL=owner`,
 * docs/turn-journal.md step 2): the one process owns every session, keeps
 * the live mailbox of the sessions in use in memory, and writes a turn's
 * step as ONE group-committed journal append; the `tasks-read-model`
 * projector writes the rows behind it.
 *
 * | rule | how |
 * |---|---|
 * | one session's steps are decided one at a time, on current state | a per-session async lock (instead of the session row lock); the state in memory is what the step appends |
 * | memory equals the tables once projected | an owned step changes copies of its rows and adopts them only after its append resolved; a failed append drops the session's state (reloaded next time) |
 * | loading a session sees every step it ever took | it waits for the projector to pass the session's last append, then reads the session row and its queued / running tasks |
 * | a relational write of a session (cancel, close, truncate, fork, a step the owner does not make in memory) is consistent with the owner | under the session's lock, after the projector passed the session's last append; the session's state is dropped before and after it |
 * | a relational write that may touch any session (signals, replays, lease recovery) | under the owner's gate held exclusively: no owned step runs meanwhile, everything is projected first, every state is dropped after |
 * | reads see the caller's writes | `settled()`: wait for the projector to pass the journal's head at the call (a no-op when it has) |
 * | a read of one session its owner serves | `settledFor()`: distributed, while this replica holds the session's lease and its fence landed, the session's own head is enough (no other replica can have appended to it); else `settled()` |
 * | the runner's own polls (expired runs, queued work) | `settledHere()`: this process's head, never the table's: what another replica wrote and this one has not projected yet is found by a later poll |
 * | bounded memory | sessions unused for `idleMs` are evicted (and over `maxSessions`, the least recently used) |
 */
import type { Event } from "@trellis/contracts/core";
import { type Journal, type JournalEntry, outboxTables, type Projector } from "@trellis/storage";
import type { KnownAgentState } from "./agent-state.js";
import type { SessionRow, TaskRow } from "./schema.js";
import { type SessionRef, sessionStream } from "./session-stream.js";
import type { StoreContext } from "./store-context.js";

/** A session's live state, as its owner holds it. */
export interface OwnedSession {
  session: SessionRow;
  /** Its tasks in the mailbox (queued or running), by queue_seq. */
  mailbox: TaskRow[];
  /**
   * The last event of each mailbox task (its sequence and id): an owned
   * step sequences its events from here (the owner is the one writer of
   * its tasks' events; relational writes drop the state, see the header).
   */
  sequences: ReadonlyMap<string, LastEvent>;
  usedAt: number;
  /** The agent state the next run starts from, once known (agent-state.ts). */
  agentState?: KnownAgentState;
}

/** A resource's last event: what the next one continues. */
export interface LastEvent {
  sequence: bigint;
  eventId: string;
}

/**
 * One owned step's append: its journal entries (the row changes) and its
 * public events, which the journal writes to the outbox with them (one
 * statement; `AppendOptions.events`).
 */
export interface StepAppend {
  entries: readonly JournalEntry[];
  events?: readonly Event[];
}

/** Options of {@link SessionOwner}. */
export interface SessionOwnerOptions {
  journal: Journal;
  readModel: Projector;
  /** Evict a session unused this long (default 60 s). */
  idleMs?: number;
  /** Most sessions in memory (default 10,000). */
  maxSessions?: number;
  /** How long a read or a load waits for the projector (default 10 s). */
  waitMs?: number;
  /**
   * Distributed owner mode (session-leases.ts): run inside the session's lock
   * before any work on it (takes the session's lease), and fence every append
   * with the stream's head as the lease holder knows it.
   */
  leases?: OwnerLeaseHooks;
  /** The journal's head to wait for in `settled()` (default: this process's; distributed: the table's). */
  head?: () => Promise<bigint>;
}

/** How a lease holder fences the owner's appends (session-leases.ts); each names the session's {@link sessionStream}. */
export interface OwnerLeaseHooks {
  /** Inside the session's lock, before the work: make this replica the session's owner. */
  guard(stream: string): Promise<void>;
  /** The append's `expectedPosition`; throws (a stream conflict) when the lease is not held. */
  expected(stream: string): bigint;
  /** The append stored these positions (the last is the stream's new head). */
  appended(stream: string, last: bigint): void;
  /** The append was refused: the stream moved (this replica was deposed). */
  conflicted(stream: string, error: unknown): void;
  /**
   * The stream's head while this replica holds its lease and has appended
   * under it (its fence entry at least): every entry of the stream is at or
   * below it. Undefined otherwise.
   */
  readHead(stream: string): bigint | undefined;
}

/** See the module header. */
export class SessionOwner {
  readonly #ctx: StoreContext;
  readonly #journal: Journal;
  readonly #readModel: Projector;
  readonly #idleMs: number;
  readonly #maxSessions: number;
  readonly #waitMs: number;
  readonly #leases: OwnerLeaseHooks | undefined;
  readonly #head: (() => Promise<bigint>) | undefined;
  /** Every map below is keyed by the session's {@link sessionStream}. */
  readonly #sessions = new Map<string, OwnedSession>();
  /** The last position each session appended (kept until projected). */
  readonly #positions = new Map<string, bigint>();
  /** The last append of each session that changed its agent state (kept until projected). */
  readonly #statePositions = new Map<string, bigint>();
  readonly #locks = new Map<string, Promise<void>>();
  readonly #gate = new Gate();
  readonly #sweep: NodeJS.Timeout;
  /** Reads of the journal table's head made by `settled()` (tests). */
  #headReads = 0;

  constructor(ctx: StoreContext, options: SessionOwnerOptions) {
    this.#ctx = ctx;
    this.#journal = options.journal;
    this.#readModel = options.readModel;
    this.#idleMs = options.idleMs ?? 60_000;
    this.#maxSessions = options.maxSessions ?? 10_000;
    this.#waitMs = options.waitMs ?? 10_000;
    this.#leases = options.leases;
    this.#head = options.head;
    this.#sweep = setInterval(() => this.#evictIdle(), Math.max(1_000, this.#idleMs / 2));
    this.#sweep.unref();
  }

  /** Runs `work` holding `session`'s lock (and the gate, shared). */
  async withSession<T>(session: SessionRef, work: () => Promise<T>): Promise<T> {
    const stream = sessionStream(session);
    const leaveGate = await this.#gate.shared();
    try {
      const unlock = await this.#lock(stream);
      try {
        await this.#leases?.guard(stream);
        return await work();
      } finally {
        unlock();
      }
    } finally {
      leaveGate();
    }
  }

  /**
   * Runs a relational write of `session` (the caller holds its lock): after
   * the projector passed the session's appends; the session's state is
   * dropped before it (a read of its agent state goes to the table) and
   * after it, whatever it did.
   */
  async relational<T>(session: SessionRef, work: () => Promise<T>): Promise<T> {
    await this.drain(session);
    this.#sessions.delete(sessionStream(session));
    try {
      return await work();
    } finally {
      this.#sessions.delete(sessionStream(session));
    }
  }

  /** Runs `work` alone: no owned step meanwhile, everything projected first, all state dropped after. */
  async exclusive<T>(work: () => Promise<T>): Promise<T> {
    const leave = await this.#gate.exclusive();
    try {
      await this.settled();
      return await work();
    } finally {
      this.#sessions.clear();
      leave();
    }
  }

  /** Runs `work` holding the lock of the session of `stream` only (no gate, no guard): a lease hand-off. */
  async withLock<T>(stream: string, work: () => Promise<T>): Promise<T> {
    const unlock = await this.#lock(stream);
    try {
      return await work();
    } finally {
      unlock();
    }
  }

  /** Drops the state of the session of `stream` (reloaded on next use): its lease was lost or newly taken. */
  forget(stream: string): void {
    this.#sessions.delete(stream);
  }

  /** Resolves once the projector has applied everything appended before the call. */
  async settled(): Promise<void> {
    if (!this.#head) return this.#waitFor(this.#journal.head());
    this.#headReads++;
    await this.#waitFor(await this.#head());
  }

  /**
   * Resolves once the projector has applied every append of `session` made
   * before the call (a read of that session alone, see the module header).
   */
  async settledFor(session: SessionRef): Promise<void> {
    const own = this.#leases?.readHead(sessionStream(session));
    if (own === undefined) return this.settled();
    await this.#waitFor(own);
  }

  /** Resolves once the projector has applied everything this process appended before the call. */
  async settledHere(): Promise<void> {
    await this.#waitFor(this.#journal.head());
  }

  /** How often `settled()` read the journal table's head (distributed; tests). */
  get headReads(): number {
    return this.#headReads;
  }

  /** Resolves once the projector has applied `session`'s appends. */
  async drain(session: SessionRef): Promise<void> {
    const position = this.#positions.get(sessionStream(session));
    if (position !== undefined) await this.#waitFor(position);
  }

  /**
   * Resolves once the projector has applied `session`'s last append that
   * changed its agent state (`session_states`): what `loadAgentState` needs.
   * A turn's own submit does not change it, so reading the state at the
   * start of a run does not force the submit's projection on its own.
   */
  async drainAgentState(session: SessionRef): Promise<void> {
    const position = this.#statePositions.get(sessionStream(session));
    if (position !== undefined) await this.#waitFor(position);
  }

  /** The session's state if in memory (no loading, no lock, not counted as a use). */
  held(session: SessionRef): OwnedSession | undefined {
    return this.#sessions.get(sessionStream(session));
  }

  /** The session's state (the caller holds its lock), loaded when not in memory; undefined if it does not exist. */
  async load(ref: SessionRef): Promise<OwnedSession | undefined> {
    const stream = sessionStream(ref);
    const known = this.#sessions.get(stream);
    if (known) {
      known.usedAt = Date.now();
      // Most recently used last (the eviction order).
      this.#sessions.delete(stream);
      this.#sessions.set(stream, known);
      return known;
    }
    await this.drain(ref);
    const session = await this.#ctx.db
      .selectFrom("sessions")
      .selectAll()
      .where("workspace_id", "=", ref.workspace_id)
      .where("id", "=", ref.id)
      .executeTakeFirst();
    if (!session) return undefined;
    const mailbox = await this.#ctx.db
      .selectFrom("tasks")
      .selectAll()
      .where("workspace_id", "=", ref.workspace_id)
      .where("session_id", "=", ref.id)
      .where("run_state", "in", ["queued", "running"])
      .orderBy("queue_seq")
      .execute();
    const state: OwnedSession = {
      session,
      mailbox,
      sequences: await this.#lastEvents(mailbox),
      usedAt: Date.now(),
    };
    this.#sessions.set(stream, state);
    if (this.#sessions.size > this.#maxSessions) this.#evictOldest();
    return state;
  }

  /**
   * Appends one owned step of `session` (the caller holds its lock) and
   * resolves once it is durable. On failure the session's state is dropped.
   */
  append(
    session: SessionRef,
    step: StepAppend,
    idempotencyKey: string | undefined,
    changes: { agentState?: boolean } = {},
  ): Promise<{ positions: bigint[]; duplicate: boolean }> {
    return this.appendTo(sessionStream(session), step, idempotencyKey, changes);
  }

  /** {@link append} by the session's stream (a lease's fence entry). */
  async appendTo(
    stream: string,
    step: StepAppend,
    idempotencyKey: string | undefined,
    changes: { agentState?: boolean } = {},
  ): Promise<{ positions: bigint[]; duplicate: boolean }> {
    try {
      const expectedPosition = this.#leases?.expected(stream);
      const result = await this.#journal.append(step.entries, {
        ...(step.events && step.events.length > 0 ? { events: step.events } : {}),
        ...(idempotencyKey ? { idempotencyKey } : {}),
        ...(expectedPosition !== undefined ? { expectedPosition } : {}),
      });
      const last = result.positions.at(-1);
      if (!result.duplicate && last !== undefined) {
        this.#positions.set(stream, last);
        this.#leases?.appended(stream, last);
        if (changes.agentState) this.#statePositions.set(stream, last);
      }
      this.#readModel.wake();
      return result;
    } catch (error) {
      this.#sessions.delete(stream);
      this.#leases?.conflicted(stream, error);
      throw error;
    }
  }

  /** Stops the eviction timer. */
  close(): void {
    clearInterval(this.#sweep);
  }

  /** Whether `session`'s state is in memory now (a hint: it may be dropped next). */
  holds(session: SessionRef): boolean {
    return this.#sessions.has(sessionStream(session));
  }

  /** Sessions in memory (tests, health). */
  get size(): number {
    return this.#sessions.size;
  }

  /** The last event of each task in `mailbox`, from the outbox's counters. */
  async #lastEvents(mailbox: readonly TaskRow[]): Promise<Map<string, LastEvent>> {
    const last = new Map<string, LastEvent>();
    if (mailbox.length === 0) return last;
    const rows = await outboxTables(this.#ctx.kysely, this.#ctx.outboxSchema)
      .selectFrom("outbox_sequence")
      .select(["resource_id", "last_sequence", "last_event_id"])
      .where("resource_object", "=", "task")
      .where(
        "resource_id",
        "in",
        mailbox.map((row) => row.id),
      )
      .execute();
    for (const row of rows) {
      last.set(row.resource_id, {
        sequence: BigInt(row.last_sequence),
        eventId: row.last_event_id,
      });
    }
    return last;
  }

  async #waitFor(position: bigint): Promise<void> {
    if (position <= 0n || this.#readModel.status().position >= position) return;
    await this.#readModel.waitFor(position, { timeoutMs: this.#waitMs });
  }

  async #lock(stream: string): Promise<() => void> {
    const previous = this.#locks.get(stream) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.#locks.set(stream, tail);
    await previous;
    return () => {
      release();
      if (this.#locks.get(stream) === tail) this.#locks.delete(stream);
    };
  }

  #evictIdle(): void {
    const before = Date.now() - this.#idleMs;
    for (const [id, state] of this.#sessions) {
      if (state.usedAt < before && !this.#locks.has(id)) this.#sessions.delete(id);
    }
    // Positions the projector has passed are no longer needed to drain.
    const projected = this.#readModel.status().position;
    for (const positions of [this.#positions, this.#statePositions]) {
      for (const [id, position] of positions) {
        if (position <= projected) positions.delete(id);
      }
    }
  }

  #evictOldest(): void {
    for (const id of this.#sessions.keys()) {
      if (this.#sessions.size <= this.#maxSessions) return;
      if (!this.#locks.has(id)) this.#sessions.delete(id);
    }
  }

  /** Adopts a step's new state once its append resolved. */
  adopt(session: SessionRef, state: OwnedSession): void {
    state.usedAt = Date.now();
    const stream = sessionStream(session);
    state.agentState ??= this.#sessions.get(stream)?.agentState;
    this.#sessions.set(stream, state);
  }
}

/**
 * Shared / exclusive gate: owned steps hold it shared; a write that may touch
 * any session holds it alone. Writers are not starved: once one waits, new
 * shared holders wait behind it.
 */
class Gate {
  #shared = 0;
  #writer: Promise<void> | undefined;
  #drained: (() => void) | undefined;

  async shared(): Promise<() => void> {
    while (this.#writer) await this.#writer;
    this.#shared += 1;
    return () => {
      this.#shared -= 1;
      if (this.#shared === 0) this.#drained?.();
    };
  }

  async exclusive(): Promise<() => void> {
    while (this.#writer) await this.#writer;
    let done!: () => void;
    this.#writer = new Promise<void>((resolve) => {
      done = resolve;
    });
    if (this.#shared > 0) {
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
      });
    }
    this.#drained = undefined;
    return () => {
      this.#writer = undefined;
      done();
    };
  }
}
