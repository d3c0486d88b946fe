/**
 * How the shared suite reaches a tasks service: over a real transport (gRPC
 * over h2c), embedded (PGlite + in-process log) or distributed (PostgreSQL +
 * JetStream, one database and one NATS prefix per test file).
 */
import type { Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { connectNats } from "@trellis/eventlog";
import type { AgentExecutor, HarnessTool } from "@trellis/execution";
import {
  type Caller,
  createMeshClientInterceptor,
  processMeshCredentials,
  runService,
  setCallerHeaders,
  startEmbedded,
} from "@trellis/platform";
import { createTestDatabase, type TestDatabase, testNatsUrl, uniqueName } from "@trellis/testkit";
import { createTasksService } from "../../src/definition.js";
import { clientsOf, type TasksClients } from "../../src/testing/clients.js";

export { clientsOf, type TasksClients };

/** A running tasks service under test. */
export interface TasksHarness extends TasksClients {
  url: string;
  /** The same clients, calling as an authenticated caller (gateway headers). */
  as(caller: Omit<Caller, "scopes">): TasksClients;
  close(): Promise<void>;
}

/** Options of a harness start. */
export interface StartOptions {
  executor?: AgentExecutor;
  /** The harness tools replays of harness tasks take schemas from. */
  replayTools?: readonly HarnessTool[];
  /** Extra environment (tasks settings). */
  env?: Record<string, string>;
  replicaId?: string;
}

/** A backend the suite runs on. */
export interface TasksTarget {
  readonly name: string;
  /** True when several harnesses share storage (replicas); false for embedded. */
  readonly replicas: boolean;
  start(options?: StartOptions): Promise<TasksHarness>;
  teardown(): Promise<void>;
}

// Tests call the service directly, as another mesh service would: with the
// service credentials (packages/platform mesh.ts) the service requires.
const asMeshPeer = createMeshClientInterceptor(processMeshCredentials(), "test");

/** Clients of a tasks service listening at `url` (gRPC over h2c). */
export function clientsFor(url: string): TasksClients {
  return clientsOf(createGrpcTransport({ baseUrl: url, interceptors: [asMeshPeer] }));
}

/** Calls as `caller`, with the caller headers the gateway sets. */
export function callingAs(caller: Omit<Caller, "scopes">): Interceptor {
  return (next) => (req) => {
    // Bound to its workspace: an admin credential (`*`) would see every one.
    setCallerHeaders(req.header, { ...caller, scopes: ["sessions:*", "tasks:*"] });
    return next(req);
  };
}

function harnessOf(url: string, close: () => Promise<void>): TasksHarness {
  const transport = createGrpcTransport({ baseUrl: url, interceptors: [asMeshPeer] });
  return {
    url,
    ...clientsOf(transport),
    as(caller) {
      return clientsOf(
        createGrpcTransport({ baseUrl: url, interceptors: [callingAs(caller), asMeshPeer] }),
      );
    },
    close,
  };
}

const quietEnv = { TRELLIS_LOG_LEVEL: "error" };

/** Embedded mode: PGlite in memory, the in-process log; each start is a fresh deployment. */
export function embeddedTarget(): TasksTarget {
  return {
    name: "embedded",
    replicas: false,
    async start(options = {}) {
      process.env.TRELLIS_LOG_LEVEL ??= "error";
      const trellis = await startEmbedded({
        services: [
          createTasksService({
            ...(options.executor ? { executor: options.executor } : {}),
            ...(options.replicaId ? { replicaId: options.replicaId } : {}),
            ...(options.replayTools ? { replayTools: options.replayTools } : {}),
          }),
        ],
        port: 0,
        env: { ...process.env, ...quietEnv, ...options.env },
      });
      return harnessOf(trellis.address.url, () => trellis.close({ graceMs: 1000 }));
    },
    async teardown() {},
  };
}

/**
 * Distributed mode: real PostgreSQL and JetStream. Every start is another
 * replica of the same deployment (one database, one NATS prefix per target).
 */
export function distributedTarget(): TasksTarget & {
  prefix: string;
  databaseUrl(): Promise<string>;
} {
  let database: TestDatabase | undefined;
  const prefix = uniqueName("tasks").replaceAll("-", "_");
  return {
    name: "distributed",
    replicas: true,
    async start(options = {}) {
      process.env.TRELLIS_LOG_LEVEL ??= "error";
      database ??= await createTestDatabase("tasks_test");
      const running = await runService(
        createTasksService({
          ...(options.executor ? { executor: options.executor } : {}),
          ...(options.replicaId ? { replicaId: options.replicaId } : {}),
          ...(options.replayTools ? { replayTools: options.replayTools } : {}),
        }),
        {
          env: {
            ...quietEnv,
            DATABASE_URL: database.url,
            NATS_URL: testNatsUrl,
            TRELLIS_NATS_PREFIX: prefix,
            PORT: "0",
            TRELLIS_SHUTDOWN_GRACE: "1s",
            ...options.env,
          },
          handleSignals: false,
        },
      );
      return harnessOf(running.address.url, () => running.close());
    },
    /** The NATS subject prefix of this deployment. */
    prefix,
    async databaseUrl() {
      database ??= await createTestDatabase("tasks_test");
      return database.url;
    },
    async teardown() {
      await database?.drop();
      const nc = await connectNats({ servers: testNatsUrl });
      try {
        const jsm = await jetstreamManager(nc);
        for (const suffix of ["EVENTS", "SIGNALS"]) {
          await jsm.streams.delete(`${prefix.toUpperCase()}_${suffix}`).catch(() => false);
        }
      } finally {
        await nc.close();
      }
    },
  };
}
