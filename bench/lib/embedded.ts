/** Embedded Trellis in the bench's own process, for benches that reach into it. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { allServices } from "../../src/services.js";
import { limitsOutOfReach } from "./proc.js";

/** A running embedded Trellis and how to stop it. */
export interface BenchEmbedded {
  trellis: EmbeddedTrellis;
  /** Close it and remove its data directory. */
  stop(): Promise<void>;
}

/**
 * Every service in this process (`startEmbedded`) on a free port, PGlite in
 * a fresh temporary directory whose name starts with `tmpPrefix`, `apiKey`
 * as the admin key, log level warn and the rate limits out of reach.
 */
export async function startBenchEmbedded(
  apiKey: string,
  tmpPrefix: string,
): Promise<BenchEmbedded> {
  const dataDir = await mkdtemp(join(tmpdir(), tmpPrefix));
  let trellis: EmbeddedTrellis;
  try {
    trellis = await startEmbedded({
      services: allServices,
      dataDir,
      port: 0,
      logger: createLogger({ service: "trellis", level: "warn" }),
      env: {
        ...process.env,
        TRELLIS_API_KEY: apiKey,
        TRELLIS_LOG_LEVEL: "warn",
        ...limitsOutOfReach,
      },
    });
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    trellis,
    async stop() {
      await trellis.close({ graceMs: 5000 });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
