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
 * PGlite's own start parameters plus the server settings storage adds. They
 * are given at every start (not written into the data directory), so they
 * hold for a fresh data directory and for one made by an earlier version.
 *
 * `wal_init_zero=off`: Postgres fills each new 16 MB WAL segment with zeros
 * before writing to it. A server mostly recycles old segments at checkpoints
 * instead; PGlite runs Postgres single-user, where nothing but `close()` (or
 * an explicit `CHECKPOINT`) checkpoints, so every segment is new and every
 * 16 MB of WAL cost 16 MB more of zeros, written in one burst on the event
 * loop (an embedded chat turn: ~25 KB of ~69 KB it writes, and a write of up
 * to ~30 ms every ~760 turns; docs/benchmarks.md, session 19). Durability is
 * unchanged: WAL records, commits and full-page images are the same; the
 * zero fill only pre-allocates disk space, and with it off Postgres sets the
 * file's size by writing its last byte. (PGlite's defaults run with fsync off
 * — `-F` — and its Node filesystem has no fsync, so a commit is in the
 * operating system's page cache when it returns: it survives the process
 * dying, not the machine. That is PGlite's choice, kept here.)
 */
const startParams: readonly string[] = [...PGlite.defaultStartParams, "-c", "wal_init_zero=off"];

/**
 * A fresh cluster's files, copied from this process's second in-memory
 * instance right after it started: the ones after it load them instead of
 * running `initdb` again (~1 s instead of 1–5 s; a test file that opens
 * several pays for two). Gzipped, ~4.5 MB kept for the process's life. A
 * process that opens one instance (a server) takes no copy.
 */
let freshCluster: Promise<Blob | undefined> | undefined;
let startedInMemory = 0;

function create(options: { dataDir?: string; loadDataDir?: Blob }): Promise<PGlite> {
  return PGlite.create({
    ...options,
    parsers: pgliteParsers,
    serializers: pgliteSerializers,
    startParams: [...startParams],
  });
}

async function openInMemory(): Promise<PGlite> {
  if (freshCluster !== undefined) {
    const copy = await freshCluster;
    return create(copy === undefined ? {} : { loadDataDir: copy });
  }
  const pglite = await create({});
  startedInMemory += 1;
  if (startedInMemory >= 2) {
    freshCluster ??= pglite.dumpDataDir("gzip").catch(() => undefined);
    await freshCluster;
  }
  return pglite;
}

/**
 * Starts a PGlite instance (1–2 s) configured like storage's own: `int8` read
 * as `bigint`, and the settings of {@link startParams}. Use it to share one
 * instance between the services of one process (pass it as
 * `createDatabase({ kind: "pglite", pglite })`); you own it and close it last.
 */
export async function openPGlite(options: OpenPGliteOptions = {}): Promise<PGlite> {
  if (options.dataDir === undefined) return openInMemory();
  return create({ dataDir: options.dataDir });
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
