/**
 * {@link TaskStore} with the embedded session owner (`TRELLIS_TASKS_JOURNAL=owner`,
 * docs/turn-journal.md step 2). The turn path — submit, finish, claim — is
 * made in memory by the owner and written as one journal append per step
 * (owned-turns.ts); everything else keeps the relational path of
 * {@link PostgresTaskStore}, routed so it stays consistent with the owner
 * (session-owner.ts):
 *
 * | call | how |
 * |---|---|
 * | `submitTask`, `finishRun`, `claimNext` | under the session's lock, in memory, one append; a rare case the owner does not make falls back to the relational write under the same lock |
 * | writes of one session (close, truncate, fork, append a message, cancel, release, progress) | relational, under the session's lock, after its appends are projected; its state in memory is dropped after |
 * | writes that may touch any session (signals, replays, expired leases) | relational, under the owner's gate alone, after everything is projected |
 * | reads | after the projector passed the journal's head at the call (read-your-writes; a no-op when it has) |
 * | workspaces, agents | unchanged (the turn path does not write them) |
 *
 * Embedded only: one process owns all sessions. Distributed mode needs the
 * leases of step 4.
 */
import type { Journal, Projector } from "@trellis/storage";
import { sql } from "kysely";
import { agentStateOf, knownAgentState } from "./agent-state.js";
import { OwnedTurns } from "./owned-turns.js";
import { PostgresTaskStore, type PostgresTaskStoreOptions } from "./postgres-task-store.js";
import { type OwnerLeaseHooks, SessionOwner } from "./session-owner.js";
import type { TaskStore } from "./task-store.js";

/** Options of {@link OwnedTaskStore}: the store's, plus the journal and its read model. */
export interface OwnedTaskStoreOptions extends Omit<PostgresTaskStoreOptions, "journal"> {
  owner: {
    journal: Journal;
    readModel: Projector;
    idleMs?: number;
    /** Distributed: the replica's session leases (leased-task-store.ts). */
    leases?: OwnerLeaseHooks;
    /** Distributed: the journal table's head, for reads. */
    head?: () => Promise<bigint>;
  };
}

type P<K extends keyof TaskStore> = Parameters<TaskStore[K]>;

/** See the module header. */
export class OwnedTaskStore extends PostgresTaskStore {
  readonly #owner: SessionOwner;
  readonly #turns: OwnedTurns;

  constructor(options: OwnedTaskStoreOptions) {
    super(options);
    this.#owner = new SessionOwner(this.context, {
      journal: options.owner.journal,
      readModel: options.owner.readModel,
      ...(options.owner.idleMs !== undefined ? { idleMs: options.owner.idleMs } : {}),
      ...(options.owner.leases ? { leases: options.owner.leases } : {}),
      ...(options.owner.head ? { head: options.owner.head } : {}),
    });
    this.#turns = new OwnedTurns(this.context, this.parts, this.#owner);
  }

  /** The session owner (tests). */
  get owner(): SessionOwner {
    return this.#owner;
  }

  /** Stops the owner's timer. */
  close(): void {
    this.#owner.close();
  }

  // ------------------------------------------------------------ the turn path, in memory

  override async submitTask(...args: P<"submitTask">) {
    const [input, context, owner] = args;
    // A session created by its first submit: nobody else can know its id yet
    // unless the caller named it; a named one is written under its lock.
    if (!input.sessionId) return super.submitTask(...args);
    return this.#owner.withSession(input.sessionId, async () => {
      const state = await this.#owner.load(input.sessionId);
      const made = state && (await this.#turns.submit(state, input, context, owner));
      return made ?? this.#owner.relational(input.sessionId, () => super.submitTask(...args));
    });
  }

  override async finishRun(...args: P<"finishRun">) {
    const [claim, outcome, owner] = args;
    const id = claim.task.sessionId;
    return this.#owner.withSession(id, async () => {
      const state = await this.#owner.load(id);
      const made = state && (await this.#turns.finish(state, claim, outcome, owner));
      return made ?? this.#owner.relational(id, () => super.finishRun(...args));
    });
  }

  override async claimNext(...args: P<"claimNext">) {
    const [id, owner] = args;
    return this.#owner.withSession(id, async () => {
      const state = await this.#owner.load(id);
      if (!state) return undefined;
      return this.#turns.claimNext(state, owner);
    });
  }

  // ------------------------------------------------------------ writes of one session

  override async createSession(...args: P<"createSession">) {
    const id = args[0].sessionId;
    if (!id) return super.createSession(...args);
    return this.#session(id, () => super.createSession(...args));
  }

  override async closeSession(...args: P<"closeSession">) {
    return this.#session(args[0], () => super.closeSession(...args));
  }

  override async forkSession(...args: P<"forkSession">) {
    return this.#session(args[0].sessionId, () => super.forkSession(...args));
  }

  override async truncateSession(...args: P<"truncateSession">) {
    return this.#session(args[0], () => super.truncateSession(...args));
  }

  override async appendMessage(...args: P<"appendMessage">) {
    return this.#session(args[0], () => super.appendMessage(...args));
  }

  override async cancelTask(...args: P<"cancelTask">) {
    await this.#owner.settled();
    const task = await super.getTask(args[0], args[2].scope);
    return this.#session(task.sessionId, () => super.cancelTask(...args));
  }

  override async releaseRun(...args: P<"releaseRun">) {
    return this.#session(args[0].task.sessionId, () => super.releaseRun(...args));
  }

  override async recordProgress(...args: P<"recordProgress">) {
    // After the turn's own events, in the outbox's order.
    return this.#session(args[0].task.sessionId, () => super.recordProgress(...args));
  }

  // ------------------------------------------------------------ writes of any session

  override async deliverSignal(...args: P<"deliverSignal">) {
    return this.#owner.exclusive(() => super.deliverSignal(...args));
  }

  override async createReplay(...args: P<"createReplay">) {
    return this.#owner.exclusive(() => super.createReplay(...args));
  }

  override async recoverExpired(...args: P<"recoverExpired">) {
    if (!(await this.anyExpired())) return [];
    return this.#owner.exclusive(() => super.recoverExpired(...args));
  }

  /**
   * Whether any run's lease expired, once everything is projected: the
   * sweep's common answer ("none") without stopping the owned steps.
   */
  protected async anyExpired(): Promise<boolean> {
    await this.#owner.settled();
    const expired = await this.context.db
      .selectFrom("tasks")
      .select("id")
      .where("run_state", "=", "running")
      .where("lease_expires_at", "<", sql<Date>`now()`)
      .limit(1)
      .execute();
    return expired.length > 0;
  }

  override async renewLeases(...args: P<"renewLeases">) {
    await this.#owner.settled();
    return super.renewLeases(...args);
  }

  override async registerArtifact(...args: P<"registerArtifact">) {
    await this.#owner.settled();
    return super.registerArtifact(...args);
  }

  // ------------------------------------------------------------ reads: after the projector

  override async getSession(...args: P<"getSession">) {
    await this.#owner.settled();
    return super.getSession(...args);
  }

  override async listSessions(...args: P<"listSessions">) {
    await this.#owner.settled();
    return super.listSessions(...args);
  }

  override async listMessages(...args: P<"listMessages">) {
    await this.#owner.settled();
    return super.listMessages(...args);
  }

  override async getMessage(...args: P<"getMessage">) {
    await this.#owner.settled();
    return super.getMessage(...args);
  }

  override async loadTranscript(...args: P<"loadTranscript">) {
    await this.#owner.settled();
    return super.loadTranscript(...args);
  }

  override async loadAgentState(...args: P<"loadAgentState">) {
    // The runner's read (internal), from the owner's memory (agent-state.ts).
    const [sessionId] = args;
    const known = this.#owner.held(sessionId)?.agentState;
    if (known) return agentStateOf(known);
    // Read once under the session's lock (no step of it changes the state
    // meanwhile); no gate, no lease guard: a run reads, it takes nothing.
    return this.#owner.withLock(sessionId, async () => {
      const held = this.#owner.held(sessionId);
      if (held?.agentState) return agentStateOf(held.agentState);
      // Only the session's appends that changed it.
      await this.#owner.drainAgentState(sessionId);
      const state = await super.loadAgentState(...args);
      if (held && this.#owner.held(sessionId) === held) held.agentState = knownAgentState(state);
      return state;
    });
  }

  override async sessionsWithQueuedWork(...args: P<"sessionsWithQueuedWork">) {
    await this.#owner.settled();
    return super.sessionsWithQueuedWork(...args);
  }

  override async getReplaySource(...args: P<"getReplaySource">) {
    await this.#owner.settled();
    return super.getReplaySource(...args);
  }

  override async getReplay(...args: P<"getReplay">) {
    await this.#owner.settled();
    return super.getReplay(...args);
  }

  override async getTask(...args: P<"getTask">) {
    await this.#owner.settled();
    return super.getTask(...args);
  }

  override async listTasks(...args: P<"listTasks">) {
    await this.#owner.settled();
    return super.listTasks(...args);
  }

  override async listOpenChildTasks(...args: P<"listOpenChildTasks">) {
    await this.#owner.settled();
    return super.listOpenChildTasks(...args);
  }

  override async findEvent(...args: P<"findEvent">) {
    await this.#owner.settled();
    return super.findEvent(...args);
  }

  override async getOutcome(...args: P<"getOutcome">) {
    await this.#owner.settled();
    return super.getOutcome(...args);
  }

  override async listOutcomes(...args: P<"listOutcomes">) {
    await this.#owner.settled();
    return super.listOutcomes(...args);
  }

  override async getArtifact(...args: P<"getArtifact">) {
    await this.#owner.settled();
    return super.getArtifact(...args);
  }

  override async listArtifacts(...args: P<"listArtifacts">) {
    await this.#owner.settled();
    return super.listArtifacts(...args);
  }

  override async getArtifactContent(...args: P<"getArtifactContent">) {
    await this.#owner.settled();
    return super.getArtifactContent(...args);
  }

  /** A relational write of one session, under its lock (see the module header). */
  #session<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    return this.#owner.withSession(sessionId, () => this.#owner.relational(sessionId, work));
  }
}
