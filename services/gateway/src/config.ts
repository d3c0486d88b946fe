/**
 * The gateway's settings, read from the host's environment (`ctx.env`) once
 * when the service is built.
 */
import { type ConfigOf, env, loadConfig } from "@trellis/runtime";

/** Environment the gateway reads. */
export const gatewayConfigSchema = {
  /**
   * The admin key of the default workspace. Embedded and distributed: when
   * unset and no admin key exists yet, one is generated and printed once (and
   * written to `<data dir>/admin-api-key` in embedded mode).
   */
  TRELLIS_API_KEY: env.string().secret().optional(),
  /** The workspace the admin key is bound to. */
  TRELLIS_DEFAULT_WORKSPACE: env.string().default("default"),
  /** Interval of SSE heartbeat comments (`: ping`). */
  TRELLIS_SSE_HEARTBEAT: env.duration({ minMs: 10, maxMs: 300_000 }).default(15_000),
  /**
   * Interval of the health watchdog's sweeps: every session with an active turn
   * is judged against its health policy this often, observed or not
   * (`0`: no background enforcement; reads and health streams still enforce).
   */
  TRELLIS_HEALTH_SWEEP: env.duration({ minMs: 0, maxMs: 600_000 }).default(5_000),
  /** How long idempotency records are kept (the spec's minimum is 24 h). */
  TRELLIS_IDEMPOTENCY_TTL: env.duration({ minMs: 24 * 3_600_000 }).default(24 * 3_600_000),
  /** How long a retry waits for an in-flight request with the same key before 409 `conflict`. */
  TRELLIS_IDEMPOTENCY_WAIT: env.duration({ minMs: 0, maxMs: 120_000 }).default(10_000),
  /** Lease of an in-flight idempotency claim (a crashed owner's claim is taken over after it). */
  TRELLIS_IDEMPOTENCY_LEASE: env.duration({ minMs: 1_000 }).default(60_000),
  /** Largest accepted request body. */
  TRELLIS_MAX_BODY_BYTES: env.int({ min: 1024 }).default(16 * 1024 * 1024),
  /** Timeout of calls to internal services. */
  TRELLIS_UPSTREAM_TIMEOUT: env.duration({ minMs: 100 }).default(30_000),
  /**
   * The service gRPC workers' WorkerService calls are forwarded to (distributed):
   * `tasks` (its routers hand their turns to the streams they hold, in
   * process) or `adapters` (a relay: every turn over NATS).
   */
  TRELLIS_GATEWAY_WORKERS_TO: env.enum(["tasks", "adapters"]).default("tasks"),
  /** Public base URL advertised in the agent card (default: from the request's Host). */
  TRELLIS_PUBLIC_URL: env.url({ protocols: ["http", "https"] }).optional(),

  // OAuth2 client credentials (auth/tokens.ts, auth/signing-keys.ts).
  /** `iss` of the gateway's access tokens (default: TRELLIS_PUBLIC_URL, else `urn:trellis:gateway`). */
  TRELLIS_OAUTH_ISSUER: env.string().optional(),
  /** `aud` of the gateway's access tokens, and what external tokens must name by default. */
  TRELLIS_OAUTH_AUDIENCE: env.string().default("trellis"),
  /** Lifetime of an access token. */
  TRELLIS_OAUTH_TOKEN_TTL: env
    .duration({ minMs: 60_000, maxMs: 24 * 3_600_000 })
    .default(15 * 60_000),
  /** Private key the tokens are signed with: PKCS#8 PEM or private JWK, Ed25519 or P-256. */
  TRELLIS_OAUTH_SIGNING_KEY: env.string().secret().optional(),
  /** A file holding that key (a mounted Kubernetes Secret). */
  TRELLIS_OAUTH_SIGNING_KEY_FILE: env.string().optional(),
  /** Public keys (JWKS) of retired signing keys whose tokens are still accepted. */
  TRELLIS_OAUTH_PREVIOUS_KEYS: env.string().optional(),
  /** An external issuer whose tokens are accepted (`iss`); needs the JWKS URL too. */
  TRELLIS_OAUTH_EXTERNAL_ISSUER: env.string().optional(),
  /** Where that issuer publishes its keys. */
  TRELLIS_OAUTH_EXTERNAL_JWKS_URL: env.url({ protocols: ["http", "https"] }).optional(),
  /** The `aud` external tokens must carry (default: TRELLIS_OAUTH_AUDIENCE). */
  TRELLIS_OAUTH_EXTERNAL_AUDIENCE: env.string().optional(),
  /** The claim of an external token naming its workspace. */
  TRELLIS_OAUTH_EXTERNAL_WORKSPACE_CLAIM: env.string().default("workspace"),
  /** Workspace of external tokens without that claim (unset: they are refused). */
  TRELLIS_OAUTH_EXTERNAL_DEFAULT_WORKSPACE: env.string().optional(),
};

/** The gateway's typed configuration. */
export type GatewayConfig = ConfigOf<typeof gatewayConfigSchema>;

/** Read and validate the gateway's configuration. */
export function loadGatewayConfig(
  source: Readonly<Record<string, string | undefined>>,
): GatewayConfig {
  return loadConfig(gatewayConfigSchema, source);
}
