/**
 * Embedded mode: every service in one process, on PGlite (real Postgres in
 * WASM, data on disk) and the in-process event log, behind one port.
 *
 * Durability comes from the database: all services append to ONE outbox (schema
 * {@link EMBEDDED_OUTBOX_SCHEMA}), which is the durable event log. The
 * in-process log is a window over it: the relay hands it every row with its
 * outbox position (`appendLogged`), it keeps the newest events in memory and
 * reads older ones back from the outbox (its archive), and at start it loads
 * only the newest rows. Positions are therefore the outbox's, gaps included,
 * and the same before and after a restart, as durable consumers' saved
 * positions require. Nothing is appended to the in-process log except
 * through that outbox.
 */
import { mkdir } from "node:fs/promises";
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { PGlite } from "@electric-sql/pglite";
import {
  type ConsumerPositionStore,
  DEFAULT_EVENT_WINDOW,
  InProcessEventLog,
  InProcessSignalBus,
} from "@trellis/eventlog";
import {
  createLogger,
  createService,
  type Logger,
  type ServiceAddress,
  type TrellisService,
} from "@trellis/runtime";
import {
  createDatabase,
  createOutboxArchive,
  createOutboxRelay,
  createOutboxWriter,
  type Database,
  migrate,
  openPGlite,
  outboxMigrations,
  type PGliteMaintenanceOptions,
  readOutboxTail,
  startPGliteMaintenance,
} from "@trellis/storage";
import { sql } from "kysely";
import { CoHostedClients, createCoHostedTransport } from "./co-hosted.js";
import { DEFAULT_CONSUMER_POSITION_FLUSH_MS } from "./defaults.js";
import { deploymentKeysMigration, embeddedFingerprints } from "./fingerprint-key.js";
import { MeshCredentials, meshCredentialsFromEnv } from "./mesh.js";
import { meshGuardedHttp } from "./mesh-http.js";
import {
  createClosingController,
  firstHandling,
  registerShutdown,
  routesOf,
  type ServiceContext,
  type ServiceDefinition,
  type ServiceModule,
} from "./service.js";

/** The shared outbox schema of embedded mode. */
export const EMBEDDED_OUTBOX_SCHEMA = "trellis";

/** Options of {@link startEmbedded}. */
export interface EmbeddedOptions {
  services: readonly ServiceDefinition[];
  /** Data directory (created if missing); undefined = in memory (tests). */
  dataDir?: string;
  host?: string;
  /** Port; 0 picks a free one. */
  port?: number;
  logger?: Logger;
  /** Environment handed to service factories (default: process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * Durable consumers' positions are written at most this long after an ack
   * (one statement for all of them; default
   * {@link DEFAULT_CONSUMER_POSITION_FLUSH_MS}). A crash redelivers the acks
   * of that window. 0 writes every ack before it resolves.
   */
  consumerPositionFlushMs?: number;
  /**
   * Events the in-process log keeps in memory (default 20,000); older ones
   * are read from the outbox when a reader reaches back that far.
   */
  eventWindow?: number;
  /**
   * The database's checkpoints and vacuums, which PGlite's single-user
   * Postgres does not run by itself (see `startPGliteMaintenance`; defaults:
   * a checkpoint per 64 MiB of WAL or 5 minutes with writes, autovacuum's
   * thresholds capped at 10,000 rows, one statement per round). Errors go to
   * the logger as warnings, operations as debug lines.
   */
  maintenance?: Omit<PGliteMaintenanceOptions, "onError" | "onOperation">;
}

/** A running embedded Trellis. */
export interface EmbeddedTrellis {
  server: TrellisService;
  address: ServiceAddress;
  contexts: ReadonlyMap<string, ServiceContext>;
  modules: ReadonlyMap<string, ServiceModule>;
  /** An in-process client of any provided service (tests, CLI). */
  client<T extends DescService>(service: T): Client<T>;
  close(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Durable-consumer positions kept in the embedded database, written behind:
 * a save is remembered and flushed (one statement for every consumer) at
 * most `flushMs` later, and at close. A crash loses at most that window of
 * acks: those events are delivered again at the next start, which durable
 * consumers accept (they are at-least-once). `flushMs` 0 writes each save
 * before it resolves.
 */
class DatabaseConsumerPositions implements ConsumerPositionStore {
  readonly #pending = new Map<string, bigint>();
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database<unknown>,
    private readonly flushMs: number,
    private readonly logger: Logger,
  ) {}

  async load(name: string): Promise<bigint | undefined> {
    const pending = this.#pending.get(name);
    if (pending !== undefined) return pending;
    await this.#writing;
    const result = await sql<{ position: bigint }>`
      select position from ${sql.id(EMBEDDED_OUTBOX_SCHEMA, "consumer_positions")} where name = ${name}`.execute(
      this.db.kysely,
    );
    return result.rows[0]?.position;
  }

  async save(name: string, position: bigint): Promise<void> {
    this.#pending.set(name, position);
    if (this.flushMs <= 0) return this.flush();
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.flush().catch((error) =>
        this.logger.warn("saving consumer positions failed; retrying", { error: String(error) }),
      );
    }, this.flushMs);
    this.#timer.unref();
  }

  /** Write what is pending now (in order after any write in progress). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.size === 0) return this.#writing;
    const batch = [...this.#pending];
    this.#pending.clear();
    const write = this.#writing.then(() => this.#write(batch));
    this.#writing = write.catch(() => {
      // Keep what failed unless a newer position came meanwhile; try again later.
      for (const [name, position] of batch)
        if (!this.#pending.has(name)) this.#pending.set(name, position);
      if (this.flushMs > 0) this.#schedule();
    });
    return write;
  }

  async #write(batch: readonly [string, bigint][]): Promise<void> {
    const values = batch.map(([name, position]) => sql`(${name}, ${position})`);
    await sql`
      insert into ${sql.id(EMBEDDED_OUTBOX_SCHEMA, "consumer_positions")} (name, position) values ${sql.join(values)}
      on conflict (name) do update set position = excluded.position`.execute(this.db.kysely);
  }
}

const consumerPositionsMigration = {
  "2026_11_22_001_create_consumer_positions": {
    async up(db: import("kysely").Kysely<unknown>) {
      await db.schema
        .createTable("consumer_positions")
        .ifNotExists()
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("position", "bigint", (c) => c.notNull())
        .execute();
    },
  },
};

/**
 * Indexes for the in-process log's reads of the outbox (events older than its
 * window): by workspace, and by workspace and session, in position order.
 */
const outboxAddressIndexMigration = {
  "2026_11_22_002_index_outbox_by_address": {
    async up(db: import("kysely").Kysely<unknown>) {
      await db.schema
        .createIndex("outbox_workspace_position_idx")
        .ifNotExists()
        .on("outbox")
        .columns(["workspace_id", "position"])
        .execute();
      await db.schema
        .createIndex("outbox_workspace_session_position_idx")
        .ifNotExists()
        .on("outbox")
        .columns(["workspace_id", "session_id", "position"])
        .execute();
    },
  },
};

/**
 * The outbox's `outbox_unpublished_idx` (rows with `published_at` null, for
 * a relay that marks what it published) is of no use here: the embedded
 * relay follows the outbox by position and never marks a row (the log is
 * rebuilt from the outbox), so the partial index held every row ever
 * written — one index entry per event (a chat turn writes six) for nothing.
 */
const dropUnpublishedIndexMigration = {
  "2027_06_05_000_drop_outbox_unpublished_index": {
    async up(db: import("kysely").Kysely<unknown>) {
      await db.schema.dropIndex("outbox_unpublished_idx").ifExists().execute();
    },
  },
};

/**
 * Boot every service in one process. Returns once the server listens and every
 * module has started.
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedTrellis> {
  const logger = options.logger ?? createLogger({ service: "trellis" });
  const env = options.env ?? process.env;
  // Every service is in this process: a configured secret is used when there
  // is one, otherwise one made now (nothing outside the process needs it).
  const mesh = meshCredentialsFromEnv(env) ?? MeshCredentials.generate();
  if (options.dataDir) await mkdir(options.dataDir, { recursive: true });
  const pglite: PGlite = await openPGlite(options.dataDir ? { dataDir: options.dataDir } : {});
  const db: Database<unknown> = await createDatabase({ kind: "pglite", pglite });

  await migrate(db, {
    schema: EMBEDDED_OUTBOX_SCHEMA,
    migrations: {
      ...outboxMigrations(EMBEDDED_OUTBOX_SCHEMA),
      ...consumerPositionsMigration,
      ...outboxAddressIndexMigration,
      ...deploymentKeysMigration,
      ...dropUnpublishedIndexMigration,
    },
  });
  // Nothing here listens for the outbox's NOTIFY (every writer is in this
  // process and kicks the relay): the trigger would only add work to every
  // statement that writes events. Off at every start, so a data directory
  // made before this still gets it.
  await sql`alter table ${sql.id(EMBEDDED_OUTBOX_SCHEMA, "outbox")} disable trigger outbox_notify`.execute(
    db.kysely,
  );
  // Kept in the database: the same across restarts with a data directory.
  const fingerprints = await embeddedFingerprints(env, db, EMBEDDED_OUTBOX_SCHEMA);
  for (const definition of options.services) {
    if (definition.migrations)
      await migrate(db, { schema: definition.name, migrations: definition.migrations });
  }

  const positions = new DatabaseConsumerPositions(
    db,
    options.consumerPositionFlushMs ?? DEFAULT_CONSUMER_POSITION_FLUSH_MS,
    logger,
  );
  const window = options.eventWindow ?? DEFAULT_EVENT_WINDOW;
  const eventLog = await InProcessEventLog.open({
    archive: createOutboxArchive(db, EMBEDDED_OUTBOX_SCHEMA),
    window,
    // Only the newest rows; the log reads older ones from the outbox when asked.
    history: await readOutboxTail(db, EMBEDDED_OUTBOX_SCHEMA, window),
    consumerPositions: positions,
  });
  const signals = new InProcessSignalBus();
  const relay = createOutboxRelay({
    database: db,
    schema: EMBEDDED_OUTBOX_SCHEMA,
    eventLog,
    // In one process every commit kicks the relay; polling is only a
    // fallback, and an idle process should not wake twice a second for it.
    pollIntervalMs: 2000,
    // The in-process log is rebuilt from this outbox at every start, and
    // takes each row at its outbox position.
    logRebuiltFromOutbox: true,
    positionedLog: eventLog,
    // Every writer is in this process and kicks after its commit.
    listen: false,
    onError: (error) =>
      logger.warn("outbox relay round failed; retrying", { error: String(error) }),
  });

  const closing = createClosingController();
  const clients = new CoHostedClients();

  const contexts = new Map<string, ServiceContext>();
  const modules = new Map<string, ServiceModule>();
  for (const definition of options.services) {
    const context: ServiceContext = {
      mode: "embedded",
      db,
      schema: definition.name,
      outboxSchema: EMBEDDED_OUTBOX_SCHEMA,
      eventLog,
      signals,
      logger: logger.child({ component: definition.name }),
      clients,
      outbox: createOutboxWriter({ schema: EMBEDDED_OUTBOX_SCHEMA, relay }),
      closing: closing.signal,
      env,
      mesh,
      fingerprints,
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    };
    contexts.set(definition.name, context);
    modules.set(definition.name, await definition.create(context));
  }
  const all = [...modules.values()];
  const routes = routesOf(all) ?? (() => undefined);
  // Services call each other in memory (co-hosted.ts): same handlers, no
  // socket, no wire protocol, signed and checked with the service
  // credentials as in distributed mode, so the caller a handler sees is
  // always one the gateway authenticated.
  clients.connect(createCoHostedTransport({ routes, mesh, logger, peer: "embedded" }));

  // The public service's handlers (the gateway) come first and see every
  // request; another module's handler only serves what the gateway handed on
  // to it, signed with the service credentials. (A deployment without a
  // public service — some tests — has no door to guard: nothing is
  // authenticated there, RPCs included.)
  const guarded = options.services.some((definition) => definition.public);
  const httpHandlers = options.services.flatMap((definition) => {
    const module = modules.get(definition.name);
    if (!module?.http) return [];
    // A request without a service credential is not for a non-public module
    // (the gateway did not hand it on); a wrong one is refused with 401.
    return [
      definition.public || !guarded
        ? module.http
        : meshGuardedHttp(module.http, mesh, { declineUnsigned: true, reportRequestId: false }),
    ];
  });
  const http = firstHandling(httpHandlers);
  const upgrades = all.flatMap((m) => (m.upgrade ? [m.upgrade] : []));
  const server = createService({
    name: "trellis",
    logger,
    routes,
    interceptors: all.flatMap((m) => m.interceptors ?? []),
    reflection: { files: all.flatMap((m) => m.reflectionFiles ?? []) },
    ...(http ? { http } : {}),
    ...(upgrades[0] ? { upgrade: upgrades[0] } : {}),
    health: {
      dependencies: [
        { name: "database", check: () => db.ping() },
        ...all.flatMap((m) => m.health ?? []),
      ],
    },
  });
  registerShutdown(server, {
    closing,
    modules: {
      name: "services",
      async stop() {
        for (const module of [...all].reverse()) await module.stop?.();
      },
    },
    relay,
    storage: {
      name: "storage",
      async close() {
        await maintenance?.stop();
        await signals.close();
        await eventLog.close();
        await positions
          .flush()
          .catch((error) =>
            logger.warn("saving consumer positions at close failed", { error: String(error) }),
          );
        await db.close();
        await pglite.close();
      },
    },
  });
  // No round once the shutdown has begun (a statement in progress finishes
  // before storage closes).
  let maintenance: ReturnType<typeof startPGliteMaintenance> | undefined;
  server.closing.addEventListener("abort", () => void maintenance?.stop(), { once: true });

  relay.start();
  const address = await server.listen({
    host: options.host ?? "127.0.0.1",
    port: options.port ?? 8080,
  });
  for (const module of all) await module.start?.();
  if (!server.closing.aborted) {
    maintenance = startPGliteMaintenance(pglite, {
      ...options.maintenance,
      onError: (error, context) => logger.warn(context, { error: String(error) }),
      onOperation: (operation) =>
        logger.debug("database maintenance", { ...operation, ms: Math.round(operation.ms) }),
    });
  }

  return {
    server,
    address,
    contexts,
    modules,
    client: (service) => clients.get(service),
    close: (closeOptions) => server.close(closeOptions),
  };
}
