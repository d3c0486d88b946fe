/**
 * The mailbox's engine in one replica: runs the turns this replica claimed,
 * one session at a time, and keeps the mailbox moving.
 *
 * - A turn runs right after the transaction that claimed it commits (submit,
 *   signal, or the previous turn's finish): no polling on the hot path.
 * - While a turn runs, its lease is renewed every third of the lease; a renew
 *   that finds the task canceled (or the claim lost) aborts the backend. A
 *   cancel committed by another replica also NOTIFYs, which triggers the
 *   renew at once.
 * - Every sweep interval (and at start) it recovers expired leases and claims
 *   queued turns nobody claimed — the cross-replica fallback. While sweeps
 *   find nothing and no turn starts here, the interval doubles up to
 *   `sweepIdleMaxMs`; a sweep that finds work, or a turn dispatched here,
 *   brings it back to `sweepMs` at once.
 * - It consumes the signal bus (group "tasks"), so a signal published there
 *   by anyone reaches the waiting task.
 *
 * The database decides who runs what (see PostgresTaskStore); this class only
 * executes what it was granted.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";
import { type Agent, AutonomyTier } from "@trellis/contracts/tasks";
import type { SignalBus } from "@trellis/eventlog";
import type { AgentExecutor, ExecutionRequest, RunMemory } from "@trellis/execution";
import {
  IdleBackoff,
  inputRejectedByDatabase,
  isTrellisError,
  type Logger,
  sleep,
  withSpan,
} from "@trellis/runtime";
import type { Database, Unlisten } from "@trellis/storage";
import type { ContextCompactor } from "../compaction/index.js";
import { SYSTEM_ACTOR } from "../domain/events.js";
import { REPLAY_REQUEST_KEY } from "../domain/replay.js";
import type { RunOutcome } from "../domain/run.js";
import type { Claim, TaskStore } from "../store/task-store.js";
import { type ProgressItem, ProgressRecorder } from "./progress.js";
import { blockedItem } from "./refusal.js";
import { TranscriptCache } from "./transcript-cache.js";

/** A deterministic refusal by the database: retrying the same write cannot help. */
function isUnrecordable(error: unknown): boolean {
  return inputRejectedByDatabase(error) !== undefined;
}

/** Options of {@link TurnRunner}. */
export interface TurnRunnerOptions {
  store: TaskStore;
  executor: AgentExecutor;
  /** This replica's id (the lease owner). */
  owner: string;
  leaseMs: number;
  sweepMs: number;
  /** Longest sweep interval while idle (default 8 × `sweepMs`, at least `sweepMs`). */
  sweepIdleMaxMs?: number;
  cancelGraceMs: number;
  /** Longest a turn may run before it is aborted and failed (`timeout`). */
  turnTimeoutMs?: number;
  /** Progress events of a running turn are written at most this often (default 50 ms). */
  progressFlushMs?: number;
  shutdownGraceMs: number;
  logger: Logger;
  /** Signal bus to consume (group "tasks"); omitted in tests that do not need it. */
  signals?: SignalBus;
  /** Compacts a turn's history past its token budget (see `../compaction`); none: full history. */
  compactor?: ContextCompactor;
  /** LISTEN for cancels committed elsewhere: database and channel. */
  cancelNotifications?: { database: Database<unknown>; channel: string };
  /**
   * The memory of a run (`memory/run-memory.ts`), recording its reads and
   * writes through `record`; none: runs have no memory.
   */
  runMemory?: (
    run: { taskId: string; sessionId: string; workspaceId: string; agentId: string },
    record: (item: ProgressItem) => void,
  ) => RunMemory;
}

interface LocalRun {
  claim: Claim;
  abort: AbortController;
  /** Aborted by shutdown: hand the claim back instead of recording a result. */
  shutdown: boolean;
}

/**
 * The persona's autonomy policy, in the form backends already honour (Harn
 * "Persona": autonomy_tier, enforced on every task that names the persona):
 * an `act_with_approval` agent has every tool it may call marked
 * `requiresApproval`, so the harness suspends each call for approval
 * (AUTH/INPUT_REQUIRED, `tool.approval_required`) before it runs — as it does
 * for a tool the registry marks, or the definition's `require_approval`
 * lists. Approval is only ever added here, never waived.
 */
export function approvalPolicy(
  agent: Pick<Agent, "autonomyTier" | "tools" | "definition">,
): Pick<ExecutionRequest, "toolDescriptors"> {
  if (agent.autonomyTier !== AutonomyTier.ACT_WITH_APPROVAL) return {};
  // The tools the agent may call: its definition's `tools` (harness), else its own list.
  const listed = agent.definition?.tools;
  const names =
    Array.isArray(listed) && listed.every((t) => typeof t === "string")
      ? (listed as string[])
      : agent.tools;
  return { toolDescriptors: [...new Set(names)].map((name) => ({ name, requiresApproval: true })) };
}

/** Runs claimed turns through the executor and records their outcome. */
export class TurnRunner {
  readonly #o: TurnRunnerOptions;
  readonly #runs = new Map<string, LocalRun>();
  readonly #transcripts = new TranscriptCache();
  readonly #drives = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  #started = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  #renewAgain = false;
  #loops: Promise<void>[] = [];
  #unlisten: Unlisten | undefined;

  readonly #sweepBackoff: IdleBackoff;

  constructor(options: TurnRunnerOptions) {
    this.#o = options;
    this.#sweepBackoff = new IdleBackoff({
      baseMs: options.sweepMs,
      maxMs: Math.max(options.sweepMs, options.sweepIdleMaxMs ?? options.sweepMs * 8),
    });
  }

  /** Turns running in this replica. */
  get running(): number {
    return this.#runs.size;
  }

  /** Whether this replica runs the task now. */
  isRunning(taskId: string): boolean {
    return this.#runs.has(taskId);
  }

  /** Run a claimed turn now (and the session's following turns, as they are claimed). */
  dispatch(claim: Claim | undefined): void {
    if (!claim) return;
    // Work: sweep at the base interval again (a crashed peer's turns show up now).
    this.#sweepBackoff.reset();
    if (this.#stop.signal.aborted) {
      void this.#release(claim, "the replica is shutting down");
      return;
    }
    if (this.#runs.has(claim.task.id)) {
      this.#o.logger.warn("turn already running here; ignoring a second claim", {
        task_id: claim.task.id,
      });
      return;
    }
    const run: LocalRun = { claim, abort: new AbortController(), shutdown: false };
    this.#runs.set(claim.task.id, run);
    const drive = this.#drive(run);
    this.#drives.add(drive);
    void drive.finally(() => this.#drives.delete(drive));
  }

  /** Abort a turn running here (its task was canceled in this replica). */
  abort(taskId: string, reason: string): void {
    this.#runs.get(taskId)?.abort.abort(new Error(reason));
  }

  /** Check now whether runs here were canceled elsewhere (called on NOTIFY). */
  checkRuns(): void {
    if (this.#renewing) {
      this.#renewAgain = true;
      return;
    }
    this.#renewing = this.#renew().finally(() => {
      this.#renewing = undefined;
      if (this.#renewAgain) {
        this.#renewAgain = false;
        this.checkRuns();
      }
    });
  }

  async #renew(): Promise<void> {
    const ids = [...this.#runs.keys()];
    if (ids.length === 0) return;
    try {
      const lost = await this.#o.store.renewLeases(this.#o.owner, ids, this.#o.leaseMs);
      for (const id of lost) this.abort(id, "the task was canceled or its claim was lost");
    } catch (error) {
      this.#o.logger.warn("renewing turn leases failed; retrying", { error: String(error) });
    }
  }

  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    const { cancelNotifications, signals } = this.#o;
    if (cancelNotifications) {
      try {
        this.#unlisten = await cancelNotifications.database.listen(
          cancelNotifications.channel,
          () => this.checkRuns(),
        );
      } catch (error) {
        this.#o.logger.warn("listening for cancels failed; relying on lease renewal", {
          error: String(error),
        });
      }
    }
    this.#heartbeat = setInterval(
      () => this.checkRuns(),
      Math.max(50, Math.floor(this.#o.leaseMs / 3)),
    );
    this.#heartbeat.unref();
    // Pick up what a previous incarnation or a crashed replica left behind.
    await this.#sweep();
    this.#loops.push(this.#sweepLoop());
    if (signals) this.#loops.push(this.#consumeSignals(signals));
  }

  async #sweepLoop(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      await this.#sweepBackoff.wait(this.#stop.signal);
      if (this.#stop.signal.aborted) return;
      if (await this.#sweep()) this.#sweepBackoff.reset();
      else if (this.#runs.size === 0) this.#sweepBackoff.idle();
    }
  }

  /** One sweep; true when it found something (or failed: retry soon). */
  async #sweep(): Promise<boolean> {
    const { store, owner, logger } = this.#o;
    let found = false;
    try {
      for (const claim of await store.recoverExpired(owner, 50)) {
        found = true;
        this.dispatch(claim);
      }
      for (const { workspaceId, sessionId } of await store.sessionsWithQueuedWork(50)) {
        if (this.#stop.signal.aborted) return found;
        found = true;
        this.dispatch(await store.claimNext(sessionId, owner, workspaceId));
      }
    } catch (error) {
      logger.warn("mailbox sweep failed; retrying next round", { error: String(error) });
      return true;
    }
    return found;
  }

  async #consumeSignals(signals: SignalBus): Promise<void> {
    while (!this.#stop.signal.aborted) {
      try {
        for await (const signal of signals.subscribe({
          prefix: "",
          group: "tasks",
          signal: this.#stop.signal,
        })) {
          await this.#applySignal(signal.signalId, signal.deliveryId, signal.payload);
          await signal.ack();
        }
      } catch (error) {
        if (this.#stop.signal.aborted) return;
        this.#o.logger.warn("signal subscription failed; resubscribing", { error: String(error) });
        await sleep(1000, this.#stop.signal);
      }
    }
  }

  /** A signal from the bus: apply it (a no-op when the RPC already did) and run what it woke. */
  async #applySignal(signalId: string, deliveryId: string, payload: JsonValue): Promise<void> {
    try {
      const result = await this.#o.store.deliverSignal(
        { signalId, deliveryId, payload },
        { actor: SYSTEM_ACTOR },
        this.#o.owner,
      );
      if (result.abort) this.abort(result.abort, "canceled by signal");
      this.dispatch(result.claim);
    } catch (error) {
      // Signals for other consumers, or for tasks no longer waiting, are not ours.
      if (isTrellisError(error) && error.reason === "resource_not_found") return;
      throw error;
    }
  }

  async #drive(first: LocalRun): Promise<void> {
    let run: LocalRun | undefined = first;
    while (run) {
      let next: Claim | undefined;
      try {
        next = await this.#runOne(run);
      } catch (error) {
        // The claim stays in the database; its lease runs out and recovery takes over.
        this.#o.logger.error("recording a turn failed; recovery will take it over", {
          task_id: run.claim.task.id,
          error,
        });
      } finally {
        this.#runs.delete(run.claim.task.id);
      }
      run = undefined;
      if (!next) return;
      if (this.#stop.signal.aborted) {
        await this.#release(next, "the replica is shutting down");
        return;
      }
      run = { claim: next, abort: new AbortController(), shutdown: false };
      this.#runs.set(next.task.id, run);
    }
  }

  async #runOne(run: LocalRun): Promise<Claim | undefined> {
    const { store } = this.#o;
    const { claim } = run;
    // Storage trouble is not the agent's failure: retried, and if it persists
    // the claim's lease runs out and recovery takes the turn over.
    const [history, state] = await Promise.all([
      this.#retry(() =>
        this.#transcripts.history(
          ({ workspaceId, sessionId }, from, to) =>
            store.loadTranscript(sessionId, from, to, workspaceId),
          { workspaceId: claim.task.workspaceId, sessionId: claim.task.sessionId },
          claim.transcriptEpoch,
          claim.inputPosition,
        ),
      ),
      // The agent's state besides the transcript, as the session's last run left it.
      this.#retry(() => store.loadAgentState(claim.task.sessionId, claim.task.workspaceId)),
    ]);
    // Past its token budget the turn gets a compacted history (the transcript is unchanged).
    const context =
      (await this.#o.compactor?.prepare(
        claim,
        history,
        (i) => store.recordProgress(claim, i),
        run.abort.signal,
      )) ?? history;
    const progress = new ProgressRecorder((items) => store.recordProgress(claim, items), {
      flushMs: this.#o.progressFlushMs ?? 50,
      logger: this.#o.logger,
      agentBackend: claim.agent.backend,
    });
    let outcome: RunOutcome;
    try {
      outcome = await withSpan(
        "trellis.turn",
        {
          attributes: {
            "trellis.task_id": claim.task.id,
            "trellis.session_id": claim.task.sessionId,
          },
        },
        () => this.#execute(run, context, state, progress),
      );
    } catch (error) {
      // Never stuck WORKING: a backend that throws fails the turn.
      outcome = {
        status: "failed",
        messages: [],
        category: "internal_error",
        message: `the agent backend failed: ${error instanceof Error ? error.message : String(error)}`,
        retryable: false,
        // A backend that threw after the abort has stopped too.
        ...(run.abort.signal.aborted ? { cancelConfirmed: true } : {}),
      };
    }
    // A refusal's blocking reasons, typed (backend, capability, code), just before the failure.
    const blocked = blockedItem(outcome);
    if (blocked) progress.record(blocked);
    // Progress reaches the log before the outcome it leads to.
    await progress.close();
    if (run.shutdown) {
      await this.#release(claim, "the replica shut down while the turn ran");
      return undefined;
    }
    const result = await this.#finish(claim, outcome);
    const output = result.task?.output ?? [];
    if (
      result.applied &&
      claim.task.input &&
      result.transcriptLength === claim.inputPosition + 1n + BigInt(output.length)
    ) {
      // The input and this turn's output are the transcript's tail: no need to read them back.
      const session = { workspaceId: claim.task.workspaceId, sessionId: claim.task.sessionId };
      this.#transcripts.extend(session, claim.transcriptEpoch, claim.inputPosition, [
        claim.task.input,
        ...output,
      ]);
    }
    return result.next;
  }

  /**
   * Record the outcome. A retry after a commit whose answer was lost is
   * fenced off: applied once. When the store refuses the outcome itself (a
   * PostgreSQL data exception: text it cannot hold, say), no number of
   * attempts or re-runs would record it: the turn is failed with that cause
   * and without the output, at once — never left to lease expiry and
   * recovery (which re-ran a safe-to-retry agent forever and blamed a lost
   * worker otherwise).
   */
  async #finish(claim: Claim, outcome: RunOutcome): ReturnType<TaskStore["finishRun"]> {
    const { store, owner } = this.#o;
    try {
      return await this.#retry(() => store.finishRun(claim, outcome, owner), isUnrecordable);
    } catch (error) {
      const refused = inputRejectedByDatabase(error);
      if (refused === undefined) throw error;
      this.#o.logger.warn("the turn's outcome cannot be stored; failing the turn", {
        task_id: claim.task.id,
        sqlstate: refused.metadata.sqlstate,
      });
      const failed: RunOutcome = {
        status: "failed",
        messages: [],
        category: "output_unrecordable",
        message: `the turn's output cannot be stored (${refused.message}; SQLSTATE ${refused.metadata.sqlstate}); it was not recorded`,
        retryable: false,
        ...(outcome.cancelConfirmed !== undefined
          ? { cancelConfirmed: outcome.cancelConfirmed }
          : {}),
      };
      return this.#retry(() => store.finishRun(claim, failed, owner));
    }
  }

  async #retry<T>(work: () => Promise<T>, giveUp?: (error: unknown) => boolean): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (attempt >= 3 || this.#stop.signal.aborted || giveUp?.(error)) throw error;
        this.#o.logger.warn("storage call failed; retrying", { attempt, error: String(error) });
        await sleep(50 * 4 ** (attempt - 1));
      }
    }
  }

  #execute(
    run: LocalRun,
    history: readonly Message[],
    state: JsonObject | undefined,
    progress: ProgressRecorder,
  ): Promise<RunOutcome> {
    const { claim } = run;
    const task = claim.task;
    const memory = this.#o.runMemory?.(
      {
        taskId: task.id,
        sessionId: task.sessionId,
        workspaceId: task.workspaceId,
        agentId: claim.agent.id,
      },
      progress.record,
    );
    const request: ExecutionRequest = {
      taskId: task.id,
      sessionId: task.sessionId,
      workspaceId: task.workspaceId,
      agent: {
        id: claim.agent.id,
        backend: claim.agent.backend,
        definition: claim.agent.definition ?? {},
        tools: claim.agent.tools,
        safeToRetry: claim.safeToRetry,
      },
      history,
      input: task.input as Message,
      signal: run.abort.signal,
      onEvent: progress.add,
      ...(memory ? { memory } : {}),
      ...approvalPolicy(claim.agent),
      ...(claim.resume ? { resume: claim.resume } : {}),
      // The task's own requirements, stored with it: a retry or recovery honours them.
      ...(claim.requirements ? { requirements: claim.requirements } : {}),
      ...(state ? { state } : {}),
      // A task with a parent may be a replay: the replay executor looks it up.
      ...(task.parentTaskId ? { metadata: { [REPLAY_REQUEST_KEY]: true } } : {}),
    };
    let timedOut = false;
    const limit = this.#o.turnTimeoutMs;
    const deadline =
      limit === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            run.abort.abort(new Error(`the turn ran longer than ${limit} ms`));
          }, limit);
    // A turn stopped by its deadline failed (retryably); other aborts are cancels.
    const asTimeout = (result: RunOutcome): RunOutcome =>
      timedOut && result.status === "cancelled"
        ? {
            status: "failed",
            messages: result.messages,
            category: "timeout",
            message: `the turn ran longer than ${limit} ms and was stopped`,
            retryable: true,
          }
        : result;
    return new Promise<RunOutcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        clearTimeout(timer);
        clearTimeout(deadline);
        run.abort.signal.removeEventListener("abort", onAbort);
      };
      // A canceled backend gets a grace period to stop and return its partial
      // output; its cancel is recorded as confirmed only if it does.
      const onAbort = () => {
        timer = setTimeout(() => {
          settle();
          this.#o.logger.warn("a canceled backend did not stop within the cancel grace", {
            task_id: task.id,
            grace_ms: this.#o.cancelGraceMs,
          });
          resolve(asTimeout({ status: "cancelled", messages: [], cancelConfirmed: false }));
        }, this.#o.cancelGraceMs);
      };
      if (run.abort.signal.aborted) onAbort();
      else run.abort.signal.addEventListener("abort", onAbort, { once: true });
      this.#o.executor.execute(request).then(
        (result) => {
          settle();
          resolve(
            asTimeout(run.abort.signal.aborted ? { ...result, cancelConfirmed: true } : result),
          );
        },
        (error: unknown) => {
          settle();
          reject(error);
        },
      );
    });
  }

  async #release(claim: Claim, reason: string): Promise<void> {
    try {
      await this.#o.store.releaseRun(claim, this.#o.owner, reason);
    } catch (error) {
      this.#o.logger.warn("handing a turn back failed; its lease will expire", {
        task_id: claim.task.id,
        error: String(error),
      });
    }
  }

  /** Stop: wait for running turns (up to the grace), then abort and hand back the rest. */
  async stop(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    this.#stop.abort(new Error("stopping"));
    clearInterval(this.#heartbeat);
    await this.#unlisten?.().catch(() => {});
    await Promise.race([Promise.allSettled([...this.#drives]), sleep(this.#o.shutdownGraceMs)]);
    for (const run of this.#runs.values()) {
      run.shutdown = true;
      run.abort.abort(new Error("the replica is shutting down"));
    }
    await Promise.race([
      Promise.allSettled([...this.#drives]),
      sleep(this.#o.cancelGraceMs + 1000),
    ]);
    await Promise.allSettled(this.#loops);
    await this.#renewing;
  }
}
