/**
 * The contract between a Trellis service and the host that runs it.
 *
 * A service is a {@link ServiceDefinition}: what it stores (schema and
 * migrations), what RPCs it provides, and a factory that builds its handlers
 * from a {@link ServiceContext}. The same definition runs as its own process
 * (distributed mode, `runService`) or next to every other service in one
 * process on PGlite (embedded mode, `startEmbedded`).
 */
import { setMaxListeners } from "node:events";
import type { DescFile, DescService } from "@bufbuild/protobuf";
import type { Client, ConnectRouter, Interceptor } from "@connectrpc/connect";
import type { EventLog, SignalBus } from "@trellis/eventlog";
import type {
  HealthDependency,
  HttpHandler,
  Logger,
  SecretFingerprints,
  TrellisService,
  UpgradeHandler,
} from "@trellis/runtime";
import type { Database, OutboxWriter } from "@trellis/storage";
import type { Migration } from "kysely";
import type { MeshCredentials } from "./mesh.js";

/** How the mesh runs. */
export type Mode = "embedded" | "distributed";

/** Reaches the RPC services of other Trellis services. */
export interface ServiceClients {
  /**
   * A client for `service`, wherever it runs: in embedded mode an in-process
   * transport (no socket), in distributed mode h2c to the owning service.
   * `owner` names another service that serves it too (distributed; default
   * the one its proto package names, `ownerOf`); embedded ignores it.
   */
  get<T extends DescService>(service: T, owner?: string): Client<T>;
}

/**
 * Everything a service is given by its host. Built once in `main.ts` (or the
 * embedded host) and passed down; handlers never read globals or env.
 */
export interface ServiceContext {
  mode: Mode;
  /** The database. The service keeps its tables in {@link schema}. */
  db: Database<unknown>;
  /** The service's own Postgres schema. */
  schema: string;
  /**
   * The schema of the outbox this service appends events to. Distributed: the
   * service's own schema. Embedded: one shared outbox, so the in-process log
   * rebuilt from it at start has the same order it had before the restart.
   */
  outboxSchema: string;
  eventLog: EventLog;
  signals: SignalBus;
  logger: Logger;
  clients: ServiceClients;
  /**
   * Units of work on {@link outboxSchema}: a write opens one, adds its
   * events and commits; the committed rows go to the outbox relay without a
   * poll delay (see `createOutboxWriter`).
   */
  outbox: OutboxWriter;
  /** Fires when the host starts shutting down. */
  closing: AbortSignal;
  /**
   * Environment the host was started with. Service factories read their own
   * settings from it (validated with `loadConfig`); handlers never do.
   */
  env: Readonly<Record<string, string | undefined>>;
  /** Embedded mode's data directory (for files such as generated keys), if any. */
  dataDir?: string;
  /**
   * The deployment's service credentials. {@link clients} sign every call with
   * them already; a service uses them itself only for calls it makes another
   * way (the gateway forwarding plain HTTP to receipts).
   */
  mesh: MeshCredentials;
  /**
   * The deployment's keyed fingerprints of secret values (`hmac-sha256:`),
   * the same in every service and across restarts (`fingerprint-key.ts`):
   * what a record of a secret read or a secret override keeps instead of a
   * plain hash.
   */
  fingerprints: SecretFingerprints;
}

/** What a service contributes to the server that hosts it. */
export interface ServiceModule {
  /** Register Connect handlers. */
  routes?(router: ConnectRouter): void;
  /**
   * Interceptors for the public server (e.g. the gateway's authentication).
   * Embedded: applied to every route of the one server, but not to in-process
   * calls between services. Distributed: applied to this service's server.
   */
  interceptors?: readonly Interceptor[];
  /** Plain HTTP (REST, SSE, UI); return true when handled. */
  http?: HttpHandler;
  /** WebSocket and other upgrades. */
  upgrade?: UpgradeHandler;
  /** Extra files for server reflection (message-only files such as events). */
  reflectionFiles?: readonly DescFile[];
  /**
   * Health dependencies of its own (e.g. a projector's lag), added to the
   * host's database and event-log checks; `trellis health` shows them.
   */
  health?: readonly HealthDependency[];
  /** Start background work (consumers, dispatchers) once the server listens. */
  start?(): Promise<void>;
  /** Stop background work; called before the database and event log close. */
  stop?(): Promise<void>;
}

/** A Trellis service, runnable by either host. */
export interface ServiceDefinition {
  /** Short name: "tasks", "chat", "gateway", … (also the default schema). */
  name: string;
  /** RPC services it provides (used to route clients to it). */
  provides: readonly DescService[];
  /** Kysely migrations of its schema; omit for stateless services. */
  migrations?: Record<string, Migration>;
  /** Port it listens on in distributed mode unless PORT says otherwise. */
  defaultPort: number;
  /**
   * Serves callers outside the mesh and authenticates them itself (the
   * gateway). Every other service only accepts calls that carry a valid
   * service credential (`mesh.ts`); health and reflection stay open.
   */
  public?: boolean;
  create(context: ServiceContext): ServiceModule | Promise<ServiceModule>;
}

/**
 * The hosted modules' routes as one registration, in start order; undefined
 * when none has routes. Both hosts serve several modules from one server
 * (embedded: all; distributed: `runServices`).
 */
export function routesOf(
  modules: readonly ServiceModule[],
): ((router: ConnectRouter) => void) | undefined {
  if (!modules.some((m) => m.routes)) return undefined;
  return (router) => {
    for (const module of modules) module.routes?.(router);
  };
}

/** HTTP handlers tried in order until one handles the request; undefined when there are none. */
export function firstHandling(handlers: readonly HttpHandler[]): HttpHandler | undefined {
  if (handlers.length <= 1) return handlers[0];
  return async (req, res) => {
    for (const handler of handlers) if (await handler(req, res)) return true;
    return false;
  };
}

/**
 * The controller of a {@link ServiceContext}'s `closing` signal. Every open
 * stream (SSE, WebSocket, Subscribe) listens to it until it ends: many
 * listeners is its normal state, so Node's warning above 10 would be noise.
 */
export function createClosingController(): AbortController {
  const closing = new AbortController();
  setMaxListeners(0, closing.signal);
  return closing;
}

/** What {@link registerShutdown} closes, each step a named closer. */
export interface ShutdownSteps {
  /** The controller whose signal is {@link ServiceContext.closing}. */
  closing: AbortController;
  /** Stops the modules; runs first, once `closing` has fired. */
  modules: { name: string; stop(): Promise<void> };
  relay: { stop(): Promise<void> };
  /** Closes the event log, signals and database; runs last. */
  storage: { name: string; close(): Promise<void> };
}

/**
 * Registers how a server hosting modules shuts down. `closing` fires as soon
 * as shutdown starts (long-lived streams end then, instead of holding the
 * drain until the grace period runs out). Closers run in reverse order of
 * registration: modules, outbox relay, then storage and connections.
 */
export function registerShutdown(
  server: Pick<TrellisService, "onClose" | "closing">,
  steps: ShutdownSteps,
): void {
  server.onClose(() => steps.storage.close(), steps.storage.name);
  server.closing.addEventListener("abort", () => steps.closing.abort(), { once: true });
  server.onClose(() => steps.relay.stop(), "outbox relay");
  server.onClose(async () => {
    steps.closing.abort();
    await steps.modules.stop();
  }, steps.modules.name);
}
