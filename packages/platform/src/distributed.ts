/**
 * Distributed mode: one service per process, on PostgreSQL and NATS JetStream,
 * configured by environment variables.
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
  outboxMigrations,
} from "@trellis/storage";
import { ownerOf, serviceUrl } from "./addresses.js";
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
  registerShutdown,
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

/** Options of {@link runService}. */
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
): ServiceClients & { close(): void } {
  const cache = new Map<string, Client<DescService>>();
  const sign = createMeshClientInterceptor(mesh, peer);
  return {
    get<T extends DescService>(service: T, owner = ownerOf(service)): Client<T> {
      const key = `${owner} ${service.typeName}`;
      let client = cache.get(key);
      if (!client) {
        client = createServiceClient(service, serviceUrl(owner, source), {
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
  const source = options.env ?? process.env;
  const config = loadConfig(distributedConfigSchema, source);
  // Checked before anything starts: a config error names the variable.
  const natsSecurity = natsSecurityFromEnv(source);
  const telemetry = initTelemetry({ serviceName: `trellis-${definition.name}` });
  const logger = createLogger({ service: definition.name });
  const schema = definition.name;
  const mesh = resolveMeshCredentials(source, options.requireMeshSecret ?? false, logger);
  // Checked before anything starts too (a malformed TRELLIS_FINGERPRINT_KEY).
  const fingerprints = distributedFingerprints(source, mesh);

  const startup = config.TRELLIS_STARTUP_TIMEOUT;
  const migrations = { ...outboxMigrations(schema), ...(definition.migrations ?? {}) };
  const db: Database<unknown> = await waitForDependency(
    "PostgreSQL",
    async () => {
      const candidate: Database<unknown> = await createDatabase({
        kind: "postgres",
        url: config.DATABASE_URL,
        poolSize: config.DATABASE_POOL_SIZE,
        applicationName: `trellis-${definition.name}`,
      });
      try {
        await migrate(candidate, { schema, migrations });
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
  const relay = createOutboxRelay({
    database: db,
    schema,
    eventLog,
    // Writers kick it after each commit and the outbox NOTIFYs (another
    // replica's commits): the poll only catches a notification lost while
    // the listening connection was down, so an idle service need not wake
    // every second for it.
    pollIntervalMs: 5000,
    onError: (error) =>
      logger.warn("outbox relay round failed; retrying", { error: String(error) }),
  });
  const clients = createRemoteClients(source, mesh, definition.name);
  const closing = createClosingController();
  const context: ServiceContext = {
    mode: "distributed",
    db,
    schema,
    outboxSchema: schema,
    eventLog,
    signals,
    logger,
    clients,
    outbox: createOutboxWriter({ schema: schema, relay }),
    closing: closing.signal,
    env: source,
    mesh,
    fingerprints,
  };
  const module = await definition.create(context);
  // Internal services accept only calls carrying a service credential; the
  // public one (the gateway) authenticates its callers itself.
  const interceptors = [
    ...(definition.public ? [] : [createMeshServerInterceptor(mesh)]),
    ...(module.interceptors ?? []),
  ];
  const http = module.http && !definition.public ? meshGuardedHttp(module.http, mesh) : module.http;
  const service = createService({
    name: definition.name,
    logger,
    ...(module.routes ? { routes: (router) => module.routes?.(router) } : {}),
    ...(http ? { http } : {}),
    ...(interceptors.length ? { interceptors } : {}),
    // Calls from inside the mesh were scanned at their edge (the gateway).
    ...(definition.public ? {} : { trustedRequest: (req) => meshSignedRpc(mesh, req) }),
    ...(module.upgrade ? { upgrade: module.upgrade } : {}),
    ...(module.reflectionFiles ? { reflection: { files: module.reflectionFiles } } : {}),
    health: {
      dependencies: [
        { name: "postgres", check: () => db.ping() },
        { name: "nats", check: () => eventLog.ping() },
        ...(module.health ?? []),
      ],
    },
  });
  registerShutdown(service, {
    closing,
    modules: {
      name: definition.name,
      async stop() {
        clients.close();
        await module.stop?.();
      },
    },
    relay,
    storage: {
      name: "connections",
      async close() {
        await signals.close();
        await eventLog.close();
        await db.close();
      },
    },
  });

  relay.start();
  const address = await service.listen({
    host: config.TRELLIS_HOST,
    port: config.PORT ?? definition.defaultPort,
  });
  await module.start?.();
  logger.info("listening", { url: address.url, service: definition.name });

  const close = async () => {
    await service.close({ graceMs: config.TRELLIS_SHUTDOWN_GRACE });
    await telemetry.shutdown();
  };
  if (options.handleSignals !== false) onShutdownSignals(close, { logger });
  return { service, address, module, mesh, close };
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
 * The whole of a service's `main.ts`: run it, and on a startup failure print
 * one clear line (the bad variable, the unreachable dependency) and exit 1.
 */
export async function runServiceMain(definition: ServiceDefinition): Promise<void> {
  try {
    await runService(definition, { requireMeshSecret: true });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`trellis-${definition.name}: cannot start: ${message}\n`);
    process.exit(1);
  }
}
