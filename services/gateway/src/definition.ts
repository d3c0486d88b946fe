/**
 * The gateway service: the one public door. REST + SSE of the Harn Agents
 * Protocol (Core), gRPC / Connect / gRPC-Web of the public RPC services, API-key
 * authentication and idempotency.
 *
 * Embedded: every service's routes share one server; the gateway adds its
 * REST handler and an auth interceptor that guards every route of that server.
 * Distributed: the gateway's own server has the REST handler and forwarders
 * for every public RPC service (to the owning service over h2c), behind the
 * same interceptor.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { createAuthenticator } from "./auth/authenticator.js";
import { bootstrapAdminKey } from "./auth/bootstrap.js";
import { loadGatewayConfig } from "./config.js";
import { createAuthInterceptor } from "./grpc/auth-interceptor.js";
import { registerForwarders } from "./grpc/forwarders.js";
import { publicServices } from "./grpc/public-services.js";
import { createRestHandler } from "./http/rest-handler.js";
import { PostgresIdempotencyStore } from "./store/idempotency-store.js";
import { PostgresKeyStore } from "./store/key-store.js";
import { gatewayMigrations } from "./store/schema.js";

// Expired idempotency records are deleted this often.
const pruneIntervalMs = 15 * 60_000;

/** The gateway service, runnable embedded or as its own process. */
export const gatewayService: ServiceDefinition = {
  name: "gateway",
  provides: [],
  migrations: gatewayMigrations,
  defaultPort: DEFAULT_PORTS.gateway ?? 0,
  async create(ctx) {
    const config = loadGatewayConfig(ctx.env);
    const keys = new PostgresKeyStore(ctx.db, ctx.schema);
    const idempotency = new PostgresIdempotencyStore(ctx.db, ctx.schema);
    const bootstrap = await bootstrapAdminKey({
      db: ctx.db,
      keys,
      workspaceId: config.TRELLIS_DEFAULT_WORKSPACE,
      configuredKey: config.TRELLIS_API_KEY,
      dataDir: ctx.dataDir,
    });
    ctx.logger.info("admin API key ready", { action: bootstrap.action, key_id: bootstrap.keyId });
    const authenticator = createAuthenticator({ keys });
    const http = createRestHandler({
      clients: ctx.clients,
      authenticator,
      idempotency,
      config,
      logger: ctx.logger,
      closing: ctx.closing,
      startedAt: new Date(),
      mode: ctx.mode,
      env: ctx.env,
    });

    let pruner: NodeJS.Timeout | undefined;
    const prune = () => {
      idempotency.prune().then(
        (n) => {
          if (n > 0) ctx.logger.debug("pruned idempotency records", { count: n });
        },
        (error: unknown) => ctx.logger.warn("pruning idempotency records failed", { error }),
      );
    };
    return {
      http,
      interceptors: [createAuthInterceptor({ authenticator })],
      // Embedded: the owning services' routes are on the same server already.
      ...(ctx.mode === "distributed"
        ? {
            routes: (router) =>
              registerForwarders(router, publicServices, ctx.clients, {
                defaultTimeoutMs: config.TRELLIS_UPSTREAM_TIMEOUT,
              }),
          }
        : {}),
      async start() {
        prune();
        pruner = setInterval(prune, pruneIntervalMs);
        pruner.unref();
      },
      async stop() {
        if (pruner) clearInterval(pruner);
      },
    };
  },
};
