/**
 * The whole `main` of a worker process: configuration from the environment,
 * a clean stop on SIGINT / SIGTERM (running executions finish first, up to
 * the grace period).
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `NATS_URL` | NATS with JetStream | `nats://127.0.0.1:4222` |
 * | `TRELLIS_NATS_PREFIX` | the mesh's subject prefix | `trellis` |
 * | `TRELLIS_WORKER_ID` | this worker's id | backend, host, pid, random |
 * | `TRELLIS_WORKER_CAPACITY` | executions at once | 1 |
 * | `TRELLIS_WORKER_HEARTBEAT` | heartbeat interval | 1s |
 * | `TRELLIS_WORKER_GRACE` | how long running executions may finish at stop | 10s |
 * | `TRELLIS_WORKER_COST`, `TRELLIS_WORKER_LATENCY_MS` | routing hints | unknown |
 */
import { natsSecurityFromEnv } from "@trellis/eventlog";
import { createLogger, env, loadConfig, onShutdownSignals } from "@trellis/runtime";
import type { ExecutionAdapter } from "./types.js";
import { type AdapterWorker, runWorker } from "./worker.js";

/** Environment a worker process reads. */
export const workerConfigSchema = {
  NATS_URL: env.string().default("nats://127.0.0.1:4222"),
  TRELLIS_NATS_PREFIX: env.string().default("trellis"),
  TRELLIS_WORKER_ID: env.string().optional(),
  TRELLIS_WORKER_CAPACITY: env.int({ min: 1, max: 10_000 }).default(1),
  TRELLIS_WORKER_HEARTBEAT: env.duration().default(1000),
  TRELLIS_WORKER_GRACE: env.duration().default(10_000),
  TRELLIS_WORKER_COST: env.int({ min: 0 }).optional(),
  TRELLIS_WORKER_LATENCY_MS: env.int({ min: 0 }).optional(),
};

/**
 * Run `adapter` as a worker until a shutdown signal.
 *
 * @example
 *   // my-worker.ts
 *   await runWorkerMain(defineAdapter({ backendId: "my-bot", capabilities, run }));
 */
export async function runWorkerMain(
  adapter: ExecutionAdapter,
  source: NodeJS.ProcessEnv = process.env,
): Promise<AdapterWorker> {
  const logger = createLogger({ service: `adapter-${adapter.backendId}` });
  try {
    const config = loadConfig(workerConfigSchema, source);
    const worker = await runWorker({
      adapter,
      servers: config.NATS_URL,
      security: natsSecurityFromEnv(source),
      prefix: config.TRELLIS_NATS_PREFIX,
      capacity: config.TRELLIS_WORKER_CAPACITY,
      heartbeatMs: config.TRELLIS_WORKER_HEARTBEAT,
      logger,
      ...(config.TRELLIS_WORKER_ID ? { workerId: config.TRELLIS_WORKER_ID } : {}),
      hints: {
        ...(config.TRELLIS_WORKER_COST !== undefined
          ? { costPerExecution: config.TRELLIS_WORKER_COST }
          : {}),
        ...(config.TRELLIS_WORKER_LATENCY_MS !== undefined
          ? { latencyMs: config.TRELLIS_WORKER_LATENCY_MS }
          : {}),
      },
    });
    onShutdownSignals(() => worker.stop({ graceMs: config.TRELLIS_WORKER_GRACE }), { logger });
    process.stdout.write(`worker ${worker.workerId} ready\n`);
    return worker;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`adapter worker ${adapter.backendId}: cannot start: ${message}\n`);
    process.exit(1);
  }
}
