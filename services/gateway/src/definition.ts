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
import { WorkerService } from "@trellis/contracts/adapters";
import type { ServiceDefinition, ServiceModule } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { TrellisError } from "@trellis/runtime";
import { createA2aHandler } from "./a2a/http.js";
import {
  AuthThrottle,
  authThrottleOptionsFromEnv,
  withAuthThrottle,
} from "./auth/auth-throttle.js";
import { createAuthenticator } from "./auth/authenticator.js";
import { bootstrapAdminKey } from "./auth/bootstrap.js";
import { clientSourceFromEnv } from "./auth/client-source.js";
import { ApiKeyCache } from "./auth/key-cache.js";
import { createOAuthHandler } from "./auth/oauth-endpoint.js";
import { loadSigningKeys } from "./auth/signing-keys.js";
import { AccessTokens, type ExternalIssuerSettings } from "./auth/tokens.js";
import { type GatewayConfig, loadGatewayConfig } from "./config.js";
import { createAuthInterceptor } from "./grpc/auth-interceptor.js";
import { registerForwarders } from "./grpc/forwarders.js";
import { publicServices } from "./grpc/public-services.js";
import { registerQuotaService } from "./grpc/quotas.js";
import { registerUiEventService } from "./grpc/ui-events.js";
import { HealthWatchdog } from "./health/watchdog.js";
import type { GatewayDeps } from "./http/context.js";
import { routePortsOf } from "./http/ports.js";
import { createRestHandler } from "./http/rest-handler.js";
import { createTaskReceiptInterceptor } from "./http/routes/task-receipts.js";
import { withAgentPolicies } from "./policy/authenticate.js";
import { createAgentPolicyInterceptor } from "./policy/grpc.js";
import { AgentPolicyStore, agentPolicyMigrations } from "./policy/store.js";
import { loadLimitsConfig } from "./quota/config.js";
import { createLimitsInterceptor } from "./quota/interceptor.js";
import { RequestLimits } from "./quota/limits.js";
import { quotaMigrations } from "./quota/schema.js";
import { PostgresQuotaCounters } from "./quota/store.js";
import { PostgresIdempotencyStore } from "./store/idempotency-store.js";
import { PostgresKeyStore } from "./store/key-store.js";
import { PostgresOAuthClientStore } from "./store/oauth-client-store.js";
import { gatewayMigrations } from "./store/schema.js";
import { withUiAssets } from "./ui/assets.js";
import { SessionDetailCache } from "./ui/session-detail-cache.js";
import { loadWebhookConfig, loadWebhookSecretBox } from "./webhooks/config.js";
import { WebhookDispatcher } from "./webhooks/dispatcher.js";
import { webhookMigrations } from "./webhooks/schema.js";
import { WebhookStore } from "./webhooks/store.js";
import { createWebSocketEndpoint } from "./ws/upgrade.js";

// Expired idempotency records are deleted this often.
const pruneIntervalMs = 15 * 60_000;

/** The external issuer whose tokens are accepted, if one is configured. */
function externalIssuerOf(config: GatewayConfig): ExternalIssuerSettings | undefined {
  const issuer = config.TRELLIS_OAUTH_EXTERNAL_ISSUER;
  const jwksUrl = config.TRELLIS_OAUTH_EXTERNAL_JWKS_URL;
  if (issuer === undefined && jwksUrl === undefined) return undefined;
  if (issuer === undefined || jwksUrl === undefined) {
    throw new TrellisError({
      reason: "config_invalid",
      message:
        "TRELLIS_OAUTH_EXTERNAL_ISSUER and TRELLIS_OAUTH_EXTERNAL_JWKS_URL go together: set both or neither",
      param:
        issuer === undefined ? "TRELLIS_OAUTH_EXTERNAL_ISSUER" : "TRELLIS_OAUTH_EXTERNAL_JWKS_URL",
    });
  }
  return {
    issuer,
    jwksUrl,
    audience: config.TRELLIS_OAUTH_EXTERNAL_AUDIENCE ?? config.TRELLIS_OAUTH_AUDIENCE,
    workspaceClaim: config.TRELLIS_OAUTH_EXTERNAL_WORKSPACE_CLAIM,
    defaultWorkspace: config.TRELLIS_OAUTH_EXTERNAL_DEFAULT_WORKSPACE,
  };
}

/** The gateway service, runnable embedded or as its own process. */
export const gatewayService: ServiceDefinition = {
  name: "gateway",
  // The one public door: it authenticates callers itself (API keys, OAuth2).
  public: true,
  provides: [],
  migrations: {
    ...gatewayMigrations,
    ...quotaMigrations,
    ...webhookMigrations,
    ...agentPolicyMigrations,
  },
  defaultPort: DEFAULT_PORTS.gateway ?? 0,
  async create(ctx) {
    const config = loadGatewayConfig(ctx.env);
    const keys = new PostgresKeyStore(ctx.db, ctx.schema);
    const idempotency = new PostgresIdempotencyStore(ctx.db, ctx.schema);
    const quotaCounters = new PostgresQuotaCounters(ctx.db, ctx.schema);
    // On PGlite the database lives in this process: this gateway is the only replica.
    const limitsConfig = loadLimitsConfig(ctx.env, { onlyReplica: ctx.db.kind === "pglite" });
    const limits = new RequestLimits(quotaCounters, limitsConfig, (error) =>
      ctx.logger.warn("writing rate counters failed; retrying", { error: String(error) }),
    );
    const bootstrap = await bootstrapAdminKey({
      db: ctx.db,
      keys,
      workspaceId: config.TRELLIS_DEFAULT_WORKSPACE,
      configuredKey: config.TRELLIS_API_KEY,
      dataDir: ctx.dataDir,
    });
    ctx.logger.info("admin API key ready", { action: bootstrap.action, key_id: bootstrap.keyId });
    const oauthClients = new PostgresOAuthClientStore(ctx.db, ctx.schema);
    const signingKeys = await loadSigningKeys({
      settings: config,
      mode: ctx.mode,
      db: ctx.db,
      schema: ctx.schema,
    });
    const external = externalIssuerOf(config);
    const tokens = new AccessTokens(
      signingKeys,
      {
        issuer:
          config.TRELLIS_OAUTH_ISSUER ??
          config.TRELLIS_PUBLIC_URL?.replace(/\/+$/, "") ??
          "urn:trellis:gateway",
        audience: config.TRELLIS_OAUTH_AUDIENCE,
        ttlMs: config.TRELLIS_OAUTH_TOKEN_TTL,
        external,
      },
      oauthClients,
    );
    ctx.logger.info("oauth2 ready", {
      issuing: tokens.canIssue,
      signing_keys: signingKeys.source,
      external_issuer: external?.issuer ?? null,
    });
    if (!tokens.canIssue) {
      ctx.logger.warn(
        "no TRELLIS_OAUTH_SIGNING_KEY: this gateway issues no OAuth2 access tokens (API keys and external tokens still work)",
      );
    }
    const keyCache = await ApiKeyCache.listen(ctx.db);
    const agentPolicies = new AgentPolicyStore(ctx.db, ctx.schema);
    // One count per source for every way of failing to authenticate.
    const throttle = new AuthThrottle(authThrottleOptionsFromEnv(ctx.env));
    // Behind trusted proxies (TRELLIS_TRUSTED_PROXIES), the X-Forwarded-For client.
    const clientSource = clientSourceFromEnv(ctx.env);
    const authenticator = withAuthThrottle(
      withAgentPolicies(createAuthenticator({ keys, keyCache, tokens }), agentPolicies),
      throttle,
    );
    const oauth = createOAuthHandler({
      clients: oauthClients,
      tokens,
      logger: ctx.logger,
      throttle,
      clientSource,
    });
    const webhookConfig = loadWebhookConfig(ctx.env);
    const webhookBox = await loadWebhookSecretBox({
      mode: ctx.mode,
      material: webhookConfig.TRELLIS_WEBHOOK_SECRET_KEY,
      dataDir: ctx.dataDir,
      db: ctx.db,
    });
    if (!webhookBox.canSeal) {
      ctx.logger.warn(
        "no TRELLIS_WEBHOOK_SECRET_KEY: webhook signing secrets are stored as given (set it to encrypt them at rest)",
      );
    }
    const webhookStore = new WebhookStore(ctx.db, ctx.schema, webhookBox);
    const webhooks = {
      store: webhookStore,
      config: webhookConfig,
      dispatcher: new WebhookDispatcher({
        store: webhookStore,
        eventLog: ctx.eventLog,
        logger: ctx.logger,
        config: webhookConfig,
      }),
    };
    const deps: GatewayDeps = {
      clients: ctx.clients,
      authenticator,
      clientSource,
      idempotency,
      config,
      logger: ctx.logger,
      closing: ctx.closing,
      startedAt: new Date(),
      mode: ctx.mode,
      env: ctx.env,
      keys,
      oauthClients,
      mesh: ctx.mesh,
      limits,
      webhooks,
      agentPolicies,
      sessionDetails: new SessionDetailCache({ eventLog: ctx.eventLog }),
    };
    const rest = createRestHandler(deps);
    const a2a = createA2aHandler(deps);
    const watchdog =
      config.TRELLIS_HEALTH_SWEEP > 0
        ? new HealthWatchdog({
            clients: ctx.clients,
            logger: ctx.logger,
            db: ctx.db,
            intervalMs: config.TRELLIS_HEALTH_SWEEP,
          })
        : undefined;
    const webSockets = createWebSocketEndpoint(deps);
    const http: NonNullable<ServiceModule["http"]> = async (req, res) =>
      (await oauth(req, res)) || (await a2a(req, res)) || rest(req, res);

    let pruner: NodeJS.Timeout | undefined;
    const prune = () => {
      quotaCounters
        .prune()
        .catch((error: unknown) => ctx.logger.warn("pruning quota counters failed", { error }));
      // Finished webhook deliveries are kept a week for `GET /v1/webhooks/{id}/deliveries`.
      webhookStore
        .prune(new Date(Date.now() - 7 * 24 * 3_600_000))
        .catch((error: unknown) => ctx.logger.warn("pruning webhook deliveries failed", { error }));
      idempotency.prune().then(
        (n) => {
          if (n > 0) ctx.logger.debug("pruned idempotency records", { count: n });
        },
        (error: unknown) => ctx.logger.warn("pruning idempotency records failed", { error }),
      );
    };
    return {
      http: withUiAssets(http),
      upgrade: webSockets.upgrade,
      // Auth first: the limits read the caller it sets.
      interceptors: [
        createAuthInterceptor({ authenticator, clientSource }),
        createAgentPolicyInterceptor(ctx.clients),
        createLimitsInterceptor(limits, ctx.clients),
        // GetTask / ListTasks answers get their receipt_id as REST's do.
        createTaskReceiptInterceptor(routePortsOf(deps)),
      ],
      routes: (router) => {
        // The gateway's own RPC service (the UI event stream), in both modes.
        registerUiEventService(router, ctx.clients);
        registerQuotaService(router, limits);
        // Embedded: the owning services' routes are on the same server already.
        if (ctx.mode === "distributed") {
          registerForwarders(router, publicServices, ctx.clients, {
            defaultTimeoutMs: config.TRELLIS_UPSTREAM_TIMEOUT,
            // The tasks service's routers place turns on the streams it holds in process.
            owners: { [WorkerService.typeName]: config.TRELLIS_GATEWAY_WORKERS_TO },
          });
        }
      },
      async start() {
        prune();
        pruner = setInterval(prune, pruneIntervalMs);
        pruner.unref();
        webhooks.dispatcher.start();
        watchdog?.start();
      },
      async stop() {
        if (pruner) clearInterval(pruner);
        webSockets.close();
        await watchdog?.stop();
        await webhooks.dispatcher.stop();
        await keyCache.close();
        await limits.close();
      },
    };
  },
};
