/**
 * Session ownership in distributed owner mode (`TRELLIS_TASKS_JOURNAL=owner`
 * with several tasks replicas, docs/turn-journal.md "Built: the session owner under leases"): a
 * replica writes a session only while it holds the session's lease
 * (`createLeases` in `@trellis/storage`), and every append it makes carries
 * `expectedPosition` = the stream's head as it knows it.
 *
 * | rule | how |
 * |---|---|
 * | one live writer per session | a write first takes the lease (`acquire`, one statement; held leases are renewed all in one statement per round) |
 * | a new owner starts from everything written before | the lease answers the stream's journal head; the new owner appends a **fence entry** there (an empty row-change step, with `expectedPosition` = that head), then loads the session once the projector passed it ("projection plus the journal after the projector's position", as embedded loading does) |
 * | a deposed owner writes nothing | its appends carry its old head; the fence entry moved the stream, so they are refused (`conflict`) and nothing of them is stored; it drops the session's state, and the call retries at the lease's holder |
 * | a call for a session another live replica holds reaches that session's owner | **hand-off**: the caller asks the holder (Postgres `NOTIFY` on `trellis_<schema>_handoff`, again every 250 ms) to give the lease up after its step in progress; the holder releases it unless it took it less than `minHoldMs` ago and announces it free (`NOTIFY`), which wakes the caller to take it and go on. A dead holder does not answer: its lease lapses after the TTL and the caller takes over |
 * | a deposed holder's relational write lands nowhere | `fenceWrite`, in the write's transaction: the lease row checked (owner, fence, unexpired) and locked `for share` until the commit |
 * | a lost lease stops the owner at once | `onLost` drops the session's state; its next write re-acquires (and refetches) |
 * | idle owners release | leases unused for `idleMs` are released (one statement each), so a session is free for whichever replica is called next |
 * | bounded | a hand-off waits at most `ttlMs` + `waitMs`, then `service_unavailable`; `maxLeases` as the lease set's |
 *
 * Why hand-off, not forwarding the call to the owner: a replica does not
 * know its own address when the service is created, the mesh has no
 * registry of replica addresses, and half of the turn path (claim, finish,
 * progress) is called by this replica's own runner, not over RPC, so it
 * could not be forwarded anyway. Hand-off moves the session instead of the
 * call: no address, the same code for RPCs and the runner, and the cost is
 * paid only when a session's calls change replica (two NOTIFYs, a release,
 * an acquire and a fence entry). What it costs when callers alternate replicas per call
 * is in docs/turn-journal.md.
 *
 * A session's lease, like its journal stream, is named by its
 * `sessionStream` (workspace and id, `./session-stream.ts`): every
 * `sessionId` parameter below is that name.
 */

import { type Counter, type Meter, metrics } from "@opentelemetry/api";
import { isTrellisError, TrellisError } from "@trellis/runtime";
import type { Database, Leases, LostLease } from "@trellis/storage";
import { createLeases } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
import { ERROR_DOMAIN } from "../domain/errors.js";
import { encodeRowChanges, ROWS_STEP } from "./row-changes.js";
import type { OwnerLeaseHooks, SessionOwner } from "./session-owner.js";

/** Options of {@link SessionLeases}. */
export interface SessionLeasesOptions {
  database: Database<unknown>;
  schema: string;
  /** This replica's id (unique among live replicas). */
  owner: string;
  /** Lease TTL on the database clock (renewed every ttl / 3). */
  ttlMs: number;
  /** Release leases unused this long (default 30 s). */
  idleMs?: number;
  /** A lease taken less than this long ago is not handed off (default 100 ms): no ping-pong. */
  minHoldMs?: number;
  /** Extra wait after the holder's TTL before a hand-off gives up (default 5 s). */
  waitMs?: number;
  onError?: (error: unknown, where: string) => void;
  /** Meter of the hand-off and take-over counters (default: the global provider's `@trellis/tasks` meter). */
  meter?: Meter;
}

/**
 * OpenTelemetry counter of session hand-offs, attribute
 * `trellis.session_lease.handoff`: `asked` on the replica that wants a
 * session another live replica holds (one per request, repeated every
 * 250 ms until given), `given` on the holder that released it on request.
 */
export const sessionLeaseHandoffsMetric = "trellis.tasks.session_lease.handoffs";
/**
 * OpenTelemetry counter of session leases this replica took that another
 * replica held before (given up on a hand-off, released idle, or lapsed).
 */
export const sessionLeaseTakeoversMetric = "trellis.tasks.session_lease.takeovers";

/** Counters (tests, bench; hand-offs and take-overs also as OpenTelemetry counters). */
export interface SessionLeaseStats {
  acquired: number;
  tookOver: number;
  fences: number;
  fenceConflicts: number;
  handoffsAsked: number;
  handoffsGiven: number;
  lost: number;
  conflicts: number;
}

/** The channel on which replicas ask a lease holder to hand a session off. */
export function handoffChannel(schema: string): string {
  return `trellis_${schema}_handoff`;
}

/** A journal append refused because the stream moved (`expectedPosition`): the owner was deposed. */
export function isStreamConflict(error: unknown): boolean {
  return (
    isTrellisError(error) &&
    error.reason === "conflict" &&
    error.domain === "storage" &&
    error.metadata.expected !== undefined
  );
}

/** See the module header. */
export class SessionLeases implements OwnerLeaseHooks {
  readonly #o: Required<Omit<SessionLeasesOptions, "onError" | "meter">> & SessionLeasesOptions;
  readonly #leases: Leases;
  readonly #heads = new Map<string, bigint>();
  readonly #usedAt = new Map<string, number>();
  readonly #takenAt = new Map<string, number>();
  /** Streams with an append of this replica under the current lease (its fence at least). */
  readonly #confirmed = new Set<string>();
  /** Callers waiting for a hand-off of a stream (woken by its "free"). */
  readonly #waiting = new Map<string, Set<() => void>>();
  readonly #stats: SessionLeaseStats = {
    acquired: 0,
    tookOver: 0,
    fences: 0,
    fenceConflicts: 0,
    handoffsAsked: 0,
    handoffsGiven: 0,
    lost: 0,
    conflicts: 0,
  };
  /** Made on first use: the global meter provider may be installed after this is built. */
  #instruments: { handoffs: Counter; takeovers: Counter } | undefined;
  #owner: SessionOwner | undefined;
  /** While > 0 (a relational write over sessions this replica holds), no hand-off is given. */
  #pinned = 0;
  #unlisten: (() => Promise<void>) | undefined;
  readonly #sweep: NodeJS.Timeout;
  #closed = false;

  constructor(options: SessionLeasesOptions) {
    this.#o = { idleMs: 30_000, minHoldMs: 100, waitMs: 5_000, ...options };
    this.#leases = createLeases({
      database: options.database,
      schema: options.schema,
      owner: options.owner,
      ttlMs: options.ttlMs,
      onLost: (lost) => this.#lost(lost),
      ...(options.onError ? { onError: options.onError } : {}),
    });
    this.#sweep = setInterval(() => void this.#releaseIdle(), Math.max(1_000, this.#o.idleMs / 2));
    this.#sweep.unref();
  }

  /** Binds the session owner (its state is dropped when a lease is lost) and listens for hand-offs. */
  async start(owner: SessionOwner): Promise<void> {
    this.#owner = owner;
    this.#unlisten = await this.#o.database.listen(handoffChannel(this.#o.schema), (payload) =>
      this.#onHandoff(payload),
    );
  }

  get owner(): string {
    return this.#leases.owner;
  }

  stats(): SessionLeaseStats & { held: number } {
    return { ...this.#stats, held: this.#leases.stats().held };
  }

  /** True while this replica holds `sessionId`'s lease. */
  holds(sessionId: string): boolean {
    return this.#leases.held(sessionId) !== undefined;
  }

  /** The `expectedPosition` of this replica's next append to `sessionId`; a stream conflict when not held. */
  expected(sessionId: string): bigint {
    const head = this.holds(sessionId) ? this.#heads.get(sessionId) : undefined;
    if (head === undefined) {
      throw new TrellisError({
        reason: "conflict",
        domain: "storage",
        message: `this replica no longer holds the lease on session ${sessionId}`,
        metadata: { stream: sessionId, expected: "none" },
      });
    }
    return head;
  }

  /**
   * The stream's head for a read of the session here: only while the lease
   * is held (within its local deadline, which ends before the database's)
   * and an append of this replica under it landed — the fence entry was
   * written at the head the lease answered, and no other replica appends
   * while it is held. Before the fence lands the head is not yet confirmed
   * (a deposed owner may have slipped an append in): undefined.
   */
  readHead(sessionId: string): bigint | undefined {
    if (!this.#confirmed.has(sessionId) || !this.holds(sessionId)) return undefined;
    return this.#heads.get(sessionId);
  }

  /**
   * In a relational write's transaction (after it locked the session row):
   * if this replica believes it holds the session, the lease row must say so
   * (owner, fence, unexpired), and is locked `for share` until the commit —
   * a take-over waits for the write, and a deposed holder's write is refused
   * (a stream conflict: the call retries at the new holder) instead of
   * landing beside the new owner's unprojected appends. A session not held
   * here (a replay's source, read under its row lock) is not checked.
   */
  async fenceWrite(trx: Kysely<unknown>, sessionId: string): Promise<void> {
    const held = this.#leases.held(sessionId);
    if (!held) return;
    const { rows } = await sql`
      select 1 from ${sql.id(this.#o.schema, "session_leases")}
      where stream = ${sessionId} and owner = ${this.#leases.owner}
        and fence = ${held.fence} and expires_at > now()
      for share`.execute(trx);
    if (rows.length > 0) return;
    const error = new TrellisError({
      reason: "conflict",
      domain: "storage",
      message: `this replica no longer holds the lease on session ${sessionId}`,
      metadata: { stream: sessionId, expected: "lease" },
    });
    this.conflicted(sessionId, error);
    throw error;
  }

  /** Inside the session's lock: take the lease (waiting for a hand-off) before any work. */
  async guard(sessionId: string): Promise<void> {
    await this.ensure(sessionId, true);
  }

  /** Records an append's last position (the stream's new head). */
  appended(sessionId: string, last: bigint): void {
    this.#heads.set(sessionId, last);
    this.#confirmed.add(sessionId);
    this.#usedAt.set(sessionId, Date.now());
  }

  /**
   * An append of `sessionId` was refused (the stream moved): this replica was
   * deposed. Forgets the lease locally (the holder is someone else, or the
   * next acquire refences it).
   */
  conflicted(sessionId: string, error: unknown): void {
    if (!isStreamConflict(error)) return;
    this.#stats.conflicts++;
    this.#forget(sessionId);
    this.#owner?.forget(sessionId);
  }

  /**
   * Makes this replica the owner of `sessionId` (the caller holds the
   * session's lock in the owner). With `wait`, a session held by another
   * replica is asked for and waited for (bounded); without, false is
   * answered at once.
   */
  async ensure(sessionId: string, wait: boolean): Promise<boolean> {
    if (this.holds(sessionId) && this.#heads.has(sessionId)) {
      this.#usedAt.set(sessionId, Date.now());
      return true;
    }
    const started = Date.now();
    let askedOf: string | undefined;
    let askedAt = 0;
    let pause = 5;
    for (;;) {
      if (this.#closed) throw unavailable("the tasks replica is shutting down");
      const taken = await this.#leases.acquire(sessionId);
      if (taken.acquired) {
        if (await this.#fence(sessionId, taken.expectedPosition)) {
          this.#stats.acquired++;
          if (taken.tookOver) {
            this.#stats.tookOver++;
            this.#counters().takeovers.add(1);
          }
          return true;
        }
        continue;
      }
      if (!wait) return false;
      const limit = this.#o.ttlMs + this.#o.waitMs;
      if (Date.now() - started > limit) {
        throw unavailable(
          `session ${sessionId} is owned by replica ${taken.ownedBy}, which did not hand it off within ${limit} ms`,
          { session_id: sessionId, owner: taken.ownedBy },
        );
      }
      // Ask the holder (again every 250 ms: it may have refused within its
      // minimum hold, or the notification was lost); its "free" wakes us.
      if (askedOf !== taken.ownedBy || Date.now() - askedAt >= 250) {
        askedOf = taken.ownedBy;
        askedAt = Date.now();
        this.#stats.handoffsAsked++;
        this.#counters().handoffs.add(1, { "trellis.session_lease.handoff": "asked" });
        await this.#notify(`ask\n${taken.ownedBy}\n${sessionId}`);
      }
      await this.#freed(sessionId, pause);
      pause = Math.min(pause * 2, 100);
    }
  }

  /** Runs `work` with no lease handed off meanwhile (hand-off requests are retried by their senders). */
  async pinned<T>(work: () => Promise<T>): Promise<T> {
    this.#pinned++;
    try {
      return await work();
    } finally {
      this.#pinned--;
    }
  }

  /** Releases every lease (shutdown): others take the sessions over at once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#sweep);
    await this.#unlisten?.().catch(() => undefined);
    await this.#leases.close();
  }

  /**
   * Appends the fence entry at the head the lease answered: from here on any
   * append of an earlier owner is refused. False when the stream moved
   * between the two statements (an earlier owner slipped one in): re-acquire
   * for the new head.
   */
  async #fence(sessionId: string, head: bigint): Promise<boolean> {
    const owner = this.#owner;
    if (!owner) throw new Error("SessionLeases.start was not called");
    this.#heads.set(sessionId, head);
    this.#confirmed.delete(sessionId);
    this.#takenAt.set(sessionId, Date.now());
    try {
      this.#stats.fences++;
      await owner.appendTo(
        sessionId,
        { entries: [{ stream: sessionId, kind: ROWS_STEP, body: encodeRowChanges([]) }] },
        undefined,
      );
      // The state in memory (if any) predates this lease: reload from the tables.
      owner.forget(sessionId);
      return true;
    } catch (error) {
      this.#heads.delete(sessionId);
      if (!isStreamConflict(error)) throw error;
      this.#stats.fenceConflicts++;
      return false;
    }
  }

  #counters(): { handoffs: Counter; takeovers: Counter } {
    if (this.#instruments) return this.#instruments;
    const meter = this.#o.meter ?? metrics.getMeter("@trellis/tasks");
    this.#instruments = {
      handoffs: meter.createCounter(sessionLeaseHandoffsMetric, {
        description: "Session hand-offs between tasks replicas (asked for, given)",
        unit: "{handoff}",
      }),
      takeovers: meter.createCounter(sessionLeaseTakeoversMetric, {
        description: "Session leases taken that another tasks replica held before",
        unit: "{lease}",
      }),
    };
    return this.#instruments;
  }

  #lost(lost: LostLease): void {
    this.#stats.lost++;
    this.#forget(lost.stream);
    this.#owner?.forget(lost.stream);
  }

  #forget(sessionId: string): void {
    this.#heads.delete(sessionId);
    this.#confirmed.delete(sessionId);
    this.#usedAt.delete(sessionId);
    this.#takenAt.delete(sessionId);
  }

  /** `ask\n<holder>\n<stream>`: give `stream` up after its step in progress; `free\n<stream>`: it was. */
  #onHandoff(payload: string): void {
    const [what, a, b] = payload.split("\n");
    if (what === "free" && a) {
      for (const wake of this.#waiting.get(a) ?? []) wake();
      return;
    }
    const [owner, stream] = [a, b];
    if (what !== "ask" || owner !== this.#leases.owner || !stream) return;
    if (!this.holds(stream) || !this.#owner || this.#pinned > 0) return;
    const takenAt = this.#takenAt.get(stream) ?? 0;
    if (Date.now() - takenAt < this.#o.minHoldMs) return;
    void this.#release(stream).then(
      async (given) => {
        if (!given) return;
        this.#stats.handoffsGiven++;
        this.#counters().handoffs.add(1, { "trellis.session_lease.handoff": "given" });
        await this.#notify(`free\n${stream}`);
      },
      (error) => this.#o.onError?.(error, "handing a session off"),
    );
  }

  async #notify(payload: string): Promise<void> {
    await sql`select pg_notify(${handoffChannel(this.#o.schema)}, ${payload})`
      .execute(this.#o.database.kysely)
      .catch((error) => this.#o.onError?.(error, "notifying a session hand-off"));
  }

  /** Resolves when `stream` is announced free, or after `ms`. */
  #freed(stream: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.#waiting.get(stream) ?? new Set<() => void>();
      this.#waiting.set(stream, waiters);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiting.get(stream) === waiters)
          this.#waiting.delete(stream);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiters.add(done);
    });
  }

  /** Releases `stream` under the session's lock (no step of it in progress). */
  async #release(stream: string): Promise<boolean> {
    const owner = this.#owner;
    if (!owner) return false;
    return owner.withLock(stream, async () => {
      if (!this.holds(stream) || this.#pinned > 0) return false;
      this.#forget(stream);
      owner.forget(stream);
      return this.#leases.release(stream);
    });
  }

  async #releaseIdle(): Promise<void> {
    const before = Date.now() - this.#o.idleMs;
    for (const [stream, usedAt] of [...this.#usedAt]) {
      if (usedAt >= before || this.#closed) continue;
      await this.#release(stream).catch((error) =>
        this.#o.onError?.(error, "releasing an idle lease"),
      );
    }
  }
}

function unavailable(message: string, metadata: Record<string, string> = {}): TrellisError {
  return new TrellisError({
    reason: "service_unavailable",
    message,
    domain: ERROR_DOMAIN,
    metadata,
  });
}
