// `trellis migrate`, what the Kubernetes migration Job runs, against the real
// PostgreSQL: it brings every service's schema up to date and exits, applies
// exactly the migrations a service applies at start (so a service started
// afterwards has nothing left to do), is idempotent, and refuses bad input
// with one clear line.
import { fileURLToPath } from "node:url";
import { createTestDatabase, runProcess, type TestDatabase } from "@trellis/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceMigrations } from "../../src/cli/migrate-run.js";
import { allServices } from "../../src/services.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

function trellis(args: string[], env: Record<string, string | undefined>) {
  return runProcess(process.execPath, ["bin/trellis.js", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
  });
}

describe("trellis migrate", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase("trellis_migrate");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("migrates every service's schema, then finds nothing to do", async () => {
    const first = await trellis(["migrate"], { DATABASE_URL: db.url });
    expect(first.code, first.err).toBe(0);
    for (const service of allServices) {
      const count = Object.keys(serviceMigrations(service)).length;
      expect(first.out).toContain(`${service.name}: applied ${count} (`);
    }

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      for (const service of allServices) {
        const { rows } = await client.query<{ name: string }>(
          `select name from "${service.name}".kysely_migration order by name`,
        );
        // The same set runService applies at start: outbox + the service's own.
        expect(rows.map((r) => r.name)).toEqual(Object.keys(serviceMigrations(service)).sort());
      }
    } finally {
      await client.end();
    }

    const again = await trellis(["migrate"], { DATABASE_URL: db.url });
    expect(again.code, again.err).toBe(0);
    expect(again.out.trim().split("\n")).toEqual(allServices.map((s) => `${s.name}: up to date`));
  }, 120_000);

  it("migrates only the services named", async () => {
    const result = await trellis(["migrate", "--service", "tasks", "--service", "chat"], {
      DATABASE_URL: db.url,
    });
    expect(result.code, result.err).toBe(0);
    expect(result.out.trim().split("\n")).toEqual(["tasks: up to date", "chat: up to date"]);
  }, 60_000);

  it("refuses an unknown service, a missing or malformed DATABASE_URL, in one line", async () => {
    const unknown = await trellis(["migrate", "--service", "billing"], { DATABASE_URL: db.url });
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/^trellis migrate: unknown service "billing" \(one of: gateway,/);

    // A required setting left out is a usage error (exit 2, with the usage).
    const missing = await trellis(["migrate"], { DATABASE_URL: "" });
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/^trellis migrate: DATABASE_URL is required/);
    expect(missing.err).not.toMatch(/\n\s+at /);

    const wrong = await trellis(["migrate"], { DATABASE_URL: "mysql://root@127.0.0.1/x" });
    expect(wrong.code).toBe(1);
    expect(wrong.err).toMatch(/^trellis: .*DATABASE_URL/);
  }, 60_000);

  it("gives up on an unreachable PostgreSQL after TRELLIS_STARTUP_TIMEOUT", async () => {
    const result = await trellis(["migrate"], {
      DATABASE_URL: "postgres://postgres@127.0.0.1:9/none",
      TRELLIS_STARTUP_TIMEOUT: "1s",
    });
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/trellis: PostgreSQL was not reachable within 1 s/);
  }, 60_000);
});
