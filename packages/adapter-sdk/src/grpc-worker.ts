/**
 * An adapter worker over plain gRPC (proto `trellis.adapters.v1.WorkerService`):
 * for a worker outside the cluster, with no NATS client — it reaches the
 * gateway (admin key) or the adapters service (mesh credentials through
 * `interceptors`). Same adapter, same semantics as {@link runWorker}: it
 * negotiates each offer itself and claims it (only a granted claim runs),
 * streams progress in order, honours cancels and `maxElapsedMs`, and keeps
 * its lease with heartbeats.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type ClaimWorkRequestSchema,
  type ClaimWorkResponse,
  type CompleteWorkRequestSchema,
  type CompleteWorkResponse,
  type ConnectWorkerRequestSchema,
  type ConnectWorkerResponse,
  type ExecutionEvent as PbEvent,
  ReasonCode,
  type ReportWorkEventsRequestSchema,
  type ReportWorkEventsResponse,
  Severity,
  type WorkerChannelRequestSchema,
  type WorkerHeartbeatRequestSchema,
  type WorkerHeartbeatResponse,
  WorkerService,
  type WorkOffer,
  type WorkRef,
} from "@trellis/contracts/adapters";
import type { Logger } from "@trellis/runtime";
import {
  capabilitiesToProto,
  eventToProto,
  negotiationToProto,
  requestFromProto,
  resultToProto,
  vaultGrantsFromProto,
} from "./mapping.js";
import { negotiateWith } from "./negotiation.js";
import { runExecution } from "./run-execution.js";
import type { ExecutionAdapter } from "./types.js";
import type { AdapterWorker } from "./worker.js";
import { RunningExecutions, workerAnnouncement, workerSetup } from "./worker-setup.js";

/** Options of {@link runGrpcWorker}. */
export interface GrpcWorkerOptions {
  adapter: ExecutionAdapter;
  /** The gateway's (or the adapters service's) base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** An admin API key for the gateway (sent as a bearer token). */
  apiKey?: string;
  /** More interceptors (e.g. mesh credentials when calling the adapters service directly). */
  interceptors?: Interceptor[];
  /** Unique id of this worker (default: backend, host, pid and a random part). */
  workerId?: string;
  /** Executions run at once (default 1). */
  capacity?: number;
  hints?: { costPerExecution?: number; latencyMs?: number };
  /** Heartbeat interval (default 1000 ms). */
  heartbeatMs?: number;
  /** How long an aborted adapter may take to return (default 2000 ms). */
  graceMs?: number;
  /**
   * Use `WorkerChannel` (one bidirectional stream for commands, claims,
   * progress, results and heartbeats; default true). The unary calls are
   * used when this is false or the server answers Unimplemented to it.
   */
  channel?: boolean;
  logger?: Logger;
}

/** Most events one ReportWorkEvents / CompleteWork call carries (the server's bound). */
const MAX_EVENTS_PER_CALL = 256;

/** The calls of one session, over the channel or as unary calls. */
interface SessionCalls {
  claim(request: MessageInitShape<typeof ClaimWorkRequestSchema>): Promise<ClaimWorkResponse>;
  report(
    request: MessageInitShape<typeof ReportWorkEventsRequestSchema>,
  ): Promise<ReportWorkEventsResponse>;
  complete(
    request: MessageInitShape<typeof CompleteWorkRequestSchema>,
  ): Promise<CompleteWorkResponse>;
  heartbeat(
    request: MessageInitShape<typeof WorkerHeartbeatRequestSchema>,
  ): Promise<WorkerHeartbeatResponse>;
}

/** The requests of a channel: an async iterable fed by `push`, ended by `end`. */
class Outbox<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #ended = false;
  #wake: (() => void) | undefined;

  push(item: T): boolean {
    if (this.#ended) return false;
    this.#items.push(item);
    this.#wake?.();
    return true;
  }

  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      for (let item = this.#items.shift(); item !== undefined; item = this.#items.shift()) {
        yield item;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}

/** Connect to Trellis over gRPC and run `options.adapter`; resolves once registered. */
export async function runGrpcWorker(options: GrpcWorkerOptions): Promise<AdapterWorker> {
  const { adapter } = options;
  const setup = workerSetup(options);
  const { backendId, capabilities, capacity, heartbeatMs, graceMs, log } = setup;
  const auth: Interceptor[] = options.apiKey
    ? [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${options.apiKey}`);
          return next(req);
        },
      ]
    : [];
  const client = createClient(
    WorkerService,
    createGrpcTransport({
      baseUrl: options.url,
      interceptors: [...auth, ...(options.interceptors ?? [])],
    }),
  );
  /** One session: its command stream, its calls and the ids every call carries. */
  interface Session {
    stream: AsyncIterator<ConnectWorkerResponse>;
    calls: SessionCalls;
    workerId: string;
    session: string;
    /** Ends this session's stream. */
    closing: AbortController;
    /** Its stream ended or its lease is gone. */
    over: boolean;
  }
  const registration = (): MessageInitShape<typeof ConnectWorkerRequestSchema> => ({
    worker: workerAnnouncement(setup, options.hints),
  });
  const unaryCalls: SessionCalls = {
    claim: (request) => client.claimWork(request),
    report: (request) => client.reportWorkEvents(request),
    complete: (request) => client.completeWork(request),
    heartbeat: (request) => client.workerHeartbeat(request),
  };
  const openUnary = async (): Promise<Session> => {
    const closing = new AbortController();
    const stream = client
      .connectWorker(registration(), { signal: closing.signal })
      [Symbol.asyncIterator]();
    const first = await stream.next();
    if (first.done || first.value.command.case !== "connected") {
      closing.abort();
      throw new Error("the server did not accept the worker (no `connected` command)");
    }
    return { stream, calls: unaryCalls, ...first.value.command.value, closing, over: false };
  };
  /** WorkerChannel: commands and the answers to this session's calls on one stream. */
  const openChannel = async (): Promise<Session> => {
    const closing = new AbortController();
    const outbox = new Outbox<MessageInitShape<typeof WorkerChannelRequestSchema>>();
    outbox.push({ callId: 0n, body: { case: "connect", value: registration() } });
    const responses = client
      .workerChannel(outbox, { signal: closing.signal })
      [Symbol.asyncIterator]();
    let first: Awaited<ReturnType<typeof responses.next>>;
    try {
      first = await responses.next();
    } catch (error) {
      outbox.end();
      closing.abort();
      throw error;
    }
    const command = first.done ? undefined : first.value.body;
    if (command?.case !== "command" || command.value.command.case !== "connected") {
      outbox.end();
      closing.abort();
      throw new Error("the server did not accept the worker (no `connected` command)");
    }
    type Waiter = { resolve(value: unknown): void; reject(error: Error): void };
    const waiting = new Map<bigint, Waiter>();
    let nextId = 1n;
    const call = <T>(body: MessageInitShape<typeof WorkerChannelRequestSchema>["body"]) =>
      new Promise<T>((resolve, reject) => {
        const callId = nextId++;
        waiting.set(callId, { resolve: resolve as (value: unknown) => void, reject });
        if (!outbox.push({ callId, body })) {
          waiting.delete(callId);
          reject(new ConnectError("the worker channel is closed", Code.Unavailable));
        }
      });
    const stream = (async function* (): AsyncGenerator<ConnectWorkerResponse> {
      try {
        for (;;) {
          const next = await responses.next();
          if (next.done) return;
          const { callId, body } = next.value;
          if (body.case === "command") {
            yield body.value;
            continue;
          }
          const waiter = waiting.get(callId);
          if (!waiter || body.case === undefined) continue;
          waiting.delete(callId);
          if (body.case === "error") {
            waiter.reject(new ConnectError(body.value.message, body.value.code as Code));
          } else {
            waiter.resolve(body.value);
          }
        }
      } finally {
        outbox.end();
        for (const waiter of waiting.values()) {
          waiter.reject(new ConnectError("the worker channel closed", Code.Unavailable));
        }
        waiting.clear();
      }
    })();
    const calls: SessionCalls = {
      claim: (value) => call({ case: "claim", value }),
      report: (value) => call({ case: "report", value }),
      complete: (value) => call({ case: "complete", value }),
      heartbeat: (value) => call({ case: "heartbeat", value }),
    };
    return { stream, calls, ...command.value.command.value, closing, over: false };
  };
  let useChannel = options.channel ?? true;
  const open = async (): Promise<Session> => {
    if (!useChannel) return openUnary();
    try {
      return await openChannel();
    } catch (error) {
      // A server (or proxy) without the channel: the unary calls, from now on.
      if (ConnectError.from(error).code !== Code.Unimplemented) throw error;
      log.info("the server has no WorkerChannel; using the unary calls");
      useChannel = false;
      return openUnary();
    }
  };
  let current = await open();
  const { workerId } = current;
  const running = new RunningExecutions();
  let stopping = false;

  const heartbeat = setInterval(() => {
    const beating = current;
    if (beating.over) return;
    beating.calls
      .heartbeat({
        workerId: beating.workerId,
        session: beating.session,
        inFlight: running.size,
      })
      .catch((error: unknown) => {
        if (!stopping) log.warn("heartbeat failed", { error: String(error) });
        // The lease is gone: end this session's stream; the loop connects again.
        if (ConnectError.from(error).code === Code.NotFound) {
          beating.over = true;
          beating.closing.abort();
        }
      });
  }, heartbeatMs);

  const run = async (offer: WorkOffer, held: Session): Promise<void> => {
    const work: WorkRef = {
      $typeName: "trellis.adapters.v1.WorkRef",
      workerId: held.workerId,
      session: held.session,
      executionId: offer.executionId,
      attempt: offer.attempt,
    };
    const abort = new AbortController();
    // Progress goes out in order, one call after the other, batched: what
    // comes in before the next turn of the event loop (or while a call is in
    // flight) goes in one call. Whatever is still queued when the result is
    // ready rides on CompleteWork, so a short turn costs no extra call.
    const queued: PbEvent[] = [];
    let flushing: Promise<void> | undefined;
    let tick: NodeJS.Immediate | undefined;
    const report = (events: PbEvent[]) =>
      held.calls
        .report({ work, events })
        .catch((error: unknown) => log.warn("reporting progress failed", { error: String(error) }));
    const flush = async () => {
      while (queued.length) await report(queued.splice(0, MAX_EVENTS_PER_CALL));
    };
    const send = (event: PbEvent) => {
      queued.push(event);
      if (flushing || tick) return;
      tick = setImmediate(() => {
        tick = undefined;
        flushing = flush().finally(() => {
          flushing = undefined;
        });
      });
    };
    /** The events not reported yet, once every earlier call is done (at most one call's worth). */
    const trailing = async (): Promise<PbEvent[]> => {
      if (tick) clearImmediate(tick);
      tick = undefined;
      while (flushing) await flushing;
      while (queued.length > MAX_EVENTS_PER_CALL) {
        await report(queued.splice(0, MAX_EVENTS_PER_CALL));
      }
      return queued.splice(0, queued.length);
    };
    let request: ReturnType<typeof requestFromProto>;
    try {
      if (!offer.request) throw new Error("the offer has no request");
      request = requestFromProto(offer.request, {
        signal: abort.signal,
        onEvent: (event: Parameters<NonNullable<typeof request.onEvent>>[0]) => {
          if (event.kind !== "turn_finished") send(eventToProto(event));
        },
        // The agent's vault grants, from the server that granted the claim
        // (only while this attempt runs), as a JetStream worker asks its router.
        vaultSecrets: async () =>
          vaultGrantsFromProto((await client.getWorkSecrets({ work })).vaults),
      });
    } catch (error) {
      await held.calls.claim({
        work,
        negotiation: {
          supported: false,
          reasons: [
            {
              code: ReasonCode.OTHER,
              severity: Severity.BLOCKING,
              message: `the worker cannot read the request: ${String(error)}`,
            },
          ],
          effectiveCapabilities: capabilitiesToProto(capabilities),
        },
      });
      return;
    }
    const negotiation = negotiateWith(adapter, request);
    const answer = await held.calls.claim({ work, negotiation: negotiationToProto(negotiation) });
    if (!answer.granted || !negotiation.supported) return;
    const done = (async () => {
      const deadline = offer.deadline ? timestampMs(offer.deadline) : undefined;
      const result = await runExecution(
        adapter,
        request,
        deadline === undefined ? { graceMs } : { graceMs, deadline },
      );
      const events = await trailing();
      await held.calls.complete({ work, result: resultToProto(result), events });
    })();
    await running.track(offer.executionId, { abort, done });
  };

  // Follow the command stream; when the session is lost (the stream ends,
  // the lease ran out), connect again as a new session until stopped.
  const loop = (async () => {
    session: for (;;) {
      const held = current;
      try {
        for (;;) {
          const next = await held.stream.next();
          if (next.done) break;
          const command = next.value.command;
          if (command.case === "offer") {
            run(command.value, held).catch((error: unknown) =>
              log.warn("running an offer failed", { error: String(error) }),
            );
          } else if (command.case === "cancel") {
            running.cancel(command.value.executionId, command.value.reason || "canceled");
          }
        }
      } catch (error) {
        if (!stopping) log.warn("the command stream ended", { error: String(error) });
      }
      held.over = true;
      for (;;) {
        if (stopping) break session;
        await new Promise((resolve) => setTimeout(resolve, 1000));
        if (stopping) break session;
        try {
          current = await open();
          log.info("connected again", { worker_id: current.workerId });
          break;
        } catch (error) {
          log.warn("connecting again failed; retrying", { error: String(error) });
        }
      }
    }
    clearInterval(heartbeat);
  })();
  log.info("gRPC adapter worker started", { backend: backendId, capacity });

  return running.handle({ workerId, backendId }, async (stopOptions = {}) => {
    if (stopping) return;
    stopping = true;
    await running.drain(stopOptions.graceMs ?? graceMs, { ignoreFailures: true });
    await client
      .disconnectWorker({ workerId: current.workerId, session: current.session })
      .catch(() => undefined);
    current.closing.abort();
    await loop;
  });
}
