/**
 * The environment each long-running `trellis` command reads, apart from the
 * commands so that they load it (and @trellis/runtime's validator) only once
 * their arguments are good, and a malformed variable is named before any
 * service is loaded.
 */
import { DEFAULT_EVENT_WINDOW } from "@trellis/eventlog/defaults";
import { DEFAULT_CONSUMER_POSITION_FLUSH_MS } from "@trellis/platform/defaults";
import { env } from "@trellis/runtime";
import {
  DEFAULT_CHECKPOINT_INTERVAL_MS,
  DEFAULT_CHECKPOINT_WAL_BYTES,
} from "@trellis/storage/defaults";
import { defaultMeshTogether } from "../mesh-groups.js";

export { loadConfig } from "@trellis/runtime";

// The packages' defaults from their light entry points: checking the
// settings loads no service.
const consumerPositionFlushMs = DEFAULT_CONSUMER_POSITION_FLUSH_MS;
const eventWindow = DEFAULT_EVENT_WINDOW;
const checkpointWalMb = DEFAULT_CHECKPOINT_WAL_BYTES / (1024 * 1024);
const checkpointIntervalMs = DEFAULT_CHECKPOINT_INTERVAL_MS;

/** Env of embedded mode (`trellis dev`), validated at start. */
export const devConfigSchema = {
  TRELLIS_PORT: env.port().default(8080),
  TRELLIS_HOST: env.string().default("127.0.0.1"),
  TRELLIS_DATA_DIR: env.string().default(".trellis"),
  /** How long durable-consumer positions may wait before they are written (0: every ack). */
  TRELLIS_CONSUMER_POSITION_FLUSH: env
    .duration({ minMs: 0, maxMs: 60_000 })
    .default(consumerPositionFlushMs),
  /** Events the in-process log keeps in memory; older reads go to the outbox table. */
  TRELLIS_EVENT_WINDOW: env.int({ min: 100, max: 10_000_000 }).default(eventWindow),
  /** Checkpoint the database once this many MiB of WAL were written since the last (0: no size bound). */
  TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB: env.int({ min: 0, max: 65_536 }).default(checkpointWalMb),
  /** Checkpoint the database this long after the last if anything was written (0: no time bound). */
  TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL: env
    .duration({ minMs: 0, maxMs: 86_400_000 })
    .default(checkpointIntervalMs),
  /** Vacuum and analyze the database's tables when autovacuum would. */
  TRELLIS_EMBEDDED_VACUUM: env.bool().default(true),
};

/** Env of `trellis mesh`. */
export const meshConfigSchema = {
  DATABASE_URL: env.url({ protocols: ["postgres", "postgresql"] }).secret(),
  NATS_URL: env.string().default("nats://127.0.0.1:4222"),
  TRELLIS_NATS_PREFIX: env.string().default("trellis"),
  TRELLIS_PORT: env.port().default(8080),
  /** Built-in adapter workers (the harness backend over OpenAI / Anthropic) to run beside the services. */
  TRELLIS_MESH_ADAPTER_WORKERS: env.int({ min: 0, max: 16 }).default(1),
  /**
   * Services that share a process (`parseTogether` in src/mesh.ts): by
   * default chat runs in the tasks process, so a chat turn's call to tasks
   * costs no hop; `none` gives every service a process of its own.
   */
  TRELLIS_MESH_TOGETHER: env.string().default(defaultMeshTogether),
};

/** Environment `trellis migrate` reads. */
export const migrateConfigSchema = {
  DATABASE_URL: env.url({ protocols: ["postgres", "postgresql"] }).secret(),
  /** How long to keep retrying an unreachable PostgreSQL before giving up. */
  TRELLIS_STARTUP_TIMEOUT: env.duration().default(60_000),
};
