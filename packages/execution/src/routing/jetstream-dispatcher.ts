/**
 * Remote dispatch over NATS (distributed mode): the router's half of the
 * worker protocol (proto/trellis/adapters/v1/worker.proto; the worker's half
 * is @trellis/adapter-sdk `runWorker`).
 *
 * - Heartbeats of every worker feed the {@link BackendRegistry}; at start the
 *   router asks every worker to beat at once (`discover`).
 * - An execution is a WorkItem on its backend's JetStream work queue. The
 *   worker that pulls it claims it from this router; the router grants one
 *   claim per attempt, so a stale copy never runs.
 * - Workers that announce `direct_offers` (the gRPC worker sessions of the
 *   adapters service) get their WorkItems from the router directly, one
 *   worker chosen per attempt (least loaded as this router knows it), over
 *   core NATS: no stream, no pull, no ack. Only the worker it was offered
 *   to may claim it; an offer not claimed in `claimTimeoutMs`, given back
 *   (`released`) or left on a lost worker is placed again (same attempt:
 *   it never ran). A backend with queue workers too is placed directly only
 *   while a direct worker has room; an item queued for workers that are all
 *   gone since is placed on a direct worker.
 * - A worker that stops heart-beating mid-execution: the execution is queued
 *   again (attempt + 1) when the agent is safe to retry, else it fails with
 *   `worker_lost`. A queued execution whose backend has no live worker for
 *   `unavailableAfterMs` fails with `backend_unavailable` (retryable).
 * - `maxElapsedMs` and caller cancels reach the worker as a CancelNotice;
 *   the router itself gives up after the grace period. Nothing waits forever.
 */
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type JetStreamClient, jetstream, jetstreamManager } from "@nats-io/jetstream";
import {
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  headers as natsHeaders,
  type Subscription,
} from "@nats-io/transport-node";
import {
  ensureWorkStream,
  eventFromProto,
  negotiationFromProto,
  requestToProto,
  timeoutResult,
  vaultGrantsToProto,
  type WireNames,
  wireNames,
} from "@trellis/adapter-sdk";
import {
  CancelNoticeSchema,
  ClaimRequestSchema,
  ClaimResponseSchema,
  type ExecutionEvent as PbExecutionEvent,
  SecretsRequestSchema,
  SecretsResponseSchema,
  WorkerRegistrationSchema,
  WorkerReportSchema,
  WorkItemSchema,
} from "@trellis/contracts/adapters";
import {
  type HeaderRecord,
  IdleBackoff,
  injectTraceHeaders,
  type Logger,
  type SecretFingerprints,
} from "@trellis/runtime";
import { announcementFromProto } from "./announcement.js";
import {
  dispatcherSettings,
  type JetStreamDispatcherOptions,
  type VaultAccessLoader,
  withFingerprints,
} from "./dispatcher-options.js";
import { afterLostWorker, holdsAttempt, routerFailure, unavailableBackend } from "./lease.js";
import {
  cancelledResult,
  emitRouted,
  type PendingExecution,
  queuedExecution,
  resultAfterDeadline,
  stopWatching,
  watchDeadlineAndCancel,
} from "./pending-execution.js";
import type { BackendRegistry, WorkerEntry } from "./registry.js";
import type { DispatchOutcome, DispatchPlan, RemoteDispatcher } from "./router.js";

function traceHeaders(record: HeaderRecord): MsgHdrs | undefined {
  const entries = Object.entries(record);
  if (entries.length === 0) return undefined;
  const h = natsHeaders();
  for (const [key, value] of entries) if (typeof value === "string") h.set(key, value);
  return h;
}

interface Pending extends PendingExecution {
  /** Queued: the direct worker it is offered to (absent: on the work queue). */
  offeredTo?: string;
  /** Queued, waiting for the next check to be placed again. */
  unplaced?: boolean;
  /** Trace headers (`traceparent`) of the dispatch: every attempt's work item carries them. */
  trace: HeaderRecord;
}

const empty = new Uint8Array();

/** What the inbox handlers read of a message (a NATS one, or one delivered in process). */
type InboxMsg = Pick<Msg, "subject" | "data" | "respond">;

/** The JetStream {@link RemoteDispatcher}. */
export class JetStreamDispatcher implements RemoteDispatcher {
  readonly routerId: string;
  readonly names: WireNames;
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #registry: BackendRegistry;
  readonly #graceMs: number;
  readonly #maxAttempts: number;
  readonly #unavailableAfterMs: number;
  readonly #claimTimeoutMs: number;
  readonly #logger: Logger | undefined;
  readonly #pending = new Map<string, Pending>();
  readonly #subscriptions: Subscription[] = [];
  readonly #sweep: IdleBackoff;
  readonly #stopSweep = new AbortController();
  readonly #inbox: string;
  readonly #unlisten: () => void;
  readonly #storage: "file" | "memory" | undefined;
  readonly #vaultAccess: VaultAccessLoader | undefined;
  readonly #fingerprints: SecretFingerprints | undefined;
  /** Sessions of this process offered to without NATS, by worker id (see {@link attachLocal}). */
  readonly #local = new Map<string, (item: Uint8Array) => void>();
  #stream: Promise<void> | undefined;
  #closed = false;

  private constructor(options: JetStreamDispatcherOptions, names: WireNames) {
    this.#nc = options.connection;
    this.#js = jetstream(options.connection);
    this.#registry = options.registry;
    this.names = names;
    const settings = dispatcherSettings(options);
    this.routerId = settings.routerId;
    this.#inbox = names.routerInbox(this.routerId);
    this.#graceMs = settings.graceMs;
    this.#maxAttempts = settings.maxAttempts;
    this.#unavailableAfterMs = settings.unavailableAfterMs;
    this.#claimTimeoutMs = settings.claimTimeoutMs;
    this.#logger = options.logger;
    this.#storage = options.storage;
    this.#vaultAccess = options.vaultAccess;
    this.#fingerprints = options.fingerprints;
    this.#unlisten = this.#registry.onWorkerLost((worker) => this.#workerLost(worker));
    const { sweepMs } = settings;
    this.#sweep = new IdleBackoff({ baseMs: sweepMs, maxMs: sweepMs * 8, unref: true });
    void this.#sweepLoop();
  }

  /**
   * Listen to heartbeats and this router's inbox. The work stream is created
   * with the first dispatch (or by the first worker): a process that never
   * places remote work leaves nothing behind on the server.
   */
  static async open(options: JetStreamDispatcherOptions): Promise<JetStreamDispatcher> {
    const names = wireNames(options.prefix);
    const dispatcher = new JetStreamDispatcher(options, names);
    dispatcher.#listen();
    // Workers answer with a heartbeat: a router that starts late learns them at once.
    options.connection.publish(names.discover, empty);
    await options.connection.flush();
    return dispatcher;
  }

  #listen(): void {
    const nc = this.#nc;
    this.#subscriptions.push(
      nc.subscribe(this.names.allHeartbeats, {
        callback: (_err, msg) => this.#heartbeat(msg),
      }),
      nc.subscribe(`${this.#inbox}.*`, { callback: (_err, msg) => this.#inboxMessage(msg) }),
    );
  }

  /** A worker's message to this router's inbox (over NATS or from a session of this process). */
  #inboxMessage(msg: InboxMsg): void {
    const kind = msg.subject.slice(this.#inbox.length + 1);
    try {
      if (kind === "claim") this.#claim(msg);
      else if (kind === "event") this.#event(msg);
      else if (kind === "result") this.#result(msg);
      else if (kind === "secrets") this.#secrets(msg);
    } catch (error) {
      this.#logger?.warn("ignoring an unreadable worker message", {
        subject: msg.subject,
        error: String(error),
      });
    }
  }

  /**
   * Offers of this router for `workerId` go to `sink` in this process, not
   * over NATS (a gRPC worker session held by this process); the returned
   * function ends that. Routers of other processes still reach the session
   * over NATS.
   */
  attachLocal(workerId: string, sink: (item: Uint8Array) => void): () => void {
    this.#local.set(workerId, sink);
    return () => {
      if (this.#local.get(workerId) === sink) this.#local.delete(workerId);
    };
  }

  /**
   * A message of a session of this process for `subject`: delivered to this
   * router (in a microtask, as NATS would, never re-entrantly) when it is
   * this router's inbox and the router is open; false: send it over NATS.
   * `respond` gets the answer of a request (claim, result, secrets).
   */
  deliverLocal(subject: string, data: Uint8Array, respond?: (answer: Uint8Array) => void): boolean {
    if (this.#closed || !subject.startsWith(this.#inbox) || subject[this.#inbox.length] !== ".") {
      return false;
    }
    const msg: InboxMsg = {
      subject,
      data,
      respond: (answer: Uint8Array) => {
        respond?.(answer);
        return true;
      },
    };
    queueMicrotask(() => this.#inboxMessage(msg));
    return true;
  }

  #heartbeat(msg: Msg): void {
    try {
      const announcement = announcementFromProto(fromBinary(WorkerRegistrationSchema, msg.data));
      this.#registry.announce(announcement);
    } catch (error) {
      this.#logger?.warn("ignoring an invalid worker announcement", { error: String(error) });
    }
  }

  dispatch(plan: DispatchPlan): Promise<DispatchOutcome> {
    if (this.#closed) {
      return Promise.resolve({
        result: routerFailure("backend_unavailable", "the router is shutting down", true),
      });
    }
    return new Promise<DispatchOutcome>((resolve, reject) => {
      const pending: Pending = {
        ...queuedExecution(plan, resolve, () => this.#cancel(pending, "canceled by the caller")),
        trace: injectTraceHeaders({}),
      };
      this.#pending.set(plan.executionId, pending);
      this.#sweep.reset();
      if (!watchDeadlineAndCancel(pending, () => this.#timeout(pending))) {
        this.#finish(pending, { result: cancelledResult() });
        return;
      }
      this.#place(pending).catch((error: unknown) => {
        this.#pending.delete(plan.executionId);
        stopWatching(pending);
        pending.state = "done";
        reject(error);
      });
    });
  }

  #ensureStream(): Promise<void> {
    this.#stream ??= jetstreamManager(this.#nc)
      .then((jsm) =>
        ensureWorkStream(jsm, this.names, this.#storage ? { storage: this.#storage } : {}),
      )
      .catch((error: unknown) => {
        this.#stream = undefined;
        throw error;
      });
    return this.#stream;
  }

  #item(pending: Pending): Uint8Array {
    const { plan } = pending;
    const item = create(WorkItemSchema, {
      executionId: plan.executionId,
      attempt: pending.attempt,
      request: requestToProto(plan.request),
      replyTo: this.#inbox,
      ...(pending.deadline !== undefined ? { deadline: timestampFromMs(pending.deadline) } : {}),
    });
    return toBinary(WorkItemSchema, item);
  }

  /** Place a queued attempt: on a direct worker when one fits, else on the work queue. */
  async #place(pending: Pending, avoid?: string): Promise<void> {
    pending.offeredTo = undefined;
    pending.offeredAt = undefined;
    pending.unplaced = false;
    const target = this.#directTarget(pending.plan.view.backendId, avoid);
    if (target) {
      this.#offer(pending, target);
      return;
    }
    await this.#enqueue(pending);
  }

  /** Place again, later when the choice would be the worker that gave it back. */
  #replace(pending: Pending, avoid?: string): void {
    if (pending.state !== "queued") return;
    if (
      avoid !== undefined &&
      this.#directTarget(pending.plan.view.backendId, avoid)?.workerId === avoid
    ) {
      // Only that worker can take it: offer it again at the next check, not at once.
      pending.offeredTo = undefined;
      pending.unplaced = true;
      this.#sweep.reset();
      return;
    }
    this.#place(pending, avoid).catch((error: unknown) =>
      this.#finish(pending, {
        result: routerFailure(
          "backend_unavailable",
          `placing the execution again failed: ${String(error)}`,
          true,
        ),
      }),
    );
  }

  /**
   * The direct worker to offer `backendId`'s next attempt to, least loaded
   * first (its heartbeat's count or this router's own placements on it,
   * whichever is higher), `avoid` only when no other direct worker is
   * live; undefined: the work queue (no direct worker, or queue workers
   * too and every direct one is full).
   */
  #directTarget(backendId: string, avoid?: string): WorkerEntry | undefined {
    const view = this.#registry.backend(backendId);
    if (!view?.workers.some((w) => w.direct)) return undefined;
    const placed = new Map<string, number>();
    for (const p of this.#pending.values()) {
      const on = p.state === "running" ? p.workerId : p.offeredTo;
      if (on !== undefined) placed.set(on, (placed.get(on) ?? 0) + 1);
    }
    let best: WorkerEntry | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    let queueWorkers = false;
    for (const w of view.workers) {
      if (!w.direct) {
        queueWorkers = true;
        continue;
      }
      const load =
        Math.max(w.inFlight, placed.get(w.workerId) ?? 0) / w.capacity +
        (w.workerId === avoid ? Number.MAX_SAFE_INTEGER : 0);
      if (load < bestLoad) {
        best = w;
        bestLoad = load;
      }
    }
    if (queueWorkers && bestLoad >= 1) return undefined;
    return best;
  }

  #offer(pending: Pending, worker: WorkerEntry): void {
    pending.offeredTo = worker.workerId;
    pending.offeredAt = Date.now();
    const local = this.#local.get(worker.workerId);
    if (local) {
      const item = this.#item(pending);
      queueMicrotask(() => local(item));
      return;
    }
    const headers = traceHeaders(pending.trace);
    this.#nc.publish(
      this.names.offer(worker.workerId),
      this.#item(pending),
      headers ? { headers } : undefined,
    );
  }

  async #enqueue(pending: Pending): Promise<void> {
    await this.#ensureStream();
    const { plan } = pending;
    try {
      await this.#js.publish(this.names.work(plan.view.backendId), this.#item(pending), {
        msgID: `${plan.executionId}.${pending.attempt}`,
        headers: traceHeaders(pending.trace),
      });
    } catch (error) {
      // The stream may have been removed behind our back: make sure of it next time.
      this.#stream = undefined;
      throw error;
    }
  }

  #claim(msg: InboxMsg): void {
    const claim = fromBinary(ClaimRequestSchema, msg.data);
    const pending = this.#pending.get(claim.executionId);
    const answer = (granted: boolean, reason = "") =>
      msg.respond(toBinary(ClaimResponseSchema, create(ClaimResponseSchema, { granted, reason })));
    if (pending?.state !== "queued" || pending.attempt !== claim.attempt) {
      answer(false, "the execution is not waiting for this attempt");
      return;
    }
    if (pending.offeredTo !== undefined && pending.offeredTo !== claim.workerId) {
      answer(false, "the attempt is offered to another worker");
      return;
    }
    let negotiation: ReturnType<typeof negotiationFromProto>;
    try {
      negotiation = negotiationFromProto(claim.negotiation, "claim.negotiation");
    } catch (error) {
      answer(false, `unreadable negotiation: ${String(error)}`);
      return;
    }
    if (!negotiation.supported) {
      answer(false, "the worker cannot run it");
      this.#finish(pending, { refused: negotiation });
      return;
    }
    pending.state = "running";
    pending.workerId = claim.workerId;
    pending.orphanedSince = undefined;
    pending.unplaced = false;
    emitRouted(pending, claim.workerId, negotiation);
    answer(true);
  }

  #event(msg: InboxMsg): void {
    const report = fromBinary(WorkerReportSchema, msg.data);
    if (report.body.case === "released") {
      this.#released(
        report.executionId,
        report.attempt,
        report.workerId,
        report.body.value.unclaimed,
      );
      return;
    }
    const pending = this.#current(report.executionId, report.attempt, report.workerId);
    if (!pending) return;
    this.#progress(pending, report.before);
    if (report.body.case !== "event") return;
    const event = eventFromProto(report.body.value, "report.event");
    if (event.kind === "turn_finished" || event.kind === "routed") return;
    pending.plan.emit(event);
  }

  /** A report's batched progress (`before`), in order. */
  #progress(pending: Pending, events: readonly PbExecutionEvent[]): void {
    for (let i = 0; i < events.length; i++) {
      const event = eventFromProto(events[i] as PbExecutionEvent, `report.before[${i}]`);
      if (event.kind === "turn_finished" || event.kind === "routed") continue;
      pending.plan.emit(event);
    }
  }

  /**
   * A worker gives back an attempt it claimed but never started (the grant
   * was lost), or a direct offer it will not take: a queued item comes back
   * from the queue by itself, a direct one is placed again. An `unclaimed`
   * release never touches a running attempt (two sessions may share a
   * worker id for a moment, e.g. one reconnecting through another adapters
   * replica: the one that did not claim must not undo the other's claim).
   */
  #released(executionId: string, attempt: number, workerId: string, unclaimed: boolean): void {
    const pending = this.#pending.get(executionId);
    if (!pending || pending.attempt !== attempt) return;
    const held = !unclaimed && holdsAttempt(pending, attempt, workerId);
    const offered = pending.state === "queued" && pending.offeredTo === workerId;
    if (!held && !offered) return;
    const direct = pending.offeredTo !== undefined;
    pending.state = "queued";
    pending.workerId = undefined;
    if (direct) this.#replace(pending, workerId);
  }

  /**
   * A worker's request for the vault secrets of the execution it runs:
   * answered only to the worker holding the current attempt's claim.
   */
  #secrets(msg: InboxMsg): void {
    const answer = (init: MessageInitShape<typeof SecretsResponseSchema>) =>
      msg.respond(toBinary(SecretsResponseSchema, create(SecretsResponseSchema, init)));
    const request = fromBinary(SecretsRequestSchema, msg.data);
    const pending = this.#current(request.executionId, request.attempt, request.workerId);
    if (!pending) {
      answer({ error: "the worker is not running this execution" });
      return;
    }
    const { workspaceId, agent } = pending.plan.request;
    if (!this.#vaultAccess) {
      answer({});
      return;
    }
    this.#vaultAccess(workspaceId, agent.id).then(
      (vaults) =>
        answer({ vaults: vaultGrantsToProto(withFingerprints(vaults, this.#fingerprints)) }),
      (error: unknown) => {
        this.#logger?.warn("reading vault secrets for a worker failed", {
          execution_id: request.executionId,
          error: String(error),
        });
        answer({ error: `the vaults cannot be read now: ${String(error)}` });
      },
    );
  }

  #result(msg: InboxMsg): void {
    // Always acknowledge, so the worker stops retrying even a stale result.
    msg.respond(empty);
    const report = fromBinary(WorkerReportSchema, msg.data);
    const pending = this.#current(report.executionId, report.attempt, report.workerId);
    if (!pending || report.body.case !== "event") return;
    const event = eventFromProto(report.body.value, "report.event");
    if (event.kind !== "turn_finished") return;
    this.#progress(pending, report.before);
    this.#finish(pending, { result: resultAfterDeadline(pending, event.result) });
  }

  #current(executionId: string, attempt: number, workerId: string): Pending | undefined {
    const pending = this.#pending.get(executionId);
    return holdsAttempt(pending, attempt, workerId) ? pending : undefined;
  }

  #workerLost(worker: WorkerEntry): void {
    for (const pending of [...this.#pending.values()]) {
      if (pending.state === "queued" && pending.offeredTo === worker.workerId) {
        // Offered, never claimed: it did not run, so it goes elsewhere as it is.
        this.#replace(pending);
        continue;
      }
      if (pending.state !== "running" || pending.workerId !== worker.workerId) continue;
      const decision = afterLostWorker(pending, worker, this.#maxAttempts, this.#logger);
      if (!decision.retry) {
        this.#finish(pending, { result: decision.result });
        continue;
      }
      pending.attempt++;
      pending.state = "queued";
      pending.workerId = undefined;
      this.#place(pending).catch((error: unknown) =>
        this.#finish(pending, {
          result: routerFailure(
            "backend_unavailable",
            `re-queuing after a lost worker failed: ${String(error)}`,
            true,
          ),
        }),
      );
    }
  }

  async #sweepLoop(): Promise<void> {
    const stop = this.#stopSweep.signal;
    while (!stop.aborted) {
      await this.#sweep.wait(stop);
      if (stop.aborted) return;
      this.#check();
      if (this.#pending.size > 0) this.#sweep.reset();
      else this.#sweep.idle();
    }
  }

  /**
   * Periodic: drop dead workers; place again direct offers nobody claimed
   * and queued items only direct workers are left to take; fail queued work
   * nobody can take.
   */
  #check(): void {
    this.#registry.sweep();
    const now = Date.now();
    for (const pending of [...this.#pending.values()]) {
      if (pending.state !== "queued") continue;
      const backendId = pending.plan.view.backendId;
      const view = this.#registry.backend(backendId);
      if (view) {
        pending.orphanedSince = undefined;
        const { offeredTo, offeredAt } = pending;
        if (pending.unplaced) {
          this.#replace(pending);
        } else if (offeredTo !== undefined && now - (offeredAt ?? now) > this.#claimTimeoutMs) {
          this.#logger?.warn("a direct offer was not claimed in time; placing it again", {
            execution_id: pending.plan.executionId,
            worker_id: offeredTo,
          });
          this.#replace(pending, offeredTo);
        } else if (offeredTo === undefined && view.workers.every((w) => w.direct)) {
          // Queued for workers that are gone: the queue has no taker left.
          this.#replace(pending);
        }
        continue;
      }
      const failure = unavailableBackend(pending, backendId, now, this.#unavailableAfterMs);
      if (failure) this.#finish(pending, { result: failure });
    }
  }

  #timeout(pending: Pending): void {
    if (pending.state === "done") return;
    const limitMs = pending.limitMs ?? 0;
    pending.timedOut = true;
    if (pending.state === "running" && pending.workerId) {
      // The worker stops it at the same deadline and reports the timeout;
      // only when it does not within the grace does the router end it.
      pending.timers.push(
        setTimeout(() => {
          this.#notifyCancel(pending, "maxElapsedMs exceeded");
          this.#finish(pending, { result: timeoutResult(limitMs) });
        }, this.#graceMs),
      );
      return;
    }
    this.#finish(pending, { result: timeoutResult(limitMs) });
  }

  #cancel(pending: Pending, reason: string): void {
    if (pending.state === "done") return;
    if (pending.state === "running" && pending.workerId) {
      this.#notifyCancel(pending, reason);
      pending.timers.push(
        setTimeout(() => this.#finish(pending, { result: cancelledResult() }), this.#graceMs),
      );
      return;
    }
    this.#finish(pending, { result: cancelledResult() });
  }

  #notifyCancel(pending: Pending, reason: string): void {
    if (!pending.workerId || this.#nc.isClosed()) return;
    this.#nc.publish(
      this.names.cancel(pending.workerId),
      toBinary(
        CancelNoticeSchema,
        create(CancelNoticeSchema, { executionId: pending.plan.executionId, reason }),
      ),
    );
  }

  #finish(pending: Pending, outcome: DispatchOutcome): void {
    if (pending.state === "done") return;
    pending.state = "done";
    stopWatching(pending);
    this.#pending.delete(pending.plan.executionId);
    pending.resolve(outcome);
  }

  /** Executions waiting or running now. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Stop: waiting executions fail (retryably); the connection is left to its owner. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopSweep.abort();
    this.#unlisten();
    for (const pending of [...this.#pending.values()]) {
      this.#notifyCancel(pending, "the router is shutting down");
      this.#finish(pending, {
        result: routerFailure("backend_unavailable", "the router shut down mid-execution", true),
      });
    }
    for (const sub of this.#subscriptions) sub.unsubscribe();
    this.#local.clear();
  }
}
