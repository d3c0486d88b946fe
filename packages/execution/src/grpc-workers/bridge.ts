/**
 * A mesh's gRPC workers: each session becomes a worker of the mesh
 * (proto/trellis/adapters/v1/worker.proto) that routers place work on
 * directly — the process holding the session relays (in a mesh the tasks
 * service, to which the gateway forwards WorkerService; the adapters
 * service for workers that reach it directly), without the JetStream work
 * queue — with the same claims, fences, leases and retries as a JetStream
 * worker:
 *
 * - the worker's `WorkerHeartbeat` becomes its NATS heartbeat, announced
 *   with `direct_offers` (nothing is beaten for it otherwise: a dead
 *   worker's lease runs out at every router after three missed beats, and
 *   its executions are retried or fail `worker_lost` there);
 * - a router publishes a WorkItem for this session to its offer subject
 *   (core NATS); the item is offered to the worker while it has a free
 *   slot (else it waits in the session's backlog, at most
 *   {@link MAX_BACKLOG}), its `ClaimWork` (with its own negotiation) is
 *   forwarded to the router that placed the item, and the router's answer
 *   is the worker's;
 * - an offer the worker does not claim in time, or that a session ends
 *   with, is given back (`released`) and the router places it again;
 * - `ReportWorkEvents` / `CompleteWork` go to that router's inbox; the
 *   router's cancel notices become `cancel` commands.
 *
 * With `local` (a router in this process), that router's offers, and this
 * session's claims, reports and results for it, pass in process — the same
 * messages, encoded the same, through the same handlers, without the NATS
 * round trips; every other router reaches the session over NATS as above.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import {
  createInbox,
  type NatsConnection,
  errors as natsErrors,
  type Subscription,
} from "@nats-io/transport-node";
import {
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionResult,
  eventToProto,
  isNoResponders,
  negotiationToProto,
  type WireNames,
} from "@trellis/adapter-sdk";
import {
  CancelNoticeSchema,
  ClaimRequestSchema,
  ClaimResponseSchema,
  SecretsRequestSchema,
  SecretsResponseSchema,
  WorkerRegistrationSchema,
  WorkerReportSchema,
  type WorkItem,
  WorkItemSchema,
} from "@trellis/contracts/adapters";
import { type Logger, TrellisError } from "@trellis/runtime";
import { announcementToProto } from "../routing/announcement.js";
import {
  type SessionEnd,
  secretsRefused,
  type VaultGrantInit,
  type WorkAttempt,
  type WorkerPort,
  type WorkerSession,
} from "./session.js";

/** Options of {@link NatsWorkerBridge}. */
export interface NatsWorkerBridgeOptions {
  /** The service's NATS connection and wire names, once it is connected. */
  nats(): { connection: NatsConnection; names: WireNames } | undefined;
  /** An offer not claimed this long goes back to the queue (default 10000 ms). */
  claimTimeoutMs?: number;
  /** How long the router may take to answer a claim (default 2000 ms). */
  routerTimeoutMs?: number;
  /** The router of this process, once it is open, to exchange its messages with in process. */
  local?(): LocalRouter | undefined;
  logger?: Logger;
}

/** A router in the bridge's process (JetStreamDispatcher's `attachLocal` / `deliverLocal`). */
export interface LocalRouter {
  /** Its offers for `workerId` go to `sink`; returns the function that ends that. */
  attachLocal(workerId: string, sink: (item: Uint8Array) => void): () => void;
  /** Delivers a message to it when `subject` is its inbox; false: not its (send over NATS). */
  deliverLocal(subject: string, data: Uint8Array, respond?: (answer: Uint8Array) => void): boolean;
}

/** What the bridge reads of a router's answer. */
interface Answer {
  data: Uint8Array;
}

interface ClaimAnswer {
  granted: boolean;
  reason: string;
}

interface Held {
  item: WorkItem;
  /** When it was offered to the worker (epoch ms). */
  offeredAt: number;
  /** The worker has not claimed it yet (nor did the offer end). */
  unclaimed: boolean;
  /** Resolved with the worker's negotiation (or undefined: no claim came). */
  claimed(negotiation: ExecutionNegotiation | undefined): void;
  /** The router's answer to the worker's claim, once it claimed. */
  answer?: Promise<ClaimAnswer>;
  resolveAnswer?: (answer: ClaimAnswer) => void;
  granted: boolean;
  /** Resolved when the attempt is over for this session. */
  finished(): void;
}

interface Bridged {
  session: WorkerSession;
  held: Map<string, Held>;
  /** Items placed on it while every slot was taken, oldest first. */
  backlog: WorkItem[];
  subscriptions: Subscription[];
  /** Ends the in-process offers of the local router, if any. */
  detachLocal?: () => void;
}

/** A request of the bridge to a router, waiting for its reply. */
interface Ask {
  subject: string;
  deadline: number;
  resolve(answer: Answer): void;
  reject(error: Error): void;
}

/** Items one session may hold beyond its capacity; past it a router's offer is given back. */
export const MAX_BACKLOG = 1024;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The JetStream-backed {@link WorkerPort} of distributed mode. */
export class NatsWorkerBridge implements WorkerPort {
  readonly #options: NatsWorkerBridgeOptions;
  readonly #bridged = new Map<WorkerSession, Bridged>();
  readonly #claimTimeoutMs: number;
  readonly #routerTimeoutMs: number;
  /** Offers not claimed yet, over every session. */
  #unclaimed = 0;
  /** Checks claim deadlines while offers are unclaimed (one timer, not one per offer). */
  #sweep: NodeJS.Timeout | undefined;
  /** Requests to routers waiting for replies, by token (see {@link #request}). */
  readonly #asks = new Map<string, Ask>();
  #askSeq = 0;
  /** The replies' subscription, on the connection it was made on. */
  #replies: { connection: NatsConnection; inbox: string; sub: Subscription } | undefined;
  /** Times out requests while some wait (one timer, not one per request). */
  #askSweep: NodeJS.Timeout | undefined;

  constructor(options: NatsWorkerBridgeOptions) {
    this.#options = options;
    this.#claimTimeoutMs = options.claimTimeoutMs ?? 10_000;
    this.#routerTimeoutMs = options.routerTimeoutMs ?? 2000;
  }

  /** Arm or disarm the claim-deadline check with the count of unclaimed offers. */
  #arm(): void {
    if (this.#unclaimed === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    } else if (!this.#sweep) {
      const every = Math.min(1000, Math.max(20, Math.floor(this.#claimTimeoutMs / 4)));
      this.#sweep = setInterval(() => this.#expireOffers(), every);
      this.#sweep.unref();
    }
  }

  /** Offers not claimed within the claim timeout end (they are given back). */
  #expireOffers(): void {
    const now = Date.now();
    for (const bridged of this.#bridged.values()) {
      for (const held of bridged.held.values()) {
        if (held.unclaimed && now - held.offeredAt > this.#claimTimeoutMs) held.claimed(undefined);
      }
    }
  }

  /**
   * Request/reply to a router without nats.js's per-request machinery (a
   * timer, a mux entry and an Error built per request): one subscription
   * for every reply, one timer while requests wait. Rejects as
   * `connection.request` does: NoRespondersError when nobody listens,
   * TimeoutError past `timeoutMs`.
   */
  #request(
    connection: NatsConnection,
    subject: string,
    body: Uint8Array,
    timeoutMs: number,
  ): Promise<Answer> {
    if (this.#replies?.connection !== connection) {
      this.#replies?.sub.unsubscribe();
      const inbox = createInbox();
      const sub = connection.subscribe(`${inbox}.*`, {
        callback: (_err, msg) => {
          const token = msg.subject.slice(inbox.length + 1);
          const ask = this.#asks.get(token);
          if (!ask) return;
          this.#asks.delete(token);
          this.#armAsks();
          if (msg.data.length === 0 && msg.headers?.code === 503) {
            ask.reject(new natsErrors.NoRespondersError(ask.subject));
          } else {
            ask.resolve(msg);
          }
        },
      });
      this.#replies = { connection, inbox, sub };
    }
    const token = String(++this.#askSeq);
    const reply = `${this.#replies.inbox}.${token}`;
    return new Promise<Answer>((resolve, reject) => {
      this.#asks.set(token, { subject, deadline: Date.now() + timeoutMs, resolve, reject });
      this.#armAsks();
      try {
        const local = this.#options.local?.();
        const answered = (data: Uint8Array) => {
          const ask = this.#asks.get(token);
          if (!ask) return;
          this.#asks.delete(token);
          this.#armAsks();
          ask.resolve({ data });
        };
        if (local?.deliverLocal(subject, body, answered)) return;
        connection.publish(subject, body, { reply });
      } catch (error) {
        this.#asks.delete(token);
        this.#armAsks();
        reject(error as Error);
      }
    });
  }

  #armAsks(): void {
    if (this.#asks.size === 0) {
      clearInterval(this.#askSweep);
      this.#askSweep = undefined;
    } else if (!this.#askSweep) {
      const every = Math.min(250, Math.max(20, Math.floor(this.#routerTimeoutMs / 8)));
      this.#askSweep = setInterval(() => {
        const now = Date.now();
        for (const [token, ask] of this.#asks) {
          if (now < ask.deadline) continue;
          this.#asks.delete(token);
          ask.reject(new natsErrors.TimeoutError());
        }
        this.#armAsks();
      }, every);
      this.#askSweep.unref();
    }
  }

  #nats(): { connection: NatsConnection; names: WireNames } {
    const nats = this.#options.nats();
    if (!nats || nats.connection.isClosed()) {
      throw new TrellisError({
        reason: "service_unavailable",
        message: "the adapters service is not connected to NATS yet; retry",
      });
    }
    return nats;
  }

  #announce(session: WorkerSession, leaving: boolean): void {
    const nats = this.#options.nats();
    if (!nats || nats.connection.isClosed()) return;
    nats.connection.publish(
      nats.names.heartbeats(session.backendId),
      toBinary(
        WorkerRegistrationSchema,
        announcementToProto({
          ...session.announcement,
          inFlight: session.load,
          leaving,
          direct: true,
        }),
      ),
    );
  }

  attach(session: WorkerSession): void {
    const { connection, names } = this.#nats();
    const bridged: Bridged = { session, held: new Map(), backlog: [], subscriptions: [] };
    bridged.detachLocal = this.#options
      .local?.()
      ?.attachLocal(session.workerId, (data) => this.#placed(bridged, connection, data));
    bridged.subscriptions.push(
      connection.subscribe(names.discover, { callback: () => this.#announce(session, false) }),
      connection.subscribe(names.offer(session.workerId), {
        callback: (_err, msg) => this.#placed(bridged, connection, msg.data),
      }),
      connection.subscribe(names.cancel(session.workerId), {
        callback: (_err, msg) => {
          try {
            const notice = fromBinary(CancelNoticeSchema, msg.data);
            const held = bridged.held.get(notice.executionId);
            if (held?.granted) {
              session.cancel(
                { executionId: notice.executionId, attempt: held.item.attempt },
                notice.reason || "canceled by the router",
              );
            }
          } catch (error) {
            this.#options.logger?.warn("ignoring an unreadable cancel notice", {
              error: String(error),
            });
          }
        },
      }),
    );
    this.#bridged.set(session, bridged);
    this.#announce(session, false);
  }

  beat(session: WorkerSession): void {
    if (this.#bridged.has(session)) this.#announce(session, false);
  }

  detach(session: WorkerSession, how: SessionEnd): void {
    const bridged = this.#bridged.get(session);
    if (!bridged) return;
    this.#bridged.delete(session);
    // A worker that said goodbye leaves at once; a lost one simply stops
    // beating, and every router notices when its lease runs out.
    if (how === "left") this.#announce(session, true);
    for (const sub of bridged.subscriptions) sub.unsubscribe();
    bridged.detachLocal?.();
    for (const held of bridged.held.values()) {
      held.claimed(undefined);
      held.finished();
    }
    // Never offered: back to their routers, to be placed elsewhere.
    for (const item of bridged.backlog.splice(0)) this.#release(session, item, "the worker left");
    this.#options.logger?.info("gRPC worker session ended", {
      worker_id: session.workerId,
      backend: session.backendId,
      how,
    });
  }

  async claim(
    session: WorkerSession,
    work: WorkAttempt,
    negotiation: ExecutionNegotiation,
  ): Promise<{ granted: boolean; reason: string }> {
    const held = this.#bridged.get(session)?.held.get(work.executionId);
    if (!held || held.item.attempt !== work.attempt || held.answer) {
      return { granted: false, reason: "the attempt is not offered to this worker" };
    }
    held.answer = new Promise<ClaimAnswer>((resolve) => {
      held.resolveAnswer = resolve;
    });
    held.claimed(negotiation);
    return held.answer;
  }

  events(session: WorkerSession, work: WorkAttempt, events: ExecutionEvent[]): boolean {
    const held = this.#bridged.get(session)?.held.get(work.executionId);
    const nats = this.#options.nats();
    if (!held?.granted || held.item.attempt !== work.attempt || !nats) return false;
    // One message for the call's events, however many.
    if (events.length > 0) {
      this.#publish(
        nats.connection,
        `${held.item.replyTo}.event`,
        this.#report(session, held, undefined, events),
      );
    }
    return true;
  }

  async complete(
    session: WorkerSession,
    work: WorkAttempt,
    result: ExecutionResult,
    trailing: readonly ExecutionEvent[] = [],
  ): Promise<boolean> {
    const held = this.#bridged.get(session)?.held.get(work.executionId);
    if (!held?.granted || held.item.attempt !== work.attempt) return false;
    const { connection } = this.#nats();
    // The trailing progress rides on the result: one message (and its retries) for both.
    const body = this.#report(session, held, { kind: "turn_finished", result }, trailing);
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await this.#request(
            connection,
            `${held.item.replyTo}.result`,
            body,
            this.#routerTimeoutMs,
          );
          return true;
        } catch (error) {
          // The router that queued it is gone: nobody waits for this result.
          if (isNoResponders(error) || attempt >= 5) return false;
          await delay(100 * attempt);
        }
      }
    } finally {
      held.finished();
    }
  }

  async secrets(session: WorkerSession, work: WorkAttempt): Promise<VaultGrantInit[]> {
    const held = this.#bridged.get(session)?.held.get(work.executionId);
    if (!held?.granted || held.item.attempt !== work.attempt) {
      throw secretsRefused(session.workerId, "it is not running this attempt");
    }
    // The router that granted the claim answers, as it does a JetStream worker.
    const { connection } = this.#nats();
    let response: ReturnType<typeof fromBinary<typeof SecretsResponseSchema>>;
    try {
      const answer = await this.#request(
        connection,
        `${held.item.replyTo}.secrets`,
        toBinary(
          SecretsRequestSchema,
          create(SecretsRequestSchema, {
            executionId: held.item.executionId,
            attempt: held.item.attempt,
            workerId: session.workerId,
          }),
        ),
        this.#routerTimeoutMs,
      );
      response = fromBinary(SecretsResponseSchema, answer.data);
    } catch (error) {
      throw secretsRefused(session.workerId, `the router did not answer: ${String(error)}`);
    }
    if (response.error !== "") throw secretsRefused(session.workerId, response.error);
    return response.vaults;
  }

  /** A message without an answer to a router: in process to the local one, else over NATS. */
  #publish(connection: NatsConnection, subject: string, body: Uint8Array): void {
    if (!this.#options.local?.()?.deliverLocal(subject, body)) connection.publish(subject, body);
  }

  #report(
    session: WorkerSession,
    held: Held,
    event: ExecutionEvent | undefined,
    before: readonly ExecutionEvent[] = [],
  ): Uint8Array {
    return toBinary(
      WorkerReportSchema,
      create(WorkerReportSchema, {
        executionId: held.item.executionId,
        attempt: held.item.attempt,
        workerId: session.workerId,
        ...(event ? { body: { case: "event", value: eventToProto(event) } } : {}),
        before: before.map(eventToProto),
      }),
    );
  }

  /** A router placed an item on this session. */
  #placed(bridged: Bridged, connection: NatsConnection, data: Uint8Array): void {
    let item: WorkItem;
    try {
      item = fromBinary(WorkItemSchema, data);
    } catch (error) {
      this.#options.logger?.warn("ignoring an unreadable work item", { error: String(error) });
      return;
    }
    const { session } = bridged;
    if (item.replyTo === "" || !item.request) return;
    if (session.ended) {
      this.#release(session, item, "the worker left");
      return;
    }
    if (bridged.backlog.length >= MAX_BACKLOG) {
      this.#release(session, item, "the worker's backlog is full");
      return;
    }
    bridged.backlog.push(item);
    this.#pump(bridged, connection);
  }

  /** Offer backlog items while the session has free slots. */
  #pump(bridged: Bridged, connection: NatsConnection): void {
    const { session } = bridged;
    while (session.free && bridged.backlog.length > 0) {
      const item = bridged.backlog.shift() as WorkItem;
      void this.#handle(bridged, connection, item).finally(() => {
        if (this.#bridged.get(session) === bridged) this.#pump(bridged, connection);
      });
    }
  }

  /**
   * Give an item back to the router that placed it (it places it again);
   * `unclaimed`: no claim of it was sent from here.
   */
  #release(session: WorkerSession, item: WorkItem, reason: string, unclaimed = true): void {
    const nats = this.#options.nats();
    if (!nats || nats.connection.isClosed()) return;
    this.#publish(
      nats.connection,
      `${item.replyTo}.event`,
      toBinary(
        WorkerReportSchema,
        create(WorkerReportSchema, {
          executionId: item.executionId,
          attempt: item.attempt,
          workerId: session.workerId,
          body: { case: "released", value: { reason, unclaimed } },
        }),
      ),
    );
  }

  async #handle(bridged: Bridged, connection: NatsConnection, item: WorkItem): Promise<void> {
    const { session } = bridged;
    if (!item.request || (item.deadline && timestampMs(item.deadline) <= Date.now())) {
      // Past its deadline: the router no longer waits for it.
      return;
    }
    let finished!: () => void;
    const over = new Promise<void>((resolve) => {
      finished = resolve;
    });
    let resolveClaim!: (negotiation: ExecutionNegotiation | undefined) => void;
    const claim = new Promise<ExecutionNegotiation | undefined>((resolve) => {
      resolveClaim = resolve;
    });
    const held: Held = {
      item,
      offeredAt: Date.now(),
      unclaimed: true,
      claimed: (negotiation) => {
        if (held.unclaimed) {
          held.unclaimed = false;
          this.#unclaimed--;
          this.#arm();
        }
        resolveClaim(negotiation);
      },
      granted: false,
      finished,
    };
    bridged.held.set(item.executionId, held);
    this.#unclaimed++;
    this.#arm();
    const work = { executionId: item.executionId, attempt: item.attempt };
    try {
      session.offer(work, item.request, item.deadline ? timestampMs(item.deadline) : undefined);
      const negotiation = await claim;
      if (!negotiation) {
        // No claim came (or the worker is gone): the router places it elsewhere.
        this.#release(session, item, "the worker did not claim the offer");
        return;
      }
      let granted = false;
      let reason = "";
      try {
        const answer = await this.#request(
          connection,
          `${item.replyTo}.claim`,
          toBinary(
            ClaimRequestSchema,
            create(ClaimRequestSchema, {
              executionId: item.executionId,
              attempt: item.attempt,
              workerId: session.workerId,
              negotiation: negotiationToProto(negotiation),
            }),
          ),
          this.#routerTimeoutMs,
        );
        const response = fromBinary(ClaimResponseSchema, answer.data);
        granted = response.granted;
        reason = response.reason;
      } catch (error) {
        if (isNoResponders(error)) {
          reason = "the router that placed the execution is gone";
        } else {
          // The router may have granted it after we stopped waiting: give it back.
          this.#release(session, item, "claim answer lost", false);
          reason = "the router did not answer the claim in time";
        }
      }
      held.granted = granted && !session.ended;
      held.resolveAnswer?.({ granted: held.granted, reason });
      if (!held.granted) return;
      // Offered until it runs, so the slot is never counted free in between.
      session.running.set(item.executionId, item.attempt);
      session.offered.delete(item.executionId);
      await over;
    } finally {
      // Never left counted as unclaimed (e.g. the offer could not be sent).
      if (held.unclaimed) held.claimed(undefined);
      // A claim that came too late is refused, never left hanging.
      held.resolveAnswer?.({ granted: false, reason: "the offer is withdrawn" });
      session.offered.delete(item.executionId);
      session.running.delete(item.executionId);
      if (bridged.held.get(item.executionId) === held) bridged.held.delete(item.executionId);
    }
  }
}
