/**
 * A distributed deployment for integration tests: one test database, one
 * JetStream prefix, the environment every service of it shares, and the
 * services started on it, closed in reverse order with the streams and the
 * database.
 */
import { randomBytes } from "node:crypto";
import { type RunningService, runService } from "@trellis/platform";
import {
  createTestDatabase,
  deleteTestStreams,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "@trellis/testkit";

/** Options of {@link openDeployment}. */
export interface DeploymentOptions {
  /** Start of the stream prefix (default the database name). */
  prefix?: string;
  /** The mesh secret; `true` for a random one; none when absent. */
  meshSecret?: string | true;
  /** More settings every service gets. */
  env?: Record<string, string>;
}

/** A deployment under test. */
export interface TestDeployment {
  db: TestDatabase;
  prefix: string;
  /** What every service of the deployment gets: database, NATS, port 0, quiet logs. */
  env: Readonly<Record<string, string>>;
  /** Run `service` with {@link env} and `env`; {@link close} closes it. */
  start(
    service: Parameters<typeof runService>[0],
    env?: Record<string, string>,
  ): Promise<RunningService>;
  /** Close the services (last started first), delete the streams, drop the database. */
  close(): Promise<void>;
}

/** A test database and stream prefix with nothing running yet. */
export async function openDeployment(
  database: string,
  options: DeploymentOptions = {},
): Promise<TestDeployment> {
  const prefix = uniqueName(options.prefix ?? database);
  const db = await createTestDatabase(database);
  const secret =
    options.meshSecret === true ? randomBytes(32).toString("base64url") : options.meshSecret;
  const env: Record<string, string> = {
    DATABASE_URL: db.url,
    NATS_URL: testNatsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    PORT: "0",
    TRELLIS_SHUTDOWN_GRACE: "200ms",
    TRELLIS_LOG_LEVEL: "error",
    ...(secret === undefined ? {} : { TRELLIS_MESH_SECRET: secret }),
    ...options.env,
  };
  const running: RunningService[] = [];
  return {
    db,
    prefix,
    env,
    async start(service, extra = {}) {
      const started = await runService(service, {
        env: { ...env, ...extra },
        handleSignals: false,
      });
      running.push(started);
      return started;
    },
    async close() {
      for (const service of running.reverse()) await service.close();
      await deleteTestStreams(prefix).catch(() => undefined);
      await db.drop();
    },
  };
}
