/**
 * The built-in adapter worker: one process running the backends Trellis
 * ships (the harness and the scripted one) as workers of the mesh, one SDK
 * worker per backend over one NATS connection, behind a gRPC health endpoint.
 *
 * - Health (`grpc.health.v1` on `PORT`, default 7005) is up before anything
 *   else and reports NOT_SERVING until NATS (and PostgreSQL, when the ledger
 *   uses it) answers, while either is unreachable later, and once stopping.
 * - NATS and PostgreSQL are retried at start for `TRELLIS_STARTUP_TIMEOUT`
 *   (a dependency that starts after us is normal in Kubernetes).
 * - Stop: report NOT_SERVING and leave the mesh at once (no new work), let
 *   running executions finish for up to `TRELLIS_WORKER_GRACE`, then close
 *   the health endpoint and the connections.
 */

import type { NatsConnection } from "@nats-io/transport-node";
import {
  type AdapterWorker,
  type ExecutionAdapter,
  runWorker,
  wireNames,
} from "@trellis/adapter-sdk";
import { connectNats, natsSecurityFromEnv } from "@trellis/eventlog";
import {
  createBuiltinAdapters,
  InMemoryToolRunLedger,
  loadHarnessTools,
  PostgresToolRunLedger,
} from "@trellis/execution";
import {
  createLogger,
  createService,
  type HealthDependency,
  type HealthReporter,
  type Logger,
  type ServiceAddress,
  waitForDependency,
} from "@trellis/runtime";
import { createDatabase, type Database } from "@trellis/storage";
import { ADAPTER_WORKER, type AdapterWorkerConfig } from "./config.js";

/** Options of {@link startAdapterWorker}. */
export interface AdapterWorkerOptions {
  config: AdapterWorkerConfig;
  /** The environment the providers' keys and base URLs are read from. */
  env: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
  /**
   * Called once the health endpoint listens, before NATS is reached (so an
   * operator sees where to probe while the worker waits for its dependencies).
   */
  onListening?: (address: ServiceAddress) => void;
  /** Aborting it during start gives up waiting for the dependencies (a shutdown signal). */
  signal?: AbortSignal;
}

/** A running built-in worker process. */
export interface RunningAdapterWorker {
  /** Where the health endpoint listens. */
  readonly address: ServiceAddress;
  /** One SDK worker per backend. */
  readonly workers: readonly AdapterWorker[];
  readonly health: HealthReporter;
  /** Leave the mesh, let running executions finish (up to `graceMs`), close everything. Idempotent. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/** Tracks whether the client is connected (nats.js reports it as a status stream). */
function watchConnection(nc: NatsConnection): { readonly connected: boolean } {
  const state = { connected: true };
  void (async () => {
    try {
      for await (const status of nc.status()) {
        if (status.type === "disconnect") state.connected = false;
        else if (status.type === "reconnect") state.connected = true;
      }
    } catch {
      // The status stream ends with the connection.
    }
  })();
  return {
    get connected() {
      return state.connected && !nc.isClosed();
    },
  };
}

/**
 * Start the built-in worker: health endpoint first, then NATS (and the
 * ledger's PostgreSQL), then one SDK worker per configured backend.
 * Resolves once every worker is registered and pulling.
 *
 * @throws TrellisError `config_invalid` (tools), `service_unavailable`
 *   (a dependency unreachable for the whole startup timeout).
 */
export async function startAdapterWorker(
  options: AdapterWorkerOptions,
): Promise<RunningAdapterWorker> {
  const { config } = options;
  const logger = options.logger ?? createLogger({ service: ADAPTER_WORKER });
  const tools = await loadHarnessTools(config.TRELLIS_HARNESS_TOOLS);
  // Refuse bad provider settings and tool definitions now, not after the
  // dependencies answered (the real adapters need the ledger, built below).
  createBuiltinAdapters({ env: options.env, tools });

  let nc: NatsConnection | undefined;
  let connection: { readonly connected: boolean } | undefined;
  let db: Database<unknown> | undefined;
  const dependencies: HealthDependency[] = [
    {
      name: "nats",
      async check() {
        if (!nc || !connection) throw new Error("not connected to NATS yet");
        if (!connection.connected) throw new Error("disconnected from NATS");
        await nc.rtt();
      },
    },
  ];
  if (config.DATABASE_URL) {
    dependencies.push({
      name: "postgres",
      async check() {
        if (!db) throw new Error("not connected to PostgreSQL yet");
        await db.ping();
      },
    });
  }
  const service = createService({
    name: ADAPTER_WORKER,
    logger,
    env: options.env,
    health: { dependencies, pollIntervalMs: 1000 },
  });
  const address = await service.listen({ host: config.TRELLIS_HOST, port: config.port });
  options.onListening?.(address);

  const workers: AdapterWorker[] = [];
  const aborted = new AbortController();
  options.signal?.addEventListener("abort", () => aborted.abort(), { once: true });
  let stopping: Promise<void> | undefined;
  const stop = (stopOptions: { graceMs?: number } = {}): Promise<void> => {
    stopping ??= (async () => {
      aborted.abort();
      service.health.setStatus("", "NOT_SERVING");
      const graceMs = stopOptions.graceMs ?? config.TRELLIS_WORKER_GRACE;
      // Leave first: routers stop placing work here while running executions finish.
      await Promise.all(workers.map((w) => w.stop({ graceMs })));
      await service.close({ graceMs: 1000 });
      if (nc) await nc.drain().catch(() => undefined);
      if (db) await db.close().catch(() => undefined);
      logger.info("adapter worker stopped", {
        completed: workers.reduce((n, w) => n + w.completed, 0),
      });
    })();
    return stopping;
  };

  try {
    const servers = config.NATS_URL;
    const security = natsSecurityFromEnv(options.env);
    nc = await waitForDependency(
      `NATS at ${servers}`,
      () => connectNats({ servers, name: `trellis-${ADAPTER_WORKER}`, security }),
      { timeoutMs: config.TRELLIS_STARTUP_TIMEOUT, logger, signal: aborted.signal },
    );
    connection = watchConnection(nc);
    let ledger: PostgresToolRunLedger | InMemoryToolRunLedger;
    const url = config.DATABASE_URL;
    if (url) {
      db = await waitForDependency(
        "PostgreSQL",
        () =>
          createDatabase({
            kind: "postgres",
            url,
            poolSize: config.DATABASE_POOL_SIZE,
            applicationName: `trellis-${ADAPTER_WORKER}`,
          }),
        { timeoutMs: config.TRELLIS_STARTUP_TIMEOUT, logger, signal: aborted.signal },
      );
      const database = db;
      ledger = await waitForDependency(
        "the tool-run ledger",
        () => PostgresToolRunLedger.open(database),
        { timeoutMs: config.TRELLIS_STARTUP_TIMEOUT, logger, signal: aborted.signal },
      );
    } else {
      logger.warn(
        "DATABASE_URL is not set: approved harness tool calls are recorded in this process only, so a re-run on another worker could run one again",
      );
      ledger = new InMemoryToolRunLedger();
    }
    const adapters: ExecutionAdapter[] = createBuiltinAdapters({
      env: options.env,
      tools,
      ledger,
    }).filter((a) => config.backends.includes(a.backendId));
    const names = wireNames(config.TRELLIS_NATS_PREFIX);
    const connected = nc;
    for (const adapter of adapters) {
      workers.push(
        await runWorker({
          adapter,
          connection: connected,
          prefix: names.prefix,
          capacity: config.TRELLIS_WORKER_CAPACITY,
          heartbeatMs: config.TRELLIS_WORKER_HEARTBEAT,
          graceMs: config.TRELLIS_WORKER_GRACE,
          storage: config.TRELLIS_ADAPTERS_WORK_STORAGE,
          logger: logger.child({ backend: adapter.backendId }),
          ...(config.TRELLIS_WORKER_ID
            ? { workerId: `${config.TRELLIS_WORKER_ID}-${adapter.backendId}` }
            : {}),
          hints: {
            ...(config.TRELLIS_WORKER_COST !== undefined
              ? { costPerExecution: config.TRELLIS_WORKER_COST }
              : {}),
            ...(config.TRELLIS_WORKER_LATENCY_MS !== undefined
              ? { latencyMs: config.TRELLIS_WORKER_LATENCY_MS }
              : {}),
          },
        }),
      );
    }
    if (aborted.signal.aborted) throw new Error("stopped while starting");
    // Report SERVING now rather than at the next poll.
    await service.health.probe();
  } catch (error) {
    await stop({ graceMs: 0 }).catch(() => undefined);
    throw error;
  }
  logger.info("adapter worker started", {
    url: address.url,
    backends: workers.map((w) => w.backendId),
    tools: tools.map((t) => t.name),
  });
  return { address, workers, health: service.health, stop };
}
