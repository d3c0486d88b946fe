/**
 * The embedded server of `trellis dev` (loaded only once the arguments and
 * the port are known to be good: `dev.ts`).
 */
import { resolve } from "node:path";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger, initTelemetry, loadConfig, onShutdownSignals } from "@trellis/runtime";
import { assertPortFree, isAddressInUse, PortInUseError } from "../ports.js";
import { allServices } from "../services.js";
import { createProgress } from "./progress.js";
import { devConfigSchema } from "./settings.js";

export { devConfigSchema };

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
