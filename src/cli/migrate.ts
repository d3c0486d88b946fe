/**
 * `trellis migrate`: bring every service's PostgreSQL schema up to date, then
 * exit. The Kubernetes migration Job runs it before the services roll
 * (deploy/k8s/base/migrate-job.yaml).
 *
 * This file checks the arguments and the settings; the services and the
 * database client are loaded only then (`migrate-run.ts`), so that a wrong
 * name or a missing DATABASE_URL is refused at once.
 */
import { serviceNames } from "../service-names.js";
import { parseCommand, printUsage, UsageError } from "./args.js";
import { migrateUsage } from "./usage.js";

/** `trellis migrate [--service NAME]...`: parse the arguments, then {@link runMigrate}. */
export async function runMigrateCommand(
  source: NodeJS.ProcessEnv,
  args: readonly string[],
): Promise<number> {
  const parsed = parseCommand(
    {
      name: "migrate",
      usage: migrateUsage,
      options: { service: { type: "string", multiple: true } },
    },
    args,
  );
  if (parsed.help) return printUsage(migrateUsage);
  return runMigrate(source, parsed.values.service ?? []);
}

/**
 * Migrate the named services (default: all) and print what was applied.
 * Exit code 0 when every schema is current; an unknown service name or no
 * DATABASE_URL is a usage error (exit 2);
 * a failed migration throws (the CLI prints it and exits 1).
 */
export async function runMigrate(
  source: NodeJS.ProcessEnv,
  only: readonly string[] = [],
): Promise<number> {
  const unknown = only.filter((name) => !serviceNames.includes(name));
  if (unknown.length > 0) {
    const known = serviceNames.join(", ");
    throw new UsageError(
      `unknown service ${unknown.map((n) => JSON.stringify(n)).join(", ")} (one of: ${known})`,
      "migrate",
      migrateUsage,
    );
  }
  if (!source.DATABASE_URL) {
    throw new UsageError(
      "DATABASE_URL is required: the PostgreSQL database to migrate",
      "migrate",
      migrateUsage,
    );
  }
  const { loadConfig, migrateConfigSchema } = await import("./settings.js");
  const config = loadConfig(migrateConfigSchema, source);
  const { migrateServices } = await import("./migrate-run.js");
  return migrateServices(config.DATABASE_URL, config.TRELLIS_STARTUP_TIMEOUT, only);
}
