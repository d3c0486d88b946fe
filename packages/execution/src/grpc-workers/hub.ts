/**
 * Embedded mode's dispatch to gRPC workers: no NATS, so the queue is in
 * memory, shared by every router of the process (the tasks service's and the
 * adapters service's; see {@link embeddedWorkerHub}). The semantics are the
 * JetStream path's (`routing/jetstream-dispatcher.ts`, rules in
 * `routing/lease.ts`):
 *
 * - an execution is offered, one attempt at a time, to a live session of its
 *   backend with a free slot; only the claim of the session it was offered
 *   to, for that attempt, is granted — a stale claim never runs;
 * - the worker's own negotiation may refuse it: the router tries the next
 *   backend;
 * - a session lost mid-execution (stream gone, heartbeats stopped): the
 *   execution runs again (attempt + 1) when the agent is safe to retry, else
 *   fails with `worker_lost`; an offer never claimed goes back to the queue;
 * - `maxElapsedMs` and caller cancels reach the worker as `cancel`; after the
 *   grace the router ends the execution itself. A queued execution whose
 *   backend has no live worker for `unavailableAfterMs` fails with
 *   `backend_unavailable` (retryable). Nothing waits forever.
 */
import {
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionResult,
  requestToProto,
  timeoutResult,
  type VaultGrant,
  vaultGrantsToProto,
} from "@trellis/adapter-sdk";
import type { Logger } from "@trellis/runtime";
import {
  afterLostWorker,
  holdsAttempt,
  routerFailure,
  unavailableBackend,
} from "../routing/lease.js";
import {
  cancelledResult,
  emitRouted,
  type PendingExecution,
  queuedExecution,
  resultAfterDeadline,
  stopWatching,
  watchDeadlineAndCancel,
} from "../routing/pending-execution.js";
import type { BackendRegistry } from "../routing/registry.js";
import type { DispatchOutcome, DispatchPlan, RemoteDispatcher } from "../routing/router.js";
import {
  type SessionEnd,
  secretsRefused,
  type VaultGrantInit,
  type WorkAttempt,
  type WorkerPort,
  type WorkerSession,
} from "./session.js";

/**
 * A plan as the hub takes it: with the vault grants of its agent, when the
 * router that placed it reads vaults (see `routed-executor.ts`).
 */
export interface HubPlan extends DispatchPlan {
  secrets?(): Promise<ReadonlyMap<string, VaultGrant>>;
}

/** Options of {@link LocalWorkerHub}. */
export interface LocalWorkerHubOptions {
  /** How long a canceled or timed-out worker may take to report (default 2000 ms). */
  graceMs?: number;
  /** Placements of one execution at most, counting retries after lost workers (default 3). */
  maxAttempts?: number;
  /** A queued execution whose backend has no live worker this long fails (default 5000 ms). */
  unavailableAfterMs?: number;
  /** An offer not claimed this long goes back to the queue (default 10000 ms). */
  claimTimeoutMs?: number;
  /** How often offers and orphaned executions are checked (default 200 ms). */
  sweepMs?: number;
  logger?: Logger;
}

interface Pending extends PendingExecution {
  plan: HubPlan;
  /** The session the current attempt is offered to (queued) or runs on (running). */
  session?: WorkerSession;
}

/** The in-memory dispatcher and worker port of embedded mode. */
export class LocalWorkerHub implements RemoteDispatcher, WorkerPort {
  readonly #registries = new Set<BackendRegistry>();
  readonly #sessions = new Map<string, WorkerSession>();
  /** Executions by id, in the order they were queued. */
  readonly #pending = new Map<string, Pending>();
  readonly #graceMs: number;
  readonly #maxAttempts: number;
  readonly #unavailableAfterMs: number;
  readonly #claimTimeoutMs: number;
  readonly #logger: Logger | undefined;
  readonly #sweepMs: number;
  /** Runs while executions are pending, not otherwise (an idle host sets no timer). */
  #sweep: NodeJS.Timeout | undefined;

  constructor(options: LocalWorkerHubOptions = {}) {
    this.#graceMs = options.graceMs ?? 2000;
    this.#maxAttempts = options.maxAttempts ?? 3;
    this.#unavailableAfterMs = options.unavailableAfterMs ?? 5000;
    this.#claimTimeoutMs = options.claimTimeoutMs ?? 10_000;
    this.#logger = options.logger;
    this.#sweepMs = options.sweepMs ?? 200;
  }

  #arm(): void {
    if (this.#pending.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    } else if (!this.#sweep) {
      this.#sweep = setInterval(() => this.#check(), this.#sweepMs);
      this.#sweep.unref();
    }
  }

  /** Make the live sessions known to a router's registry (until the returned function is called). */
  addRegistry(registry: BackendRegistry): () => void {
    this.#registries.add(registry);
    for (const session of this.#sessions.values()) {
      try {
        registry.announce(session.announcement);
      } catch (error) {
        this.#logger?.warn("a router refused a connected worker", { error: String(error) });
      }
    }
    return () => this.#registries.delete(registry);
  }

  // ------------------------------------------------------------ worker port

  attach(session: WorkerSession): void {
    const done: BackendRegistry[] = [];
    try {
      for (const registry of this.#registries) {
        registry.announce(session.announcement);
        done.push(registry);
      }
    } catch (error) {
      for (const registry of done) registry.remove(session.workerId);
      throw error;
    }
    this.#sessions.set(session.workerId, session);
    this.#pump();
  }

  beat(session: WorkerSession): void {
    for (const registry of this.#registries) {
      if (!registry.heartbeat(session.workerId, session.announcement.inFlight)) {
        registry.announce(session.announcement);
      }
    }
  }

  detach(session: WorkerSession, how: SessionEnd): void {
    if (this.#sessions.get(session.workerId) === session) this.#sessions.delete(session.workerId);
    for (const registry of this.#registries) {
      if (registry.worker(session.workerId)?.workerId) registry.remove(session.workerId);
    }
    this.#logger?.info("gRPC worker session ended", {
      worker_id: session.workerId,
      backend: session.backendId,
      how,
      running: session.running.size,
    });
    for (const pending of [...this.#pending.values()]) {
      if (pending.session !== session || pending.state === "done") continue;
      if (pending.state === "queued") {
        // Offered, never claimed: another worker may take it.
        this.#requeue(pending);
        continue;
      }
      const decision = afterLostWorker(pending, session, this.#maxAttempts, this.#logger);
      if (!decision.retry) {
        this.#finish(pending, { result: decision.result });
        continue;
      }
      pending.attempt++;
      this.#requeue(pending);
    }
    this.#pump();
  }

  async claim(
    session: WorkerSession,
    work: WorkAttempt,
    negotiation: ExecutionNegotiation,
  ): Promise<{ granted: boolean; reason: string }> {
    const pending = this.#pending.get(work.executionId);
    if (session.offered.get(work.executionId) === work.attempt) {
      session.offered.delete(work.executionId);
    }
    if (
      pending?.state !== "queued" ||
      pending.attempt !== work.attempt ||
      pending.session !== session
    ) {
      return { granted: false, reason: "the execution is not waiting for this attempt" };
    }
    if (!negotiation.supported) {
      this.#finish(pending, { refused: negotiation });
      this.#pump();
      return { granted: false, reason: "the worker cannot run it" };
    }
    pending.state = "running";
    pending.workerId = session.workerId;
    pending.orphanedSince = undefined;
    session.running.set(work.executionId, work.attempt);
    emitRouted(pending, session.workerId, negotiation);
    if (pending.plan.request.signal.aborted) this.#cancel(pending, "canceled by the caller");
    return { granted: true, reason: "" };
  }

  events(session: WorkerSession, work: WorkAttempt, events: ExecutionEvent[]): boolean {
    const pending = this.#current(session, work);
    if (!pending) return false;
    relayProgress(pending, events);
    return true;
  }

  async complete(
    session: WorkerSession,
    work: WorkAttempt,
    result: ExecutionResult,
    trailing: readonly ExecutionEvent[] = [],
  ): Promise<boolean> {
    const pending = this.#current(session, work);
    if (!pending) return false;
    relayProgress(pending, trailing);
    session.running.delete(work.executionId);
    this.#finish(pending, { result: resultAfterDeadline(pending, result) });
    this.#pump();
    return true;
  }

  async secrets(session: WorkerSession, work: WorkAttempt): Promise<VaultGrantInit[]> {
    const pending = this.#current(session, work);
    if (!pending) throw secretsRefused(session.workerId, "it is not running this attempt");
    if (!pending.plan.secrets) return [];
    try {
      return vaultGrantsToProto(await pending.plan.secrets());
    } catch (error) {
      this.#logger?.warn("reading vault secrets for a gRPC worker failed", {
        execution_id: work.executionId,
        error: String(error),
      });
      throw secretsRefused(session.workerId, `the vaults cannot be read now: ${String(error)}`);
    }
  }

  // ------------------------------------------------------------- dispatcher

  dispatch(plan: HubPlan): Promise<DispatchOutcome> {
    return new Promise<DispatchOutcome>((resolve) => {
      const pending: Pending = queuedExecution(plan, resolve, () =>
        this.#cancel(pending, "canceled by the caller"),
      );
      this.#pending.set(plan.executionId, pending);
      this.#arm();
      if (!watchDeadlineAndCancel(pending, () => this.#timeout(pending))) {
        this.#finish(pending, { result: cancelledResult() });
        return;
      }
      this.#pump();
    });
  }

  /** Executions waiting or running now. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Stop: waiting executions fail (retryably). */
  close(): void {
    clearInterval(this.#sweep);
    this.#sweep = undefined;
    for (const pending of [...this.#pending.values()]) {
      this.#notifyCancel(pending, "the router is shutting down");
      this.#finish(pending, {
        result: routerFailure("backend_unavailable", "the router shut down mid-execution", true),
      });
    }
  }

  #current(session: WorkerSession, work: WorkAttempt): Pending | undefined {
    const pending = this.#pending.get(work.executionId);
    if (!holdsAttempt(pending, work.attempt, session.workerId) || pending?.session !== session) {
      return undefined;
    }
    return pending;
  }

  #requeue(pending: Pending): void {
    pending.session?.offered.delete(pending.plan.executionId);
    pending.session?.running.delete(pending.plan.executionId);
    pending.state = "queued";
    pending.session = undefined;
    pending.workerId = undefined;
    pending.offeredAt = undefined;
  }

  /** Offer queued executions to free sessions of their backend, oldest first. */
  #pump(): void {
    for (const pending of this.#pending.values()) {
      if (pending.state !== "queued" || pending.session) continue;
      const backendId = pending.plan.view.backendId;
      let best: WorkerSession | undefined;
      for (const session of this.#sessions.values()) {
        if (session.backendId !== backendId || !session.free) continue;
        if (!best || session.load < best.load) best = session;
      }
      if (!best) continue;
      pending.session = best;
      pending.offeredAt = Date.now();
      best.offer(
        { executionId: pending.plan.executionId, attempt: pending.attempt },
        requestToProto(pending.plan.request),
        pending.deadline,
      );
    }
  }

  #check(): void {
    const now = Date.now();
    for (const pending of this.#pending.values()) {
      if (pending.state !== "queued") continue;
      if (
        pending.session &&
        pending.offeredAt !== undefined &&
        now - pending.offeredAt > this.#claimTimeoutMs
      ) {
        this.#logger?.warn("an offer was not claimed in time; offering it again", {
          execution_id: pending.plan.executionId,
          worker_id: pending.session.workerId,
        });
        this.#requeue(pending);
      }
      const backendId = pending.plan.view.backendId;
      const live = [...this.#sessions.values()].some((s) => s.backendId === backendId);
      if (live) {
        pending.orphanedSince = undefined;
        continue;
      }
      const failure = unavailableBackend(pending, backendId, now, this.#unavailableAfterMs);
      if (failure) this.#finish(pending, { result: failure });
    }
    this.#pump();
  }

  #timeout(pending: Pending): void {
    if (pending.state === "done") return;
    const limitMs = pending.limitMs ?? 0;
    pending.timedOut = true;
    if (pending.state === "running") {
      // A gRPC worker need not watch the deadline itself: tell it now, and
      // end the execution if it does not report within the grace.
      this.#notifyCancel(pending, "maxElapsedMs exceeded");
      pending.timers.push(
        setTimeout(() => this.#finish(pending, { result: timeoutResult(limitMs) }), this.#graceMs),
      );
      return;
    }
    this.#finish(pending, { result: timeoutResult(limitMs) });
  }

  #cancel(pending: Pending, reason: string): void {
    if (pending.state === "done") return;
    if (pending.state === "running") {
      this.#notifyCancel(pending, reason);
      pending.timers.push(
        setTimeout(() => this.#finish(pending, { result: cancelledResult() }), this.#graceMs),
      );
      return;
    }
    this.#finish(pending, { result: cancelledResult() });
  }

  #notifyCancel(pending: Pending, reason: string): void {
    if (pending.state !== "running" || !pending.session) return;
    pending.session.cancel(
      { executionId: pending.plan.executionId, attempt: pending.attempt },
      reason,
    );
  }

  #finish(pending: Pending, outcome: DispatchOutcome): void {
    if (pending.state === "done") return;
    pending.state = "done";
    stopWatching(pending);
    pending.session?.offered.delete(pending.plan.executionId);
    pending.session?.running.delete(pending.plan.executionId);
    this.#pending.delete(pending.plan.executionId);
    this.#arm();
    pending.resolve(outcome);
  }
}

/** A worker's progress goes to the plan; the result and `routed` are the router's to emit. */
function relayProgress(pending: Pending, events: readonly ExecutionEvent[]): void {
  for (const event of events) {
    if (event.kind === "turn_finished" || event.kind === "routed") continue;
    pending.plan.emit(event);
  }
}

const hubs = new WeakMap<object, LocalWorkerHub>();

/**
 * The one hub of an embedded host, found by an object every service of that
 * host shares (its `ServiceContext.signals`): the tasks service places turns
 * on the gRPC workers that connected to the adapters service.
 */
export function embeddedWorkerHub(
  host: object,
  options: LocalWorkerHubOptions = {},
): LocalWorkerHub {
  let hub = hubs.get(host);
  if (!hub) {
    hub = new LocalWorkerHub(options);
    hubs.set(host, hub);
  }
  return hub;
}
