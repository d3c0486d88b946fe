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
 * | reads | after the projector passed the journal's head at the call (read-your-writes; a no-op when it has); a read of one named session in a named workspace, after that session's head when its owner is this replica (distributed: no read of the journal table's head) |
 * | the runner's polls (`anyExpired`, `sessionsWithQueuedWork`) | after this process's own appends are projected: another replica's work shows up at a later poll |
 * | workspaces, agents | unchanged (the turn path does not write them) |
 *
 * Embedded only: one process owns all sessions. Distributed mode needs the
 * leases of step 4.
 */
import type { Journal, Projector } from "@trellis/storage";
import { sql } from "kysely";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { agentStateOf, knownAgentState } from "./agent-state.js";
import { OwnedTurns } from "./owned-turns.js";
import { PostgresTaskStore, type PostgresTaskStoreOptions } from "./postgres-task-store.js";
import { type OwnerLeaseHooks, SessionOwner } from "./session-owner.js";
import { type SessionRef, sessionStream } from "./session-stream.js";
import type { TaskStore } from "./task-store.js";

/** The owner's key of a task's session. */
function refOfTask(task: { workspaceId: string; sessionId: string }): SessionRef {
  return { workspace_id: task.workspaceId, id: task.sessionId };
}

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
    const ref = await this.sessionRef(input.sessionId, context.scope, input.workspaceId);
    return this.#owner.withSession(ref, async () => {
      const state = await this.#owner.load(ref);
      const made = state && (await this.#turns.submit(state, input, context, owner));
      return made ?? this.#owner.relational(ref, () => super.submitTask(...args));
    });
  }

  override async finishRun(...args: P<"finishRun">) {
    const [claim, outcome, owner] = args;
    const ref = { workspace_id: claim.task.workspaceId, id: claim.task.sessionId };
    return this.#owner.withSession(ref, async () => {
      const state = await this.#owner.load(ref);
      const made = state && (await this.#turns.finish(state, claim, outcome, owner));
      return made ?? this.#owner.relational(ref, () => super.finishRun(...args));
    });
  }

  override async claimNext(...args: P<"claimNext">) {
    const [id, owner, workspaceId] = args;
    const ref = workspaceId
      ? { workspace_id: workspaceId, id }
      : await this.sessionRef(id, undefined);
    return this.#owner.withSession(ref, async () => {
      const state = await this.#owner.load(ref);
      if (!state) return undefined;
      return this.#turns.claimNext(state, owner);
    });
  }

  // ------------------------------------------------------------ writes of one session

  override async createSession(...args: P<"createSession">) {
    const [input, context] = args;
    if (!input.sessionId) return super.createSession(...args);
    const ref = {
      workspace_id: this.parts.directory.workspaceFor(input.workspaceId, context),
      id: input.sessionId,
    };
    return this.#session(ref, () => super.createSession(...args));
  }

  override async closeSession(...args: P<"closeSession">) {
    const ref = await this.sessionRef(args[0], args[2].scope);
    return this.#session(ref, () => super.closeSession(...args));
  }

  override async forkSession(...args: P<"forkSession">) {
    const ref = await this.sessionRef(args[0].sessionId, args[1].scope);
    return this.#session(ref, () => super.forkSession(...args));
  }

  override async truncateSession(...args: P<"truncateSession">) {
    const ref = await this.sessionRef(args[0], args[2].scope);
    return this.#session(ref, () => super.truncateSession(...args));
  }

  override async appendMessage(...args: P<"appendMessage">) {
    const ref = await this.sessionRef(args[0], args[3].scope);
    return this.#session(ref, () => super.appendMessage(...args));
  }

  override async cancelTask(...args: P<"cancelTask">) {
    await this.#owner.settled();
    const task = await super.getTask(args[0], args[2].scope);
    const ref = { workspace_id: task.workspaceId, id: task.sessionId };
    return this.#session(ref, () => super.cancelTask(...args));
  }

  override async releaseRun(...args: P<"releaseRun">) {
    return this.#session(refOfTask(args[0].task), () => super.releaseRun(...args));
  }

  override async recordProgress(...args: P<"recordProgress">) {
    // After the turn's own events, in the outbox's order.
    return this.#session(refOfTask(args[0].task), () => super.recordProgress(...args));
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
   * Whether any run's lease expired, once this process's appends are
   * projected: the sweep's common answer ("none") without stopping the
   * owned steps. A "yes" is judged again, after everything is projected.
   */
  protected async anyExpired(): Promise<boolean> {
    await this.#owner.settledHere();
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
    await this.#settledFor(args[0], args[1]);
    return super.getSession(...args);
  }

  override async listSessions(...args: P<"listSessions">) {
    await this.#owner.settled();
    return super.listSessions(...args);
  }

  override async listMessages(...args: P<"listMessages">) {
    await this.#settledFor(args[0], args[3]);
    return super.listMessages(...args);
  }

  override async getMessage(...args: P<"getMessage">) {
    await this.#owner.settled();
    return super.getMessage(...args);
  }

  override async loadTranscript(...args: P<"loadTranscript">) {
    await this.#settledFor(args[0], args[3]);
    return super.loadTranscript(...args);
  }

  override async loadAgentState(...args: P<"loadAgentState">) {
    // The runner's read (internal), from the owner's memory (agent-state.ts).
    const [id, workspaceId] = args;
    const ref = workspaceId
      ? { workspace_id: workspaceId, id }
      : await this.sessionRef(id, undefined);
    const known = this.#owner.held(ref)?.agentState;
    if (known) return agentStateOf(known);
    // Read once under the session's lock (no step of it changes the state
    // meanwhile); no gate, no lease guard: a run reads, it takes nothing.
    return this.#owner.withLock(sessionStream(ref), async () => {
      const held = this.#owner.held(ref);
      if (held?.agentState) return agentStateOf(held.agentState);
      // Only the session's appends that changed it.
      await this.#owner.drainAgentState(ref);
      const state = await super.loadAgentState(...args);
      if (held && this.#owner.held(ref) === held) held.agentState = knownAgentState(state);
      return state;
    });
  }

  override async sessionsWithQueuedWork(...args: P<"sessionsWithQueuedWork">) {
    // The runner's poll: its own writes; another replica's queued work is
    // that replica's to run (or shows up at a later poll).
    await this.#owner.settledHere();
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

  /**
   * The session a call naming `sessionId` acts on, as the owner keys it: in
   * the caller's workspace (`scope`) when it is confined to one; else the
   * session's own, by the relational path's rule (`WriteUnit.lockSession`,
   * `Mailbox.submitTask`): the session of the workspace the call names or
   * the caller's home (`home`; none: the default workspace), else the
   * oldest of that id — without a read when the owner holds the `home` one
   * (the steady turn loop). A session that does not exist gets `home` (or
   * the default workspace): the call then fails (not found) or creates it
   * relationally, with no state in memory to agree with.
   */
  protected async sessionRef(
    sessionId: string,
    scope: string | undefined,
    home?: string,
  ): Promise<SessionRef> {
    if (scope !== undefined) return { workspace_id: scope, id: sessionId };
    const mine = home ? { workspace_id: home, id: sessionId } : undefined;
    if (mine && this.#owner.holds(mine)) return mine;
    const row = await this.context.db
      .selectFrom("sessions")
      .select("workspace_id")
      .where("id", "=", sessionId)
      .orderBy(sql`workspace_id = ${home || DEFAULT_WORKSPACE_ID}`, "desc")
      .orderBy("seq")
      .limit(1)
      .executeTakeFirst();
    return { workspace_id: row?.workspace_id ?? (home || DEFAULT_WORKSPACE_ID), id: sessionId };
  }

  /**
   * Before a read of one session: when the call names its workspace, only
   * that session's appends (see `SessionOwner.settledFor`); else (the
   * session is found by its id alone) everything.
   */
  #settledFor(sessionId: string, workspaceId: string | undefined): Promise<void> {
    if (workspaceId === undefined || workspaceId === "") return this.#owner.settled();
    return this.#owner.settledFor({ workspace_id: workspaceId, id: sessionId });
  }

  /** A relational write of one session, under its lock (see the module header). */
  #session<T>(session: SessionRef, work: () => Promise<T>): Promise<T> {
    return this.#owner.withSession(session, () => this.#owner.relational(session, work));
  }
}
