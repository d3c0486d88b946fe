import type { PGlite } from "@electric-sql/pglite";
import type { BackgroundErrorHandler } from "../../database.js";

/**
 * Runs on PGlite, PostgreSQL compiled to WASM, inside this process (embedded
 * mode and tests). Give at most one of `dataDir` and `pglite`:
 *
 * - neither: a fresh in-memory database, gone when closed;
 * - `dataDir`: a database stored in that directory (created if needed) that
 *   survives close and restart; one process at a time may open it;
 * - `pglite`: an instance shared by several services of one process (see
 *   `openPGlite`), each using its own schema. The caller owns it: `close()`
 *   leaves it open, close it after every service closed its database.
 *
 * @example
 *   const shared = await openPGlite({ dataDir: ".trellis/db" });
 *   const tasks = await createDatabase({ kind: "pglite", pglite: shared });
 *   const receipts = await createDatabase({ kind: "pglite", pglite: shared });
 */
export interface PGliteDatabaseConfig {
  kind: "pglite";
  dataDir?: string;
  pglite?: PGlite;
  /** Where background errors go (default: a console warning). */
  onBackgroundError?: BackgroundErrorHandler;
}
