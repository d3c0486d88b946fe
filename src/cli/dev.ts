/**
 * `trellis dev`: Trellis embedded, every service in one process on PGlite.
 * This file only reads the arguments, the settings and checks the port, so
 * that `--help`, a malformed variable and a busy port answer at once; the
 * server is `dev-server.ts`.
 */
import { assertPortFree } from "../ports.js";
import { parseCommand, printUsage } from "./args.js";
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
  // A quick look at the port first (the server checks it again), then the
  // settings: both before the slow start.
  const port = Number(source.TRELLIS_PORT || 8080);
  if (Number.isInteger(port) && port > 0 && port < 65_536) {
    await assertPortFree(source.TRELLIS_HOST || "127.0.0.1", port, "TRELLIS_PORT");
  }
  const { devConfigSchema, loadConfig } = await import("./settings.js");
  loadConfig(devConfigSchema, source);
  const { serveEmbedded } = await import("./dev-server.js");
  return serveEmbedded(source);
}
