/**
 * The embedded server of `trellis dev` (loaded only once the arguments and
 * the port are known to be good: `dev.ts`).
 */
import { resolve } from "node:path";
import {
  DEFAULT_CONSUMER_POSITION_FLUSH_MS,
  DEFAULT_EVENT_WINDOW,
  type EmbeddedTrellis,
  startEmbedded,
} from "@trellis/platform";
import { createLogger, env, initTelemetry, loadConfig, onShutdownSignals } from "@trellis/runtime";
import { DEFAULT_CHECKPOINT_INTERVAL_MS, DEFAULT_CHECKPOINT_WAL_BYTES } from "@trellis/storage";
import { assertPortFree, isAddressInUse, PortInUseError } from "../ports.js";
import { allServices } from "../services.js";
import { createProgress } from "./progress.js";

/** Env of embedded mode, validated at start. */
export const devConfigSchema = {
  TRELLIS_PORT: env.port().default(8080),
  TRELLIS_HOST: env.string().default("127.0.0.1"),
  TRELLIS_DATA_DIR: env.string().default(".trellis"),
  /** How long durable-consumer positions may wait before they are written (0: every ack). */
  TRELLIS_CONSUMER_POSITION_FLUSH: env
    .duration({ minMs: 0, maxMs: 60_000 })
    .default(DEFAULT_CONSUMER_POSITION_FLUSH_MS),
  /** Events the in-process log keeps in memory; older reads go to the outbox table. */
  TRELLIS_EVENT_WINDOW: env.int({ min: 100, max: 10_000_000 }).default(DEFAULT_EVENT_WINDOW),
  /** Checkpoint the database once this many MiB of WAL were written since the last (0: no size bound). */
  TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB: env
    .int({ min: 0, max: 65_536 })
    .default(DEFAULT_CHECKPOINT_WAL_BYTES / (1024 * 1024)),
  /** Checkpoint the database this long after the last if anything was written (0: no time bound). */
  TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL: env
    .duration({ minMs: 0, maxMs: 86_400_000 })
    .default(DEFAULT_CHECKPOINT_INTERVAL_MS),
  /** Vacuum and analyze the database's tables when autovacuum would. */
  TRELLIS_EMBEDDED_VACUUM: env.bool().default(true),
};

/**
 * The services' environment under `trellis dev`. Bound to loopback, the
 * deployment is the developer's own machine: webhooks may target it
 * (`TRELLIS_WEBHOOKS_ALLOW_PRIVATE`, unless set), so a receiver on localhost
 * works out of the box. On any other address the guard stays on.
 */
export function devEnv(source: NodeJS.ProcessEnv, host: string): NodeJS.ProcessEnv {
  const loopback = host === "localhost" || host === "::1" || host.startsWith("127.");
  if (!loopback || source.TRELLIS_WEBHOOKS_ALLOW_PRIVATE !== undefined) return source;
  return { ...source, TRELLIS_WEBHOOKS_ALLOW_PRIVATE: "1" };
}

/** Run embedded until Ctrl-C; resolves with the exit code. */
export async function serveEmbedded(source: NodeJS.ProcessEnv): Promise<number> {
  const config = loadConfig(devConfigSchema, source);
  await assertPortFree(config.TRELLIS_HOST, config.TRELLIS_PORT, "TRELLIS_PORT");
  const dataDir = resolve(config.TRELLIS_DATA_DIR, "data");
  // Like every distributed process: the standard OTEL_* variables decide
  // what is exported; one service name for the whole process.
  const telemetry = initTelemetry({ serviceName: "trellis", env: source });
  const logger = createLogger({ service: "trellis" });
  let trellis: EmbeddedTrellis;
  const starting = createProgress().start(
    "Starting Trellis (embedded; the first start creates the database)",
  );
  try {
    trellis = await startEmbedded({
      services: allServices,
      env: devEnv(source, config.TRELLIS_HOST),
      dataDir,
      host: config.TRELLIS_HOST,
      port: config.TRELLIS_PORT,
      logger,
      consumerPositionFlushMs: config.TRELLIS_CONSUMER_POSITION_FLUSH,
      eventWindow: config.TRELLIS_EVENT_WINDOW,
      maintenance: {
        checkpointWalBytes: config.TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB * 1024 * 1024,
        checkpointIntervalMs: config.TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL,
        vacuum: config.TRELLIS_EMBEDDED_VACUUM,
      },
    });
  } catch (error) {
    starting.fail();
    await telemetry.shutdown().catch(() => undefined);
    // Taken between the check above and the listen: the same clear message.
    if (isAddressInUse(error)) {
      throw new PortInUseError(config.TRELLIS_HOST, config.TRELLIS_PORT, "TRELLIS_PORT", "Trellis");
    }
    throw error;
  }
  starting.done();
  const { url } = trellis.address;
  process.stdout.write(
    [
      "",
      `Trellis (embedded) is listening on ${url}`,
      `  operator UI: ${url}/ui`,
      `  gRPC / Connect / gRPC-Web and REST on one port; data in ${dataDir}`,
      `  try: npx buf curl --protocol grpc --http2-prior-knowledge --list-services ${url}`,
      "  Ctrl-C stops it.",
      "",
    ].join("\n"),
  );
  await new Promise<void>((done) => {
    onShutdownSignals(
      async () => {
        process.stdout.write("\nTrellis is stopping…\n");
        await trellis.close({ graceMs: 5000 });
        // Last: what the shutdown itself traced is exported too.
        await telemetry.shutdown().catch((error: unknown) =>
          logger.warn("telemetry did not flush", {
            error: error instanceof Error ? error.message : String(error),
          }),
        );
        done();
      },
      { logger, exit: false },
    );
  });
  return 0;
}
