/**
 * Distributed mode: each service in a process of its own (or a few in one,
 * `runServices`), on PostgreSQL and NATS JetStream, configured by
 * environment variables.
 */
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  createEventLog,
  createSignalBus,
  type EventLog,
  natsSecurityFromEnv,
  type SignalBus,
} from "@trellis/eventlog";
import {
  createLogger,
  createService,
  createServiceClient,
  env,
  initTelemetry,
  loadConfig,
  onShutdownSignals,
  type ServiceAddress,
  type ServiceProtocol,
  TrellisError,
  type TrellisService,
  waitForDependency,
} from "@trellis/runtime";
import {
  createDatabase,
  createOutboxRelay,
  createOutboxWriter,
  type Database,
  migrate,
  type OutboxRelay,
  outboxMigrations,
} from "@trellis/storage";
import { ownerOf, serviceUrl } from "./addresses.js";
import { CoHostedClients, createCoHostedTransport } from "./co-hosted.js";
import { distributedFingerprints } from "./fingerprint-key.js";
import {
  createMeshClientInterceptor,
  createMeshServerInterceptor,
  type MeshCredentials,
  meshCredentialsFromEnv,
  meshSecretFileVariable,
  meshSecretVariable,
  meshSignedRpc,
  processMeshCredentials,
} from "./mesh.js";
import { meshGuardedHttp } from "./mesh-http.js";
import {
  createClosingController,
  firstHandling,
  registerShutdown,
  routesOf,
  type ServiceClients,
  type ServiceContext,
  type ServiceDefinition,
  type ServiceModule,
} from "./service.js";

/** Environment a distributed service reads (validated at start). */
export const distributedConfigSchema = {
  PORT: env.port().optional(),
  TRELLIS_HOST: env.string().default("127.0.0.1"),
  DATABASE_URL: env.url({ protocols: ["postgres", "postgresql"] }).secret(),
  DATABASE_POOL_SIZE: env.int({ min: 1, max: 200 }).default(10),
  NATS_URL: env.string().default("nats://127.0.0.1:4222"),
  TRELLIS_NATS_PREFIX: env.string().default("trellis"),
  TRELLIS_SHUTDOWN_GRACE: env.duration().default(10_000),
  /** How long to keep retrying Postgres / NATS at start before giving up. */
  TRELLIS_STARTUP_TIMEOUT: env.duration().default(60_000),
  /**
   * The service credential secret shared by every service of the deployment
   * (at least 32 characters), or a file holding it (a mounted Secret). See
   * `mesh.ts`.
   */
  TRELLIS_MESH_SECRET: env.string().secret().optional(),
  TRELLIS_MESH_SECRET_FILE: env.string().optional(),
  /**
   * Key of the deployment's secret fingerprints (base64, ≥ 32 bytes); default:
   * derived from the mesh secret. See `fingerprint-key.ts`.
   */
  TRELLIS_FINGERPRINT_KEY: env.string().secret().optional(),
  /**
   * Wire protocol of the calls between services (both over HTTP/2, binary
   * protobuf): `connect` (default) or `grpc`. A Connect unary call costs
   * about half the CPU of a gRPC one on each side (no trailers, no envelope),
   * so the distributed turn's hops are cheaper; `grpc` is for a network path
   * that only passes gRPC. Every service accepts both whatever this says.
   */
  TRELLIS_SERVICE_PROTOCOL: env.enum(["connect", "grpc"]).default("connect"),
};

/** A running distributed service. */
export interface RunningService {
  service: TrellisService;
  address: ServiceAddress;
  module: ServiceModule;
  /** The service credentials it accepts and signs with. */
  mesh: MeshCredentials;
  close(): Promise<void>;
}

/** A running distributed process hosting one service or several. */
export interface RunningServices {
  service: TrellisService;
  address: ServiceAddress;
  /** The hosted services' modules, by service name, in start order. */
  modules: ReadonlyMap<string, ServiceModule>;
  mesh: MeshCredentials;
  close(): Promise<void>;
}

/** Options of {@link runService} and {@link runServices}. */
export interface RunServiceOptions {
  env?: NodeJS.ProcessEnv;
  /** Install SIGINT/SIGTERM handlers that close and exit (default true). */
  handleSignals?: boolean;
  /**
   * Refuse to start without `TRELLIS_MESH_SECRET` (or `_FILE`). Default false:
   * the service then uses credentials made for this process only, so services
   * run in the same process (tests) reach each other and nothing else reaches
   * them. `runServiceMain` (a real process) sets it.
   */
  requireMeshSecret?: boolean;
}

function createRemoteClients(
  source: NodeJS.ProcessEnv,
  mesh: MeshCredentials,
  peer: string,
  protocol: ServiceProtocol,
): ServiceClients & { close(): void } {
  const cache = new Map<string, Client<DescService>>();
  const sign = createMeshClientInterceptor(mesh, peer);
  return {
    get<T extends DescService>(service: T, owner = ownerOf(service)): Client<T> {
      const key = `${owner} ${service.typeName}`;
      let client = cache.get(key);
      if (!client) {
        client = createServiceClient(service, serviceUrl(owner, source), {
          protocol,
          interceptors: [sign],
        }) as Client<DescService>;
        cache.set(key, client);
      }
      return client as Client<T>;
    },
    close() {
      cache.clear();
    },
  };
}

/**
 * Run one service as its own process: connect to Postgres and JetStream,
 * migrate its schema, start its outbox relay, serve its routes with health
 * (NOT_SERVING while Postgres or NATS is down) and reflection.
 */
export async function runService(
  definition: ServiceDefinition,
  options: RunServiceOptions = {},
): Promise<RunningService> {
  const running = await runServices([definition], options);
  const module = running.modules.get(definition.name) as ServiceModule;
  return {
    service: running.service,
    address: running.address,
    module,
    mesh: running.mesh,
    close: running.close,
  };
}

/**
 * Run several services in one process (`trellis serve tasks,chat`): each
 * keeps its own schema, migrations, outbox and relay, as in a process of its
 * own; they share the connections (one Postgres pool, one JetStream
 * connection), one server on the first one's port, and call each other in
 * memory (co-hosted.ts) — a call to another service goes over the network as
 * before. What it saves is a hop: chat's `SubmitTask` to a tasks replica in
 * the same process costs no socket, no HTTP/2 and no encoding. The public
 * service (the gateway) runs alone: it authenticates its callers and the
 * others only accept signed calls, which one server cannot be both.
 */
export async function runServices(
  definitions: readonly ServiceDefinition[],
  options: RunServiceOptions = {},
): Promise<RunningServices> {
  const first = definitions[0];
  if (first === undefined) throw new Error("runServices: no service to run");
  const names = definitions.map((d) => d.name);
  if (new Set(names).size !== names.length)
    throw new TrellisError({
      reason: "config_invalid",
      message: `a service is named twice in ${names.join(",")}`,
    });
  if (definitions.length > 1 && definitions.some((d) => d.public))
    throw new TrellisError({
      reason: "config_invalid",
      message: `${definitions.find((d) => d.public)?.name} runs in a process of its own (it serves callers outside the mesh); host the others apart from it`,
    });
  const source = options.env ?? process.env;
  const config = loadConfig(distributedConfigSchema, source);
  // Checked before anything starts: a config error names the variable.
  const natsSecurity = natsSecurityFromEnv(source);
  const host = names.join("+");
  const telemetry = initTelemetry({ serviceName: `trellis-${host}` });
  const logger = createLogger({ service: host });
  const mesh = resolveMeshCredentials(source, options.requireMeshSecret ?? false, logger);
  // Checked before anything starts too (a malformed TRELLIS_FINGERPRINT_KEY).
  const fingerprints = distributedFingerprints(source, mesh);

  const startup = config.TRELLIS_STARTUP_TIMEOUT;
  const db: Database<unknown> = await waitForDependency(
    "PostgreSQL",
    async () => {
      const candidate: Database<unknown> = await createDatabase({
        kind: "postgres",
        url: config.DATABASE_URL,
        poolSize: config.DATABASE_POOL_SIZE,
        applicationName: `trellis-${host}`,
      });
      try {
        for (const definition of definitions) {
          const schema = definition.name;
          const migrations = { ...outboxMigrations(schema), ...(definition.migrations ?? {}) };
          await migrate(candidate, { schema, migrations });
        }
        return candidate;
      } catch (error) {
        await candidate.close().catch(() => undefined);
        throw error;
      }
    },
    { timeoutMs: startup, logger },
  );

  const logConfig = {
    kind: "jetstream" as const,
    servers: config.NATS_URL,
    security: natsSecurity,
    prefix: config.TRELLIS_NATS_PREFIX,
  };
  const eventLog: EventLog = await createEventLog(logConfig);
  const signals: SignalBus = await createSignalBus(logConfig);
  // One relay per hosted service's outbox, as in a process of its own.
  const relays = definitions.map((definition) =>
    createOutboxRelay({
      database: db,
      schema: definition.name,
      eventLog,
      // Writers kick it after each commit and the outbox NOTIFYs (another
      // replica's commits): the poll only catches a notification lost while
      // the listening connection was down, so an idle service need not wake
      // every second for it.
      pollIntervalMs: 5000,
      onError: (error) =>
        logger.warn("outbox relay round failed; retrying", {
          error: String(error),
          service: definition.name,
        }),
    }),
  );
  // The name its calls are signed with (a mesh peer name has no "+").
  const peer = names.join("-");
  const remote = createRemoteClients(source, mesh, peer, config.TRELLIS_SERVICE_PROTOCOL);
  const coHosted = new CoHostedClients();
  // Calls to another service of this process stay in it; a process of one
  // service reaches even its own RPCs over the network, as it always has
  // (through its Service address, so across replicas).
  const hosted = new Set(definitions.length > 1 ? names : []);
  const clients: ServiceClients = {
    get<T extends DescService>(service: T, owner = ownerOf(service)): Client<T> {
      return hosted.has(owner) ? coHosted.get(service) : remote.get(service, owner);
    },
  };
  const closing = createClosingController();
  const modules = new Map<string, ServiceModule>();
  for (const [i, definition] of definitions.entries()) {
    const context: ServiceContext = {
      mode: "distributed",
      db,
      schema: definition.name,
      outboxSchema: definition.name,
      eventLog,
      signals,
      logger: definitions.length > 1 ? logger.child({ component: definition.name }) : logger,
      clients,
      outbox: createOutboxWriter({ schema: definition.name, relay: relays[i] as OutboxRelay }),
      closing: closing.signal,
      env: source,
      mesh,
      fingerprints,
    };
    modules.set(definition.name, await definition.create(context));
  }
  const all = [...modules.values()];
  const routes = routesOf(all);
  if (definitions.length > 1 && routes)
    coHosted.connect(createCoHostedTransport({ routes, mesh, logger, peer }));
  // Internal services accept only calls carrying a service credential; the
  // public one (the gateway) authenticates its callers itself.
  const internal = !first.public;
  const interceptors = [
    ...(internal ? [createMeshServerInterceptor(mesh)] : []),
    ...all.flatMap((m) => m.interceptors ?? []),
  ];
  const http = firstHandling(
    all.flatMap((m) => (m.http ? [internal ? meshGuardedHttp(m.http, mesh) : m.http] : [])),
  );
  const upgrades = all.flatMap((m) => (m.upgrade ? [m.upgrade] : []));
  const reflectionFiles = all.flatMap((m) => m.reflectionFiles ?? []);
  const service = createService({
    name: host,
    logger,
    ...(routes ? { routes } : {}),
    ...(http ? { http } : {}),
    ...(interceptors.length ? { interceptors } : {}),
    // Calls from inside the mesh were scanned at their edge (the gateway).
    ...(internal ? { trustedRequest: (req) => meshSignedRpc(mesh, req) } : {}),
    ...(upgrades[0] ? { upgrade: upgrades[0] } : {}),
    ...(reflectionFiles.length ? { reflection: { files: reflectionFiles } } : {}),
    health: {
      dependencies: [
        { name: "postgres", check: () => db.ping() },
        { name: "nats", check: () => eventLog.ping() },
        ...all.flatMap((m) => m.health ?? []),
      ],
    },
  });
  registerShutdown(service, {
    closing,
    modules: {
      name: host,
      async stop() {
        remote.close();
        coHosted.close();
        for (const module of [...all].reverse()) await module.stop?.();
      },
    },
    relay: {
      async stop() {
        await Promise.all(relays.map((relay) => relay.stop()));
      },
    },
    storage: {
      name: "connections",
      async close() {
        await signals.close();
        await eventLog.close();
        await db.close();
      },
    },
  });

  for (const relay of relays) relay.start();
  const address = await service.listen({
    host: config.TRELLIS_HOST,
    port: config.PORT ?? first.defaultPort,
  });
  for (const module of all) await module.start?.();
  logger.info("listening", { url: address.url, service: host });

  const close = async () => {
    await service.close({ graceMs: config.TRELLIS_SHUTDOWN_GRACE });
    await telemetry.shutdown();
  };
  if (options.handleSignals !== false) onShutdownSignals(close, { logger });
  return { service, address, modules, mesh, close };
}

function resolveMeshCredentials(
  source: NodeJS.ProcessEnv,
  required: boolean,
  logger: { warn(msg: string, fields?: Record<string, unknown>): void },
): MeshCredentials {
  const configured = meshCredentialsFromEnv(source);
  if (configured) return configured;
  if (required) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `${meshSecretVariable} (or ${meshSecretFileVariable}) is required: the service credential secret, the same on every service (e.g. openssl rand -base64 32)`,
      param: meshSecretVariable,
    });
  }
  logger.warn(
    `${meshSecretVariable} is not set for this service: it uses this process's service credentials, so services in other processes without the same secret cannot call it`,
  );
  return processMeshCredentials();
}

/**
 * The whole of a service's `main.ts` (or of `trellis serve` with several
 * names): run it, and on a startup failure print one clear line (the bad
 * variable, the unreachable dependency) and exit 1.
 */
export async function runServiceMain(
  definition: ServiceDefinition | readonly ServiceDefinition[],
): Promise<void> {
  const definitions = Array.isArray(definition) ? definition : [definition as ServiceDefinition];
  try {
    await runServices(definitions, { requireMeshSecret: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const host = definitions.map((d) => d.name).join("+");
    process.stderr.write(`trellis-${host}: cannot start: ${message}\n`);
    process.exit(1);
  }
}
