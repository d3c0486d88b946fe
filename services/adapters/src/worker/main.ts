/**
 * The built-in adapter worker as a process (`trellis serve adapter-worker`,
 * or `TRELLIS_SERVICE=adapter-worker trellis serve`): configuration from the
 * environment, a clean drain on SIGTERM / SIGINT, one clear line and exit
 * code 1 when it cannot start.
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `PORT` (or `TRELLIS_PORT`), `TRELLIS_HOST` | gRPC health endpoint | 7005, 127.0.0.1 |
 * | `NATS_URL`, `TRELLIS_NATS_PREFIX` | the mesh's NATS | `nats://127.0.0.1:4222`, `trellis` |
 * | `TRELLIS_WORKER_BACKENDS` | backends to run (`harness`, `scripted`) | `harness` |
 * | `TRELLIS_WORKER_CAPACITY`, `_HEARTBEAT`, `_GRACE`, `_ID`, `_COST`, `_LATENCY_MS` | per backend, as every SDK worker | 1, 1s, 10s |
 * | `DATABASE_URL` | the harness's tool-run ledger (exactly-once across workers) | in memory |
 * | `TRELLIS_HARNESS_TOOLS` | modules exporting the harness's tools | none |
 * | `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` | model providers | none: harness turns fail `provider_authentication` |
 */
import { createLogger, onShutdownSignals } from "@trellis/runtime";
import { startAdapterWorker } from "./adapter-worker.js";
import { ADAPTER_WORKER, type AdapterWorkerConfig, loadAdapterWorkerConfig } from "./config.js";

/**
 * Run the built-in worker until a shutdown signal. Prints
 * `adapter-worker health on <url>` once the health endpoint listens and
 * `worker <id> ready` per backend once it pulls work.
 */
export async function runAdapterWorkerMain(
  source: Readonly<Record<string, string | undefined>> = process.env,
): Promise<void> {
  const logger = createLogger({ service: ADAPTER_WORKER });
  const fail = (error: unknown): never => {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`trellis-${ADAPTER_WORKER}: cannot start: ${message}\n`);
    process.exit(1);
  };
  let config: AdapterWorkerConfig;
  try {
    config = loadAdapterWorkerConfig(source);
  } catch (error) {
    return fail(error);
  }
  const shutdown = new AbortController();
  const starting = startAdapterWorker({
    config,
    env: source,
    logger,
    signal: shutdown.signal,
    onListening: (address) => process.stdout.write(`${ADAPTER_WORKER} health on ${address.url}\n`),
  });
  // Installed before the start completes: a signal while waiting for NATS ends
  // the wait, and one during the start stops what was started.
  onShutdownSignals(
    async () => {
      shutdown.abort();
      const running = await starting.catch(() => undefined);
      await running?.stop();
    },
    { logger },
  );
  try {
    const running = await starting;
    process.stdout.write(running.workers.map((w) => `worker ${w.workerId} ready\n`).join(""));
  } catch (error) {
    // Stopped by a signal before it was up: the signal handler exits.
    if (!shutdown.signal.aborted) fail(error);
  }
}
