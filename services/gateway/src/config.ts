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
  /** Public base URL advertised in the agent card (default: from the request's Host). */
  TRELLIS_PUBLIC_URL: env.url({ protocols: ["http", "https"] }).optional(),
};

/** The gateway's typed configuration. */
export type GatewayConfig = ConfigOf<typeof gatewayConfigSchema>;

/** Read and validate the gateway's configuration. */
export function loadGatewayConfig(
  source: Readonly<Record<string, string | undefined>>,
): GatewayConfig {
  return loadConfig(gatewayConfigSchema, source);
}
