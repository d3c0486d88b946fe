/**
 * `trellis dev`: Trellis embedded, every service in one process on PGlite.
 * This file only reads the arguments, the settings and checks the port, so
 * that `--help`, a malformed variable and a busy port answer at once; the
 * server is `dev-server.ts`.
 */
import { loadConfig } from "@trellis/runtime";
import { assertPortFree } from "../ports.js";
import { parseCommand, printUsage } from "./args.js";
import { devConfigSchema } from "./dev-config.js";
import { devUsage } from "./usage.js";

/**
 * `trellis dev`: run embedded until Ctrl-C. A malformed setting or a busy
 * port fails before anything is loaded or opened (naming the variable).
 */
export async function runDev(
  source: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): Promise<number> {
  const parsed = parseCommand({ name: "dev", usage: devUsage, options: {} }, args);
  if (parsed.help) return printUsage(devUsage);
  // A quick look before the slow start (the server loads the settings and
  // checks the port again).
  const config = loadConfig(devConfigSchema, source);
  if (config.TRELLIS_PORT > 0) {
    await assertPortFree(config.TRELLIS_HOST, config.TRELLIS_PORT, "TRELLIS_PORT");
  }
  const { serveEmbedded } = await import("./dev-server.js");
  return serveEmbedded(source);
}
