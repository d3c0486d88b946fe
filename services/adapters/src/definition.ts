/**
 * The adapters service: the adapter registry (workers announce backend,
 * capabilities and capacity; operators list them) and the routing service
 * (negotiate and run executions) over the same router the tasks service
 * uses. Embedded: in-process backends only. Distributed: plus every remote
 * worker of the mesh, reached through the JetStream work queue.
 */
import { AdapterRegistryService, RoutingService } from "@trellis/contracts/adapters";
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import type { ExecutionAdapter } from "./executor.js";
import { withErrorDetails } from "./handlers/errors.js";
import { createRegistryHandlers } from "./handlers/registry-handlers.js";
import { createRoutingHandlers } from "./handlers/routing-handlers.js";
import { createInProcessBackends } from "./local-executor.js";
import { createRoutedExecutor } from "./routing/routed-executor.js";

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
    provides: [AdapterRegistryService, RoutingService],
    defaultPort: DEFAULT_PORTS.adapters ?? 0,
    async create(context) {
      const adapters =
        options.adapters ??
        (await createInProcessBackends({ mode: context.mode, env: context.env, db: context.db }))
          .adapters;
      const routed = createRoutedExecutor({
        mode: context.mode,
        env: context.env,
        logger: context.logger,
        adapters,
      });
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
          router.service(AdapterRegistryService, registry).service(RoutingService, routing);
        },
        start: () => routed.start(),
        stop: () => routed.stop(),
      };
    },
  };
}

/** The adapters service, runnable embedded or as its own process. */
export const adaptersService: ServiceDefinition = createAdaptersService();
