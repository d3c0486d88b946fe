/**
 * What a REST route handler is given.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Caller, MeshCredentials, Mode, ServiceClients } from "@trellis/platform";
import type { HttpRequest, HttpResponse, Logger } from "@trellis/runtime";
import type { Authenticator } from "../auth/authenticator.js";
import type { ClientSourceOf } from "../auth/client-source.js";
import type { Rule } from "../auth/scope-table.js";
import type { GatewayConfig } from "../config.js";
import type { AgentPolicyStore } from "../policy/store.js";
import type { Admission, GuardedOperation, QuotaReport } from "../quota/admission.js";
import type { IdempotencyStore } from "../store/idempotency-store.js";
import type { KeyStore } from "../store/key-store.js";
import type { OAuthClientStore } from "../store/oauth-client-store.js";
import type { MeshHealthProbe } from "../topology/mesh-health.js";
import type { SessionDetailCache } from "../ui/session-detail-cache.js";
import type { WebhookConfig } from "../webhooks/config.js";
import type { WebhookDispatcher } from "../webhooks/dispatcher.js";
import type { WebhookStore } from "../webhooks/store.js";
import type { RestResponse } from "./io.js";

/**
 * What a route handler may use: the gateway's dependencies without the
 * pipeline's own (idempotency store, mesh credentials, mode and environment,
 * the limits' admission). Built once per gateway from {@link GatewayDeps}
 * (`ports.ts`).
 */
export interface RoutePorts {
  clients: ServiceClients;
  config: GatewayConfig;
  logger: Logger;
  /** Fires at shutdown: open streams end. */
  closing: AbortSignal;
  /** When this gateway started (the agent card's timestamps). */
  startedAt: Date;
  /** Long streams check the caller's credential again at each heartbeat. */
  authenticator: Authenticator;
  /** API keys (key management routes). */
  keys: KeyStore;
  /** OAuth clients (key management routes). */
  oauthClients: OAuthClientStore;
  /** Log-derived state of recently read session details (`GET /v1/ui/sessions/{id}`). */
  sessionDetails: SessionDetailCache;
  /** The mesh as this gateway sees it (`GET /v1/health`). */
  meshHealth: Pick<MeshHealthProbe, "check">;
  /** The quotas that apply and their usage (`GET /v1/quotas`); none when absent. */
  limits?: Pick<RouteLimits, "report">;
  /** Agent policies of credentials (`policy/`); creating a restricted credential needs it. */
  agentPolicies?: AgentPolicyStore;
  /** Webhook subscriptions and delivery (`webhooks/`); the routes answer 503 when absent. */
  webhooks?: GatewayDeps["webhooks"];
}

/** Everything the REST surface depends on; built once in the service factory. */
export interface GatewayDeps {
  clients: ServiceClients;
  authenticator: Authenticator;
  /** The source failed authentication counts against (`auth/client-source.ts`); default the peer. */
  clientSource?: ClientSourceOf;
  idempotency: IdempotencyStore;
  config: GatewayConfig;
  logger: Logger;
  /** Fires at shutdown: open streams end. */
  closing: AbortSignal;
  /** When this gateway started (the agent card's timestamps). */
  startedAt: Date;
  mode: Mode;
  /** The host's environment (where other services are, in distributed mode). */
  env: Readonly<Record<string, string | undefined>>;
  /** API keys (key management routes). */
  keys: KeyStore;
  /** OAuth clients (key management routes). */
  oauthClients: OAuthClientStore;
  /** Service credentials, for requests handed on to another service's REST handler. */
  mesh: MeshCredentials;
  /** Log-derived state of recently read session details (`GET /v1/ui/sessions/{id}`). */
  sessionDetails: SessionDetailCache;
  /** Rate limits and hard quotas on writes (`quota/limits.ts`); none when absent. */
  limits?: RouteLimits;
  /** Agent policies of credentials (`policy/`); creating a restricted credential needs it. */
  agentPolicies?: AgentPolicyStore;
  /** Webhook subscriptions and delivery (`webhooks/`); the routes answer 503 when absent. */
  webhooks?: { store: WebhookStore; dispatcher: WebhookDispatcher; config: WebhookConfig };
}

/**
 * What the REST surface uses of the rate limits and hard quotas; the
 * implementation is `RequestLimits` (`quota/limits.ts`).
 */
export interface RouteLimits {
  /** The route with its handler behind the limits. */
  wrap(route: RouteSpec): RouteSpec;
  /** Run `work`, a call of `route`, behind the limits. */
  limit(
    route: RouteSpec,
    call: RestCall,
    work: () => Promise<RestResponse | undefined>,
  ): Promise<RestResponse | undefined>;
  /** Check and count one operation of `caller` (any transport). */
  admit(
    caller: Caller,
    requestId: string,
    operation: GuardedOperation,
    agentOfSession: (sessionId: string) => Promise<string>,
  ): Promise<Admission>;
  /** The quotas and limits that apply to a workspace, with its current usage. */
  report(workspaceId: string, actorId?: string): Promise<QuotaReport[]>;
}

/** One REST call being served. */
export interface RestCall {
  req: HttpRequest;
  res: HttpResponse;
  requestId: string;
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  /** The authenticated caller (an anonymous one on public routes). */
  caller: Caller;
  /** Parsed JSON body of a write (undefined when empty). */
  body: JsonValue | undefined;
  /**
   * The idempotency key to hand to internal services: derived from the
   * client's Idempotency-Key and its scope, so keys of different callers never
   * collide downstream. Empty when the client sent none.
   */
  idempotencyKey: string;
  /** Options for a call to an internal service on behalf of this request. */
  options(overrides?: { streaming?: boolean }): CallOptions;
  /** What the handler may use of the gateway. */
  ports: RoutePorts;
}

/** A REST route. */
export interface RouteSpec {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Path pattern, e.g. `/v1/sessions/{session_id}`. */
  path: string;
  /**
   * Who may call it, declared here and nowhere else (`auth/scope-table.ts`
   * says what each rule means; `routes/rules.ts` is the table derived from
   * the routes): `public` skips the version header and authentication.
   */
  scope: Rule;
  /**
   * A protocol operation this gateway does not serve (`harn-surface.ts`,
   * scope `authenticated`): it answers 501 `not_implemented`.
   */
  notServed?: boolean;
  /** A non-idempotent write: takes `Idempotency-Key`. */
  write?: boolean;
  /** Writes its own (streaming) response and resolves to undefined. */
  stream?: boolean;
  /**
   * Served by another service's REST handler (`receipts`): the gateway checks
   * version, key and scope, then hands the request on (see `proxy.ts`).
   */
  delegateTo?: string;
  /**
   * With {@link delegateTo}: checks the gateway makes before handing the
   * request on (the task named in the path is visible to the caller). The
   * call's body is not read yet.
   */
  beforeHandOn?(call: RestCall): Promise<void>;
  handle(call: RestCall): Promise<RestResponse | undefined>;
}
