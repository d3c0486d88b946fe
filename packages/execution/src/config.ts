/**
 * Settings of routing, read from the host's environment at start (validated;
 * a bad value stops the service with a message naming it). Both the adapters
 * service and the tasks service (which routes its own turns) read them.
 */
import { type ConfigOf, env, loadConfig } from "@trellis/runtime";

/** Environment variables routing reads. */
export const adaptersConfigSchema = {
  /** NATS with JetStream (distributed mode): the work queue and the heartbeats. */
  NATS_URL: env.string().default("nats://127.0.0.1:4222"),
  /** Subject / stream prefix shared with the workers. */
  TRELLIS_NATS_PREFIX: env.string().default("trellis"),
  /** Whether distributed mode places work on remote workers (off: in-process backends only). */
  TRELLIS_ADAPTERS_REMOTE: env.bool().default(true),
  /** Storage of the work-queue stream when this process creates it. */
  TRELLIS_ADAPTERS_WORK_STORAGE: env.enum(["file", "memory"]).default("file"),
  /** How long a canceled or timed-out backend may take to report before it is given up. */
  TRELLIS_ADAPTERS_GRACE: env.duration({ minMs: 0, maxMs: 600_000 }).default(2_000),
  /** A queued execution whose backend has no live worker this long fails (`backend_unavailable`). */
  TRELLIS_ADAPTERS_UNAVAILABLE_AFTER: env.duration({ minMs: 100, maxMs: 3_600_000 }).default(5_000),
  /** Placements of one execution at most, counting re-runs after lost workers. */
  TRELLIS_ADAPTERS_MAX_ATTEMPTS: env.int({ min: 1, max: 20 }).default(3),
};

/** Routing's validated settings. */
export type AdaptersConfig = ConfigOf<typeof adaptersConfigSchema>;

/** Reads {@link AdaptersConfig} from an environment. */
export function loadAdaptersConfig(
  source: Readonly<Record<string, string | undefined>>,
): AdaptersConfig {
  return loadConfig(adaptersConfigSchema, source);
}

/** The embedded worker hub's settings (`embeddedWorkerHub`), from routing's. */
export function hubOptions(config: AdaptersConfig) {
  return {
    graceMs: config.TRELLIS_ADAPTERS_GRACE,
    maxAttempts: config.TRELLIS_ADAPTERS_MAX_ATTEMPTS,
    unavailableAfterMs: config.TRELLIS_ADAPTERS_UNAVAILABLE_AFTER,
  };
}
