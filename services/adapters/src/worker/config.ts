/**
 * Settings of the built-in adapter worker process (`trellis serve
 * adapter-worker`), read from the environment once at start and validated:
 * a bad value stops the process with a message naming the variable.
 *
 * The worker protocol settings are the SDK's (`NATS_URL`,
 * `TRELLIS_NATS_PREFIX`, `TRELLIS_WORKER_*`); the model providers' keys and
 * base URLs are the harness's (`OPENAI_*`, `ANTHROPIC_*`,
 * `TRELLIS_HARNESS_PROVIDER_*`, read by `harnessProvidersFromEnv`).
 */
import { workerConfigSchema } from "@trellis/adapter-sdk";
import { HARNESS_BACKEND, SCRIPTED_BACKEND } from "@trellis/execution";
import { type ConfigOf, env, loadConfig, TrellisError } from "@trellis/runtime";

/** The name the worker runs under (`trellis serve adapter-worker`, logs, health). */
export const ADAPTER_WORKER = "adapter-worker";

/** Default port of its gRPC health endpoint. */
export const ADAPTER_WORKER_PORT = 7005;

/** Backends the built-in worker can run. */
export const BUILTIN_WORKER_BACKENDS: readonly string[] = [HARNESS_BACKEND, SCRIPTED_BACKEND];

/** Environment variables the built-in worker reads. */
export const adapterWorkerConfigSchema = {
  ...workerConfigSchema,
  /** Port of the health endpoint (as every distributed service; 0 = any free port). */
  PORT: env.port().optional(),
  /** Same as PORT, for setups that name it the embedded way; PORT wins. */
  TRELLIS_PORT: env.port().optional(),
  /** Interface the health endpoint binds (0.0.0.0 in a container). */
  TRELLIS_HOST: env.string().default("127.0.0.1"),
  /**
   * PostgreSQL of the harness's tool-run ledger (schema `harness`), shared by
   * every worker so an approved tool call runs once across the fleet. Unset:
   * an in-memory ledger, exact within this process only.
   */
  DATABASE_URL: env
    .url({ protocols: ["postgres", "postgresql"] })
    .secret()
    .optional(),
  DATABASE_POOL_SIZE: env.int({ min: 1, max: 200 }).default(4),
  /** How long to keep retrying NATS / PostgreSQL at start before giving up. */
  TRELLIS_STARTUP_TIMEOUT: env.duration().default(60_000),
  /**
   * Comma-separated backends to run: `harness` (default), `scripted`. The
   * mesh's routers (tasks, adapters) run the scripted backend in process and
   * refuse remote workers of it, so a scripted worker only serves routers
   * built without it (`createRoutedExecutor({ adapters: [] })`).
   */
  TRELLIS_WORKER_BACKENDS: env.string().default(HARNESS_BACKEND),
  /**
   * Comma-separated module paths whose `tools` (or default) export is an
   * array of harness tools (`HarnessTool`); agents name the ones they use.
   */
  TRELLIS_HARNESS_TOOLS: env.string().optional(),
  /** Storage of the work-queue stream if this worker creates it. */
  TRELLIS_ADAPTERS_WORK_STORAGE: env.enum(["file", "memory"]).default("file"),
};

/** The built-in worker's validated settings. */
export type AdapterWorkerConfig = ConfigOf<typeof adapterWorkerConfigSchema> & {
  /** The backends to run, parsed from `TRELLIS_WORKER_BACKENDS`. */
  readonly backends: readonly string[];
  /** The health port (PORT, else TRELLIS_PORT, else 7005). */
  readonly port: number;
};

/**
 * Reads {@link AdapterWorkerConfig}.
 *
 * @throws TrellisError `config_invalid` naming the variable.
 */
export function loadAdapterWorkerConfig(
  source: Readonly<Record<string, string | undefined>>,
): AdapterWorkerConfig {
  const config = loadConfig(adapterWorkerConfigSchema, source);
  const backends = [
    ...new Set(
      config.TRELLIS_WORKER_BACKENDS.split(",")
        .map((b) => b.trim())
        .filter((b) => b !== ""),
    ),
  ];
  const unknown = backends.filter((b) => !BUILTIN_WORKER_BACKENDS.includes(b));
  if (backends.length === 0 || unknown.length > 0) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `invalid configuration: TRELLIS_WORKER_BACKENDS must list backends among ${BUILTIN_WORKER_BACKENDS.join(", ")}${unknown.length ? `, got unknown ${unknown.map((b) => JSON.stringify(b)).join(", ")}` : ""}`,
      param: "TRELLIS_WORKER_BACKENDS",
    });
  }
  return Object.freeze({
    ...config,
    backends,
    port: config.PORT ?? config.TRELLIS_PORT ?? ADAPTER_WORKER_PORT,
  });
}
