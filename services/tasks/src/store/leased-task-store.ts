/**
 * {@link OwnedTaskStore} for several tasks replicas (distributed mode,
 * `TRELLIS_TASKS_JOURNAL=owner`): the session owner under leases
 * (session-leases.ts). What it adds to the embedded owner:
 *
 * | call | rule |
 * |---|---|
 * | every call that works on one session (turn steps, relational writes of a session) | the owner's per-session lock first takes the session's lease (`guard`): held → nothing; free or lapsed → acquire + fence entry; held by a live replica → hand-off, bounded |
 * | `submitTask`, `finishRun` | an append refused because the stream moved (this replica was deposed) wrote nothing: the call is retried (at most 3 times), which takes the lease back from its new holder |
 * | `claimNext` (the runner's sweep) | only for a session this replica holds or can take without waiting: a session another live replica holds is that replica's to run |
 * | `recoverExpired` | the expired turns of sessions this replica holds or can take without waiting, relational as today, with no hand-off meanwhile |
 * | `deliverSignal` | the resumed task's session (named, or found by the signal's id or label) is taken first (waiting for a hand-off), then relational as today, with no hand-off meanwhile |
 * | relational writes of a session | inside their transaction, the lease row of a session this replica holds is checked (owner, fence, unexpired) and locked `for share`: a deposed holder's write is refused, a take-over waits for it |
 * | reads | after the projector passed the journal table's head (every replica's appends), not only this process's |
 */
import { journalHead } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
import { OwnedTaskStore, type OwnedTaskStoreOptions } from "./owned-task-store.js";
import { isStreamConflict, type SessionLeases } from "./session-leases.js";
import { sessionStream } from "./session-stream.js";
import type { TaskStore } from "./task-store.js";

type P<K extends keyof TaskStore> = Parameters<TaskStore[K]>;

/** Attempts of a turn step whose append was refused for a moved stream. */
const ATTEMPTS = 3;

/** Options of {@link LeasedTaskStore}: the owned store's, with the replica's leases. */
export interface LeasedTaskStoreOptions extends OwnedTaskStoreOptions {
  leases: SessionLeases;
}

/** See the module header. */
export class LeasedTaskStore extends OwnedTaskStore {
  readonly #leases: SessionLeases;

  constructor(options: LeasedTaskStoreOptions) {
    const { database, schema } = options;
    super({
      ...options,
      sessionFence: (trx, stream) =>
        options.leases.fenceWrite(trx as unknown as Kysely<unknown>, stream),
      owner: {
        ...options.owner,
        leases: options.leases,
        head: sharedRead(() => journalHead(database.kysely, schema)),
      },
    });
    this.#leases = options.leases;
  }

  /** This replica's leases (tests). */
  get leases(): SessionLeases {
    return this.#leases;
  }

  override async submitTask(...args: P<"submitTask">) {
    return this.#retried(() => super.submitTask(...args));
  }

  override async finishRun(...args: P<"finishRun">) {
    return this.#retried(() => super.finishRun(...args));
  }

  override async claimNext(...args: P<"claimNext">) {
    const [id, , workspaceId] = args;
    const stream = sessionStream(
      workspaceId ? { workspace_id: workspaceId, id } : await this.sessionRef(id, undefined),
    );
    const mine = await this.owner.withLock(stream, () => this.#leases.ensure(stream, false));
    if (!mine) return undefined;
    return this.#retried(() => super.claimNext(...args));
  }

  override async recoverExpired(...args: P<"recoverExpired">) {
    const [owner, limit] = args;
    // Cheap "none" first, as the owned store does; then only our sessions.
    if (!(await this.anyExpired())) return [];
    return this.owner.exclusive(() =>
      this.#leases.pinned(() =>
        this.parts.recovery.recoverExpired(owner, limit, (session) =>
          this.#leases.ensure(sessionStream(session), false),
        ),
      ),
    );
  }

  override async deliverSignal(...args: P<"deliverSignal">) {
    const [signal, context] = args;
    await this.owner.settled();
    // The session the signal resumes, taken first: its state on another
    // replica would not see the resumed turn. By the turn's global signal id,
    // or by its label alone when one waiting turn has it (several: the
    // relational path refuses the ambiguity).
    const waiting = signal.sessionId
      ? []
      : await this.context.db
          .selectFrom("tasks")
          .select(["session_id", "workspace_id"])
          .where("run_state", "=", "waiting")
          .where((eb) =>
            eb.or([
              eb("signal_id", "=", signal.signalId),
              ...(signal.labelAlone
                ? [eb("signal_id", "=", sql<string>`${sql.ref("id")} || ':' || ${signal.signalId}`)]
                : []),
            ]),
          )
          .$if(context.scope !== undefined, (q) =>
            q.where("workspace_id", "=", context.scope as string),
          )
          .limit(2)
          .execute();
    const found = waiting.length === 1 ? waiting[0] : undefined;
    const session = signal.sessionId
      ? await this.sessionRef(signal.sessionId, context.scope)
      : found && { workspace_id: found.workspace_id, id: found.session_id };
    if (!session) return super.deliverSignal(...args);
    const stream = sessionStream(session);
    return this.#leases.pinned(async () => {
      await this.owner.withLock(stream, () => this.#leases.ensure(stream, true));
      return super.deliverSignal(...args);
    });
  }

  /** Closes the owner and releases every lease. */
  async closeLeases(): Promise<void> {
    this.close();
    await this.#leases.close();
  }

  async #retried<T>(work: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (!isStreamConflict(error) || attempt >= ATTEMPTS) throw error;
      }
    }
  }
}

/**
 * `read` shared by concurrent callers without reading stale: a caller that
 * arrives while a read is in flight waits for it and takes the next one,
 * which every caller arriving meanwhile shares (a read that started before
 * the call might miss a write committed just before it). At most two reads
 * in flight's latency; at 32 reads in flight, about two statements.
 */
export function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  let next: Promise<T> | undefined;
  const start = (): Promise<T> => {
    const mine: Promise<T> = read().finally(() => {
      if (inFlight === mine) inFlight = undefined;
    });
    inFlight = mine;
    return mine;
  };
  return () => {
    if (!inFlight) return start();
    next ??= inFlight
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        next = undefined;
        return start();
      });
    return next;
  };
}
