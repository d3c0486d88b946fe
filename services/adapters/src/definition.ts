/**
 * The adapters service: the adapter registry (workers announce backend,
 * capabilities and capacity; operators list them) and the routing service
 * (negotiate and run executions) over the same router the tasks service
 * uses. Embedded: in-process backends only. Distributed: plus every remote
 * worker of the mesh, reached through the JetStream work queue.
 *
 * It also keeps the vaults (`VaultService`, tables in its schema): secrets
 * sealed with the vault key, read only by in-process harness tools under
 * each vault's access policy.
 */
import {
  AdapterRegistryService,
  RoutingService,
  VaultAccessService,
  VaultService,
  WorkerService,
} from "@trellis/contracts/adapters";
import type { ExecutionAdapter } from "@trellis/execution";
import {
  adaptersMigrations,
  createInProcessBackends,
  createRoutedExecutor,
  createWorkerHandlers,
  embeddedWorkerHub,
  hubOptions,
  loadAdaptersConfig,
  loadVaultBox,
  NatsWorkerBridge,
  routedNats,
  VaultStore,
  WorkerSessions,
} from "@trellis/execution";
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { withErrorDetails } from "./handlers/errors.js";
import { createRegistryHandlers } from "./handlers/registry-handlers.js";
import { createRoutingHandlers } from "./handlers/routing-handlers.js";
import { createVaultAccessHandlers, createVaultHandlers } from "./vaults/handlers.js";

/** Options of {@link createAdaptersService}. */
export interface AdaptersServiceOptions {
  /**
   * In-process backends (default: embedded, the built-in scripted and
   * harness backends; distributed, the scripted one — the harness runs in
   * adapter workers there).
   */
  adapters?: readonly ExecutionAdapter[];
}

/** An adapters service definition with its in-process backends chosen. */
export function createAdaptersService(options: AdaptersServiceOptions = {}): ServiceDefinition {
  return {
    name: "adapters",
    provides: [
      AdapterRegistryService,
      RoutingService,
      VaultService,
      VaultAccessService,
      WorkerService,
    ],
    migrations: adaptersMigrations,
    defaultPort: DEFAULT_PORTS.adapters ?? 0,
    async create(context) {
      const vaultBox = await loadVaultBox({
        mode: context.mode,
        env: context.env,
        dataDir: context.dataDir,
        db: context.db,
      });
      if (!vaultBox.canSeal) {
        context.logger.warn(
          "no TRELLIS_VAULT_KEY: vault secrets cannot be stored or read; vault metadata still works",
        );
      }
      const vaultStore = new VaultStore(context.db, context.schema, vaultBox);
      const vaults = withErrorDetails(VaultService, createVaultHandlers(vaultStore));
      const vaultAccess = withErrorDetails(
        VaultAccessService,
        createVaultAccessHandlers(vaultStore),
      );
      const adapters =
        options.adapters ??
        (
          await createInProcessBackends({
            mode: context.mode,
            env: context.env,
            db: context.db,
            dataDir: context.dataDir,
            fingerprints: context.fingerprints,
            vaultAccess: (workspaceId, agentId) => vaultStore.accessFor(workspaceId, agentId),
          })
        ).adapters;
      const config = loadAdaptersConfig(context.env);
      // gRPC workers: embedded, one in-memory hub shared with the tasks
      // service's router; distributed, bridged onto the JetStream work queue.
      const hub =
        context.mode === "embedded"
          ? embeddedWorkerHub(context.signals, hubOptions(config))
          : undefined;
      const routed = createRoutedExecutor({
        mode: context.mode,
        env: context.env,
        logger: context.logger,
        adapters,
        fingerprints: context.fingerprints,
        // Remote workers' harness tools read vault secrets through the router.
        vaultAccess: (workspaceId, agentId) => vaultStore.accessFor(workspaceId, agentId),
        ...(hub ? { workerHub: hub } : {}),
      });
      const sessions = new WorkerSessions({
        port:
          hub ??
          new NatsWorkerBridge({
            nats: () => routedNats(routed),
            // Turns this service's own router places (RoutingService.Execute) pass in process.
            local: () => routed.remote,
            logger: context.logger,
          }),
      });
      const workers = withErrorDetails(WorkerService, createWorkerHandlers(sessions));
      const registry = withErrorDetails(
        AdapterRegistryService,
        createRegistryHandlers({
          registry: routed.registry,
          ...(routed.announce ? { publish: routed.announce } : {}),
        }),
      );
      const routing = withErrorDetails(RoutingService, createRoutingHandlers(routed.router));
      return {
        routes(router) {
          router
            .service(AdapterRegistryService, registry)
            .service(RoutingService, routing)
            .service(VaultService, vaults)
            .service(VaultAccessService, vaultAccess)
            .service(WorkerService, workers);
        },
        start: () => routed.start(),
        async stop() {
          sessions.close();
          hub?.close();
          await routed.stop();
        },
      };
    },
  };
}

/** The adapters service, runnable embedded or as its own process. */
export const adaptersService: ServiceDefinition = createAdaptersService();
