/**
 * Test helpers shared by every integration suite: a throwaway database per test
 * file on the real Postgres server, and unique names for NATS streams, so runs
 * never collide.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";

/** Postgres server the integration tests use (CI's `.ci/run` sets it). */
export const testDatabaseServerUrl =
  process.env.TRELLIS_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** NATS server the integration tests use. */
export const testNatsUrl = process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222";

/** A short random suffix, safe in database names and NATS subjects. */
export function uniqueSuffix(): string {
  return `${Date.now().toString(36)}${randomBytes(4).toString("hex")}`;
}

/** A unique name with a readable prefix, e.g. `uniqueName("evt")` → `evt_lx3…`. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${uniqueSuffix()}`;
}

/** A database created for one test file; drop it when done. */
export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function withDatabase(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Create a fresh database on the test server. */
export async function createTestDatabase(prefix = "trellis_test"): Promise<TestDatabase> {
  const name = uniqueName(prefix).toLowerCase();
  const admin = new pg.Client({ connectionString: testDatabaseServerUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: withDatabase(testDatabaseServerUrl, name),
    async drop() {
      const c = new pg.Client({ connectionString: testDatabaseServerUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Wait until `check` returns a truthy value, polling; throws after `timeoutMs`. */
export async function eventually<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${options.what ?? "condition"}${last ? `: ${String(last)}` : ""}`,
      );
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
}

/**
 * Delete the JetStream streams a test run created under `prefix` (the
 * `<PREFIX>_*` streams of the event log and signal bus), so runs leave
 * nothing behind on the shared server.
 */
export async function deleteTestStreams(prefix: string, servers = testNatsUrl): Promise<void> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers });
  try {
    const jsm = await jetstreamManager(nc);
    const wanted = `${prefix.toUpperCase().replace(/[^A-Z0-9_]/g, "_")}_`;
    for await (const info of jsm.streams.list()) {
      if (info.config.name.startsWith(wanted)) await jsm.streams.delete(info.config.name);
    }
  } finally {
    await nc.close();
  }
}
