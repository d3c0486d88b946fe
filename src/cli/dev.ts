/**
 * `trellis dev`: Trellis embedded, every service in one process on PGlite.
 * This file only reads the arguments and checks the port, so that `--help`
 * and a busy port answer at once; the server is `dev-server.ts`.
 */
import { assertPortFree } from "../ports.js";
import { parseCommand, printUsage } from "./args.js";
import { devUsage } from "./usage.js";

/**
 * `trellis dev`: run embedded until Ctrl-C. A busy port fails before anything
 * is loaded or opened (naming `TRELLIS_PORT`).
 */
export async function runDev(
  source: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): Promise<number> {
  const parsed = parseCommand({ name: "dev", usage: devUsage, options: {} }, args);
  if (parsed.help) return printUsage(devUsage);
  // A quick look before the slow start; the server validates the settings
  // (and names a malformed one) and checks the port again.
  const port = Number(source.TRELLIS_PORT || 8080);
  if (Number.isInteger(port) && port > 0 && port < 65_536) {
    await assertPortFree(source.TRELLIS_HOST || "127.0.0.1", port, "TRELLIS_PORT");
  }
  const { serveEmbedded } = await import("./dev-server.js");
  return serveEmbedded(source);
}
