/**
 * An adapter worker: runs an {@link ExecutionAdapter} as its own process
 * next to the mesh.
 *
 * - Announces its backend id, capabilities and capacity with a heartbeat
 *   (`<prefix>.adapters.workers.<backend>`, every `heartbeatMs`; routers drop
 *   it after three missed beats, at once when it says it is leaving).
 * - Takes work from the backend's JetStream work queue: `capacity` slots,
 *   each pulling one item at a time from the consumer every worker of the
 *   backend shares, so N workers share the load and a busy worker holds no
 *   queued item.
 * - Claims each item from the router that queued it before running it; only
 *   a granted claim runs, so stale copies (redeliveries, retried attempts,
 *   executions the router gave up on) never run.
 * - Runs it with {@link runExecution}: `maxElapsedMs` and cancel notices are
 *   honoured, a timeout is `failed` / `timeout` (retryable), never a hang.
 * - Streams progress back as it happens, then the result (acknowledged by
 *   the router, retried until it is).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { type JsMsg, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
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
import { connectNats, type NatsSecurity } from "@trellis/eventlog";
import { extractTraceContext, type Logger, withSpan } from "@trellis/runtime";
import {
  contractInvalid,
  eventToProto,
  negotiationToProto,
  requestFromProto,
  vaultGrantsFromProto,
} from "./mapping.js";
import { negotiateWith } from "./negotiation.js";
import { runExecution } from "./run-execution.js";
import type {
  ExecutionAdapter,
  ExecutionEvent,
  ExecutionNegotiation,
  ExecutionResult,
  VaultGrant,
} from "./types.js";
import {
  ensureBackendConsumer,
  ensureWorkStream,
  isNoResponders,
  isTimeout,
  type WireNames,
  wireNames,
} from "./wire.js";
import type { AdapterWorker } from "./worker-setup.js";
import { RunningExecutions, workerAnnouncement, workerSetup } from "./worker-setup.js";

export type { AdapterWorker } from "./worker-setup.js";

/** Options of {@link runWorker}. */
export interface WorkerOptions {
  adapter: ExecutionAdapter;
  /** NATS servers (default nats://127.0.0.1:4222); ignored when `connection` is given. */
  servers?: string | string[];
  /** Authentication and TLS for those servers (see `natsSecurityFromEnv` of @trellis/eventlog). */
  security?: NatsSecurity;
  /** An open connection to use (not closed by the worker). */
  connection?: NatsConnection;
  /** Subject prefix, the mesh's TRELLIS_NATS_PREFIX (default "trellis"). */
  prefix?: string;
  /** Unique id of this worker (default: backend, host, pid and a random part). */
  workerId?: string;
  /** Executions run at once (default 1). */
  capacity?: number;
  /** Routing hints: relative cost per execution, typical latency. */
  hints?: { costPerExecution?: number; latencyMs?: number };
  /** Heartbeat interval (default 1000 ms). */
  heartbeatMs?: number;
  /** Redelivery wait of a work item fetched but never claimed (default 30 s). */
  ackWaitMs?: number;
  /** How long an aborted adapter may take to return (default 2000 ms). */
  graceMs?: number;
  /** How long to wait for the router to answer a claim (default 2000 ms). */
  claimTimeoutMs?: number;
  /** Storage of the work-queue stream if this worker creates it (default file). */
  storage?: "file" | "memory";
  logger?: Logger;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Start a worker for `options.adapter`; resolves once it is registered and pulling. */
export async function runWorker(options: WorkerOptions): Promise<AdapterWorker> {
  const { adapter } = options;
  const setup = workerSetup(options);
  const { backendId, capabilities, capacity, heartbeatMs, graceMs, workerId, log } = setup;
  const claimTimeoutMs = options.claimTimeoutMs ?? 2000;
  const names: WireNames = wireNames(options.prefix);
  const nc =
    options.connection ??
    (await connectNats({
      servers: options.servers ?? "nats://127.0.0.1:4222",
      name: workerId,
      ...(options.security ? { security: options.security } : {}),
    }));
  const ownsConnection = !options.connection;
  const jsm = await jetstreamManager(nc);
  const setUp = async () => {
    await ensureWorkStream(jsm, names, options.storage ? { storage: options.storage } : {});
    await ensureBackendConsumer(jsm, names, backendId, options.ackWaitMs ?? 30_000);
    return jetstream(nc).consumers.get(names.stream, names.consumer(backendId));
  };
  let consumer = await setUp();

  const running = new RunningExecutions();
  let stopping = false;

  const registration = (leaving: boolean) =>
    toBinary(
      WorkerRegistrationSchema,
      create(WorkerRegistrationSchema, {
        ...workerAnnouncement(setup, options.hints),
        inFlight: running.size,
        leaving,
      }),
    );
  const beat = () => {
    if (!nc.isClosed()) nc.publish(names.heartbeats(backendId), registration(stopping));
  };
  const subscriptions: Subscription[] = [
    nc.subscribe(names.discover, { callback: () => beat() }),
    nc.subscribe(names.cancel(workerId), {
      callback: (_err, msg) => {
        try {
          const notice = fromBinary(CancelNoticeSchema, msg.data);
          running.cancel(notice.executionId, notice.reason || "canceled by the router");
        } catch (error) {
          log.warn("ignoring an unreadable cancel notice", { error: String(error) });
        }
      },
    }),
  ];
  const heartbeat = setInterval(beat, heartbeatMs);
  beat();

  const report = (item: WorkItem, body: { event: ExecutionEvent } | { released: string }) =>
    toBinary(
      WorkerReportSchema,
      create(WorkerReportSchema, {
        executionId: item.executionId,
        attempt: item.attempt,
        workerId,
        body:
          "event" in body
            ? { case: "event", value: eventToProto(body.event) }
            : { case: "released", value: { reason: body.released } },
      }),
    );

  /** Ask the router for the item; true when granted. */
  const claim = async (item: WorkItem, negotiation: ExecutionNegotiation): Promise<boolean> => {
    const body = toBinary(
      ClaimRequestSchema,
      create(ClaimRequestSchema, {
        executionId: item.executionId,
        attempt: item.attempt,
        workerId,
        negotiation: negotiationToProto(negotiation),
      }),
    );
    const answer = await nc.request(`${item.replyTo}.claim`, body, { timeout: claimTimeoutMs });
    const response = fromBinary(ClaimResponseSchema, answer.data);
    if (!response.granted) {
      log.debug("claim refused", { execution_id: item.executionId, reason: response.reason });
    }
    return response.granted;
  };

  /** The vault secrets of the execution's agent, from the router that granted the claim. */
  const vaultSecrets = async (item: WorkItem): Promise<ReadonlyMap<string, VaultGrant>> => {
    const body = toBinary(
      SecretsRequestSchema,
      create(SecretsRequestSchema, {
        executionId: item.executionId,
        attempt: item.attempt,
        workerId,
      }),
    );
    const answer = await nc.request(`${item.replyTo}.secrets`, body, { timeout: claimTimeoutMs });
    const response = fromBinary(SecretsResponseSchema, answer.data);
    if (response.error !== "")
      throw new Error(`the router refused the vault secrets: ${response.error}`);
    return vaultGrantsFromProto(response.vaults);
  };

  /** Deliver the result; the router acknowledges it. Retried a few times. */
  const deliver = async (item: WorkItem, result: ExecutionResult): Promise<void> => {
    const body = report(item, { event: { kind: "turn_finished", result } });
    for (let attempt = 1; attempt <= 5; attempt++) {
      try {
        await nc.request(`${item.replyTo}.result`, body, { timeout: claimTimeoutMs });
        return;
      } catch (error) {
        if (isNoResponders(error)) {
          log.warn("the router that queued the execution is gone; dropping its result", {
            execution_id: item.executionId,
          });
          return;
        }
        log.warn("delivering a result failed; retrying", { attempt, error: String(error) });
        await delay(100 * attempt);
      }
    }
  };

  const handle = async (msg: JsMsg): Promise<void> => {
    let item: WorkItem;
    try {
      item = fromBinary(WorkItemSchema, msg.data);
    } catch (error) {
      log.error("dropping an unreadable work item", { error: String(error) });
      msg.term();
      return;
    }
    if (item.deadline && timestampMs(item.deadline) <= Date.now()) {
      // The router stopped waiting for it.
      msg.term();
      return;
    }
    const abort = new AbortController();
    let negotiation: ExecutionNegotiation;
    let request: ReturnType<typeof requestFromProto> | undefined;
    try {
      if (!item.request) throw contractInvalid("work_item.request", "is required");
      request = requestFromProto(item.request, {
        signal: abort.signal,
        onEvent: (event) => {
          if (!nc.isClosed()) nc.publish(`${item.replyTo}.event`, report(item, { event }));
        },
        vaultSecrets: () => vaultSecrets(item),
      });
      negotiation = negotiateWith(adapter, request);
    } catch (error) {
      negotiation = {
        supported: false,
        degraded: false,
        reasons: [
          {
            code: "other",
            severity: "blocking",
            message: `the worker cannot read the request: ${error instanceof Error ? error.message : String(error)}`,
          },
        ],
        effectiveCapabilities: capabilities,
      };
    }
    let granted: boolean;
    try {
      granted = await claim(item, negotiation);
    } catch (error) {
      if (isNoResponders(error)) {
        msg.term();
        return;
      }
      // The router may have granted it after we stopped waiting: give it back
      // explicitly, and let the item be delivered again.
      log.warn("claiming a work item failed; releasing it", {
        execution_id: item.executionId,
        error: String(error),
        timeout: isTimeout(error),
      });
      if (!nc.isClosed()) {
        nc.publish(`${item.replyTo}.event`, report(item, { released: "claim answer lost" }));
      }
      msg.nak(100);
      return;
    }
    // From here on the router owns retries: the queue copy is done.
    msg.ack();
    if (!granted || !request || !negotiation.supported) return;
    const deadline = item.deadline ? timestampMs(item.deadline) : undefined;
    // The run is a child of the router's dispatch span (traceparent in the
    // work item's NATS headers), so a turn's trace reaches the worker.
    const done = withSpan(
      "trellis.adapter.run",
      {
        kind: "consumer",
        parent: extractTraceContext(msg.headers),
        attributes: {
          "trellis.backend_id": backendId,
          "trellis.execution_id": item.executionId,
          "trellis.attempt": item.attempt,
        },
      },
      async () => {
        const result = await runExecution(
          adapter,
          { ...request, signal: abort.signal },
          deadline === undefined ? { graceMs } : { graceMs, deadline },
        );
        await deliver(item, result);
      },
    );
    await running.track(item.executionId, { abort, done });
  };

  const slot = async (): Promise<void> => {
    while (!stopping) {
      let msg: JsMsg | null;
      try {
        msg = await consumer.next({ expires: 1000 });
      } catch (error) {
        if (stopping || nc.isClosed()) return;
        log.warn("pulling work failed; retrying", { error: String(error) });
        await delay(500);
        // The stream or consumer may be gone (deleted, server restarted without state).
        consumer = await setUp().catch(() => consumer);
        continue;
      }
      if (!msg) continue;
      if (stopping) {
        // Not ours to start any more; another worker takes it.
        msg.nak();
        return;
      }
      await handle(msg);
    }
  };
  const slots = Array.from({ length: capacity }, () => slot());
  log.info("adapter worker started", { backend: backendId, capacity });

  return running.handle({ workerId, backendId }, async (stopOptions = {}) => {
    if (stopping) return;
    stopping = true;
    beat(); // leaving: routers stop placing work here at once
    await running.drain(stopOptions.graceMs ?? graceMs);
    await Promise.all(slots);
    clearInterval(heartbeat);
    for (const sub of subscriptions) sub.unsubscribe();
    if (ownsConnection) await nc.drain().catch(() => undefined);
    log.info("adapter worker stopped", { completed: running.completed });
  });
}
