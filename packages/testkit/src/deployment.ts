/**
 * A distributed deployment for integration tests: one test database, one
 * JetStream prefix, the environment every service of it shares, and the
 * services started on it, closed in reverse order with the streams and the
 * database.
 *
 * The services are run by the runner the caller passes (`runService` of
 * `@trellis/platform`): testkit sits below platform and does not import it.
 */
import { randomBytes } from "node:crypto";
import { testGround } from "./ground.js";
import type { TestDatabase } from "./index.js";

/** What a deployment needs of a running service: a way to close it. */
export interface ClosableService {
  close(): Promise<void>;
}

/** Runs a service with an environment, signals left alone (`runService`'s shape). */
export type ServiceRunner<Service, Running extends ClosableService> = (
  service: Service,
  options: { env: Record<string, string>; handleSignals: false },
) => Promise<Running>;

/** Options of {@link openDeployment}. */
export interface DeploymentOptions {
  /** Start of the stream prefix (default the database name). */
  prefix?: string;
  /** The mesh secret; `true` for a random one; none when absent. */
  meshSecret?: string | true;
  /** More settings every service gets (they win over the defaults). */
  env?: Record<string, string>;
}

/** A deployment under test. */
export interface TestDeployment<Service, Running extends ClosableService> {
  db: TestDatabase;
  prefix: string;
  /** What every service of the deployment gets: database, NATS, port 0, quiet logs. */
  env: Readonly<Record<string, string>>;
  /** Run `service` with {@link env} and `env`; {@link close} closes it. */
  start(service: Service, env?: Record<string, string>): Promise<Running>;
  /** Close the services (last started first), delete the streams, drop the database. */
  close(): Promise<void>;
}

/** A test database and stream prefix with nothing running yet. */
export async function openDeployment<Service, Running extends ClosableService>(
  database: string,
  run: ServiceRunner<Service, Running>,
  options: DeploymentOptions = {},
): Promise<TestDeployment<Service, Running>> {
  const ground = testGround(options.prefix ?? database, { database });
  const { databaseUrl, natsUrl, natsPrefix: prefix } = await ground.prepare();
  const secret =
    options.meshSecret === true ? randomBytes(32).toString("base64url") : options.meshSecret;
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    PORT: "0",
    TRELLIS_SHUTDOWN_GRACE: "200ms",
    TRELLIS_LOG_LEVEL: "error",
    ...(secret === undefined ? {} : { TRELLIS_MESH_SECRET: secret }),
    ...options.env,
  };
  const running: Running[] = [];
  return {
    db: ground.db,
    prefix,
    env,
    async start(service, extra = {}) {
      const started = await run(service, { env: { ...env, ...extra }, handleSignals: false });
      running.push(started);
      return started;
    },
    async close() {
      for (const service of running.reverse()) await service.close();
      await ground.remove();
    },
  };
}
