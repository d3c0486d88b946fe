/**
 * What `trellis migrate` does once its arguments and settings are checked
 * (`migrate.ts`).
 *
 * It applies what a distributed service applies at start (`runService` in
 * @trellis/platform): the outbox tables and the service's own migrations, in
 * the schema named after the service, under the same advisory lock. So a
 * service started afterwards finds nothing left to do, and running both at
 * once is safe.
 *
 * The services are loaded once PostgreSQL has answered: a missing database
 * or refused credentials are reported without them.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { type LogFields, waitForDependency } from "@trellis/runtime";
import { createDatabase, type Database, migrate, outboxMigrations } from "@trellis/storage";

/** The migrations a service's schema gets, as `runService` composes them. */
export function serviceMigrations(definition: ServiceDefinition) {
  return { ...outboxMigrations(definition.name), ...(definition.migrations ?? {}) };
}

// SQLSTATEs no retry can fix: no such database, authentication refused.
const permanentStates = new Set(["3D000", "28P01", "28000"]);

function isPermanent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && permanentStates.has(code)) return true;
    if (/database "[^"]*" does not exist|password authentication failed/.test(e.message)) {
      return true;
    }
    e = e.cause;
  }
  return false;
}

/** Open the database and check that PostgreSQL answers. */
async function open(url: string): Promise<Database<unknown>> {
  const db: Database<unknown> = await createDatabase({
    kind: "postgres",
    url,
    poolSize: 2,
    applicationName: "trellis-migrate",
  });
  try {
    await db.ping();
    return db;
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
}

// Each wait, as one line on stderr (stdout keeps what was applied).
const waitingLine = {
  warn(msg: string, fields?: LogFields) {
    process.stderr.write(`trellis migrate: ${msg} (retry in ${fields?.retry_in_ms} ms)\n`);
  },
};

async function connect(url: string, timeoutMs: number): Promise<Database<unknown>> {
  try {
    return await waitForDependency("PostgreSQL", () => open(url), {
      timeoutMs,
      logger: waitingLine,
      permanent: isPermanent,
    });
  } catch (error) {
    // A missing database or refused credentials will not change by waiting:
    // waitForDependency threw them as they were, at once.
    if (!isPermanent(error)) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`PostgreSQL refused the connection: ${reason} (check DATABASE_URL)`);
  }
}

/** Migrate the named services (default: all) and print what was applied; exit code 0. */
export async function migrateServices(
  databaseUrl: string,
  startupTimeoutMs: number,
  only: readonly string[],
): Promise<number> {
  const db = await connect(databaseUrl, startupTimeoutMs);
  try {
    const { allServices } = await import("../services.js");
    const services =
      only.length > 0 ? allServices.filter((s) => only.includes(s.name)) : allServices;
    for (const definition of services) {
      const { applied } = await migrate(db, {
        schema: definition.name,
        migrations: serviceMigrations(definition),
      });
      process.stdout.write(
        applied.length > 0
          ? `${definition.name}: applied ${applied.length} (${applied.join(", ")})\n`
          : `${definition.name}: up to date\n`,
      );
    }
  } finally {
    await db.close();
  }
  return 0;
}
