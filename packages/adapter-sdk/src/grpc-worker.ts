/**
 * An adapter worker over plain gRPC (proto `trellis.adapters.v1.WorkerService`):
 * for a worker outside the cluster, with no NATS client — it reaches the
 * gateway (admin key) or the adapters service (mesh credentials through
 * `interceptors`). Same adapter, same semantics as {@link runWorker}: it
 * negotiates each offer itself and claims it (only a granted claim runs),
 * streams progress in order, honours cancels and `maxElapsedMs`, and keeps
 * its lease with heartbeats.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type ConnectWorkerResponse,
  type ExecutionEvent as PbEvent,
  ReasonCode,
  Severity,
  WorkerService,
  type WorkOffer,
  type WorkRef,
} from "@trellis/contracts/adapters";
import { createLogger, type Logger } from "@trellis/runtime";
import { BACKEND_ID_PATTERN } from "./define-adapter.js";
import {
  capabilitiesToProto,
  eventToProto,
  negotiationToProto,
  requestFromProto,
  resultToProto,
  vaultGrantsFromProto,
} from "./mapping.js";
import { capabilitiesOf, capabilityProblems, negotiateWith } from "./negotiation.js";
import { runExecution } from "./run-execution.js";
import { EXECUTION_SCHEMA_VERSION, type ExecutionAdapter } from "./types.js";
import { toToken } from "./wire.js";
import type { AdapterWorker } from "./worker.js";

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
  logger?: Logger;
}

/** Most events one ReportWorkEvents / CompleteWork call carries (the server's bound). */
const MAX_EVENTS_PER_CALL = 256;

interface Running {
  abort: AbortController;
  done: Promise<void>;
}

/** Connect to Trellis over gRPC and run `options.adapter`; resolves once registered. */
export async function runGrpcWorker(options: GrpcWorkerOptions): Promise<AdapterWorker> {
  const { adapter } = options;
  const backendId = adapter.backendId;
  if (!BACKEND_ID_PATTERN.test(backendId)) {
    throw new Error(`backend id ${JSON.stringify(backendId)} must match ${BACKEND_ID_PATTERN}`);
  }
  const capabilities = capabilitiesOf(adapter);
  const problems = capabilityProblems(capabilities);
  if (problems.length) {
    throw new Error(
      `adapter ${backendId} describes invalid capabilities: ${problems.map((p) => `${p.field} ${p.message}`).join("; ")}`,
    );
  }
  const capacity = Math.max(1, Math.floor(options.capacity ?? 1));
  const heartbeatMs = options.heartbeatMs ?? 1000;
  const graceMs = options.graceMs ?? 2000;
  const requestedId =
    options.workerId ??
    toToken(`${backendId}-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`);
  const log = (options.logger ?? createLogger({ service: `adapter-${backendId}` })).child({
    worker_id: requestedId,
  });
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
  /** One session: its command stream and the ids every call carries. */
  interface Session {
    stream: AsyncIterator<ConnectWorkerResponse>;
    workerId: string;
    session: string;
    /** Ends this session's stream. */
    closing: AbortController;
    /** Its stream ended or its lease is gone. */
    over: boolean;
  }
  const open = async (): Promise<Session> => {
    const closing = new AbortController();
    const stream = client
      .connectWorker(
        {
          worker: {
            schemaVersion: EXECUTION_SCHEMA_VERSION,
            workerId: requestedId,
            backendId,
            capabilities: capabilitiesToProto(capabilities),
            capacity,
            hints: {
              costPerExecution: options.hints?.costPerExecution ?? 0,
              latencyMs: options.hints?.latencyMs ?? 0,
            },
            heartbeatIntervalMs: heartbeatMs,
          },
        },
        { signal: closing.signal },
      )
      [Symbol.asyncIterator]();
    const first = await stream.next();
    if (first.done || first.value.command.case !== "connected") {
      closing.abort();
      throw new Error("the server did not accept the worker (no `connected` command)");
    }
    return { stream, ...first.value.command.value, closing, over: false };
  };
  let current = await open();
  const { workerId } = current;
  const running = new Map<string, Running>();
  let completed = 0;
  let stopping = false;

  const heartbeat = setInterval(() => {
    const beating = current;
    if (beating.over) return;
    client
      .workerHeartbeat({
        workerId: beating.workerId,
        session: beating.session,
        inFlight: running.size,
      })
      .catch((error: unknown) => {
        log.warn("heartbeat failed", { error: String(error) });
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
      client
        .reportWorkEvents({ work, events })
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
      await client.claimWork({
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
    const answer = await client.claimWork({ work, negotiation: negotiationToProto(negotiation) });
    if (!answer.granted || !negotiation.supported) return;
    const done = (async () => {
      const deadline = offer.deadline ? timestampMs(offer.deadline) : undefined;
      const result = await runExecution(
        adapter,
        request,
        deadline === undefined ? { graceMs } : { graceMs, deadline },
      );
      const events = await trailing();
      await client.completeWork({ work, result: resultToProto(result), events });
    })();
    running.set(offer.executionId, { abort, done });
    try {
      await done;
    } finally {
      running.delete(offer.executionId);
      completed++;
    }
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
            running
              .get(command.value.executionId)
              ?.abort.abort(new Error(command.value.reason || "canceled"));
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

  return {
    workerId,
    backendId,
    get inFlight() {
      return running.size;
    },
    get completed() {
      return completed;
    },
    async stop(stopOptions = {}) {
      if (stopping) return;
      stopping = true;
      const grace = stopOptions.graceMs ?? graceMs;
      const all = Promise.all([...running.values()].map((r) => r.done.catch(() => undefined)));
      const timer = setTimeout(() => {
        for (const r of running.values()) r.abort.abort(new Error("the worker is stopping"));
      }, grace);
      await all;
      clearTimeout(timer);
      await client
        .disconnectWorker({ workerId: current.workerId, session: current.session })
        .catch(() => undefined);
      current.closing.abort();
      await loop;
    },
  };
}
