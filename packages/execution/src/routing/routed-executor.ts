/**
 * The routed executor a service runs: a {@link Router} over in-process
 * backends (the scripted one by default) and, in distributed mode, the
 * remote workers of the mesh (heartbeats and the JetStream work queue).
 * Embedded mode needs nothing installed: no NATS, the in-process backends
 * only — and the same routing code.
 */

import { toBinary } from "@bufbuild/protobuf";
import type { NatsConnection } from "@nats-io/transport-node";
import type {
  ExecutionAdapter,
  ExecutionResult,
  VaultGrant,
  WireNames,
} from "@trellis/adapter-sdk";
import { WorkerRegistrationSchema } from "@trellis/contracts/adapters";
import { connectNats, natsSecurityFromEnv } from "@trellis/eventlog";
import { type Logger, type SecretFingerprints, TrellisError } from "@trellis/runtime";
import { loadAdaptersConfig } from "../config.js";
import { createScriptedAdapter } from "../scripted/scripted-adapter.js";
import { announcementToProto } from "./announcement.js";
import { type VaultAccessLoader, withFingerprints } from "./dispatcher-options.js";
import { JetStreamDispatcher } from "./jetstream-dispatcher.js";
import { BackendRegistry, type LocalBackendOptions, type WorkerAnnouncement } from "./registry.js";
import {
  type DispatchOutcome,
  type DispatchPlan,
  type RemoteDispatcher,
  Router,
} from "./router.js";

/** Options of {@link createRoutedExecutor}. */
export interface RoutedExecutorOptions {
  mode: "embedded" | "distributed";
  /** The host's environment (NATS_URL, TRELLIS_NATS_PREFIX, TRELLIS_ADAPTERS_*). */
  env: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
  /** In-process backends (default: the scripted one). */
  adapters?: readonly ExecutionAdapter[];
  /** Options of the in-process backends, by backend id. */
  local?: Readonly<Record<string, LocalBackendOptions>>;
  /** Use this NATS connection instead of opening one (not closed by stop). */
  connection?: NatsConnection;
  /** The vault access of agents, for remote workers' tools (see JetStreamDispatcherOptions). */
  vaultAccess?: VaultAccessLoader;
  /** The deployment's secret fingerprints, sent with granted secrets (see JetStreamDispatcherOptions). */
  fingerprints?: SecretFingerprints;
  /**
   * Embedded mode: the gRPC workers of this process (`grpc-workers/hub.ts`),
   * placed on like remote workers. Ignored when remote work goes through NATS.
   */
  workerHub?: WorkerHubLike;
}

/** A dispatcher that also announces its workers to a router's registry. */
export interface WorkerHubLike {
  /** As {@link RemoteDispatcher}; `secrets` answers the running worker's GetWorkSecrets. */
  dispatch(
    plan: DispatchPlan & { secrets?(): Promise<ReadonlyMap<string, VaultGrant>> },
  ): Promise<DispatchOutcome>;
  addRegistry(registry: BackendRegistry): () => void;
}

/** A router with its lifecycle. */
export interface RoutedExecutor {
  router: Router;
  registry: BackendRegistry;
  /** The remote dispatcher once started in distributed mode. */
  readonly remote: JetStreamDispatcher | undefined;
  /** The NATS connection once started in distributed mode. */
  readonly connection: NatsConnection | undefined;
  /**
   * Share a worker announcement with every router of the mesh (distributed
   * mode with remote workers; undefined otherwise).
   */
  readonly announce: ((announcement: WorkerAnnouncement) => void) | undefined;
  /** Connect to NATS and start listening to workers (distributed mode). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A routed executor's NATS connection and wire names once it has started in
 * distributed mode (undefined before, and in embedded mode): what a
 * `NatsWorkerBridge` relaying for it publishes with.
 */
export function routedNats(
  routed: Pick<RoutedExecutor, "connection" | "remote">,
): { connection: NatsConnection; names: WireNames } | undefined {
  const { connection, remote } = routed;
  return connection && remote ? { connection, names: remote.names } : undefined;
}

/** Forwards to the JetStream dispatcher once it exists. */
class LateDispatcher implements RemoteDispatcher {
  target: RemoteDispatcher | undefined;
  dispatch(plan: DispatchPlan): Promise<DispatchOutcome> {
    if (!this.target) {
      const result: ExecutionResult = {
        status: "failed",
        messages: [],
        category: "backend_unavailable",
        message: "remote workers are not reachable yet (the router has not started)",
        retryable: true,
      };
      return Promise.resolve({ result });
    }
    return this.target.dispatch(plan);
  }
}

/** Build the executor a service routes with. */
export function createRoutedExecutor(options: RoutedExecutorOptions): RoutedExecutor {
  const config = loadAdaptersConfig(options.env);
  const registry = new BackendRegistry();
  for (const adapter of options.adapters ?? [createScriptedAdapter()]) {
    registry.addLocal(adapter, options.local?.[adapter.backendId] ?? {});
  }
  const remoteWanted = options.mode === "distributed" && config.TRELLIS_ADAPTERS_REMOTE;
  const late = new LateDispatcher();
  const hub = remoteWanted ? undefined : options.workerHub;
  const removeFromHub = hub?.addRegistry(registry);
  const router = new Router({
    registry,
    graceMs: config.TRELLIS_ADAPTERS_GRACE,
    ...(remoteWanted ? { remote: late } : hub ? { remote: withPlanSecrets(hub, options) } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  let connection: NatsConnection | undefined;
  let dispatcher: JetStreamDispatcher | undefined;
  return {
    router,
    registry,
    get remote() {
      return dispatcher;
    },
    get connection() {
      return connection;
    },
    announce: remoteWanted
      ? (announcement) => {
          if (!connection || !dispatcher) {
            throw new TrellisError({
              reason: "service_unavailable",
              message: "the router is not connected to NATS yet; retry",
            });
          }
          connection.publish(
            dispatcher.names.heartbeats(announcement.backendId),
            toBinary(WorkerRegistrationSchema, announcementToProto(announcement)),
          );
        }
      : undefined,
    async start() {
      if (!remoteWanted || dispatcher) return;
      connection =
        options.connection ??
        (await connectNats({
          servers: config.NATS_URL,
          name: "trellis-router",
          security: natsSecurityFromEnv(options.env),
        }));
      dispatcher = await JetStreamDispatcher.open({
        connection,
        registry,
        prefix: config.TRELLIS_NATS_PREFIX,
        storage: config.TRELLIS_ADAPTERS_WORK_STORAGE,
        graceMs: config.TRELLIS_ADAPTERS_GRACE,
        unavailableAfterMs: config.TRELLIS_ADAPTERS_UNAVAILABLE_AFTER,
        maxAttempts: config.TRELLIS_ADAPTERS_MAX_ATTEMPTS,
        ...(options.vaultAccess ? { vaultAccess: options.vaultAccess } : {}),
        ...(options.fingerprints ? { fingerprints: options.fingerprints } : {}),
        ...(options.logger ? { logger: options.logger } : {}),
      });
      late.target = dispatcher;
    },
    async stop() {
      removeFromHub?.();
      late.target = undefined;
      await dispatcher?.close();
      dispatcher = undefined;
      if (connection && !options.connection) await connection.drain().catch(() => undefined);
      connection = undefined;
    },
  };
}

/**
 * The hub's dispatcher for one router: each plan carries its agent's vault
 * grants (with fingerprints), read only when the gRPC worker running it asks
 * (`GetWorkSecrets`), as a JetStream worker's SecretsRequest is answered.
 */
function withPlanSecrets(
  hub: WorkerHubLike,
  options: Pick<RoutedExecutorOptions, "vaultAccess" | "fingerprints">,
): RemoteDispatcher {
  const { vaultAccess, fingerprints } = options;
  if (!vaultAccess) return hub;
  return {
    dispatch: (plan) =>
      hub.dispatch({
        ...plan,
        secrets: async () =>
          withFingerprints(
            await vaultAccess(plan.request.workspaceId, plan.request.agent.id),
            fingerprints,
          ),
      }),
  };
}
