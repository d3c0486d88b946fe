import { PGlite } from "@electric-sql/pglite";
import { Kysely } from "kysely";
import type { Database } from "../../database.js";
import { storageError } from "../../errors.js";
import { assembleDatabase } from "../assemble-database.js";
import type { PGliteDatabaseConfig } from "./pglite-config.js";
import { PGliteDialect } from "./pglite-dialect.js";
import { createPGliteLocks } from "./pglite-lock.js";
import { createPGliteNotifier } from "./pglite-notifier.js";
import { kyselyView, pgliteParsers, pgliteSerializers } from "./pglite-types.js";

/** Options of {@link openPGlite}. */
export interface OpenPGliteOptions {
  /** Directory of a persistent database (created if needed); omitted = in memory. */
  dataDir?: string;
}

/**
 * Starts a PGlite instance (1–2 s) configured like storage's own: `int8` read
 * as `bigint`. Use it to share one instance between the services of one
 * process (pass it as `createDatabase({ kind: "pglite", pglite })`); you own
 * it and close it last.
 */
export async function openPGlite(options: OpenPGliteOptions = {}): Promise<PGlite> {
  const pglite = new PGlite({
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
    parsers: pgliteParsers,
    serializers: pgliteSerializers,
  });
  await pglite.waitReady;
  return pglite;
}

/**
 * Opens a {@link Database} on PGlite through storage's `PGliteDialect`
 * (the Postgres query compiler, so service code is the same
 * as on a server). See {@link PGliteDatabaseConfig} for the three modes.
 *
 * Several Databases may share one instance: PGlite runs one statement or one
 * transaction at a time (a transaction locks the whole instance), so they
 * interleave safely; each service keeps to its own schema.
 */
export async function createPGliteDatabase<DB>(
  config: PGliteDatabaseConfig,
): Promise<Database<DB>> {
  if (config.pglite !== undefined && config.dataDir !== undefined) {
    throw storageError({
      reason: "invalid_request",
      message: "give either pglite (a shared instance) or dataDir, not both",
      param: "dataDir",
    });
  }
  const owned = config.pglite === undefined;
  const pglite =
    config.pglite ??
    (await openPGlite(config.dataDir === undefined ? {} : { dataDir: config.dataDir }));
  await pglite.waitReady;

  return assembleDatabase({
    kind: "pglite",
    kysely: new Kysely<DB>({ dialect: new PGliteDialect({ pglite: kyselyView(pglite) }) }),
    async probe(closed) {
      if (closed || pglite.closed) throw new Error("the database is closed");
      return pglite.query("select 1");
    },
    locks: createPGliteLocks(pglite),
    notifier: createPGliteNotifier(pglite),
    // kysely.destroy() before this lets queued work finish; the view's close() is a no-op.
    async afterClose() {
      if (owned && !pglite.closed) await pglite.close();
    },
  });
}
