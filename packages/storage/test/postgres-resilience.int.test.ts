import { create } from "@bufbuild/protobuf";
import { EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import {
  appendToOutbox,
  createDatabase,
  createOutboxRelay,
  type Database,
  migrate,
  outboxMigrations,
  ping,
} from "@trellis/storage";
import { createTestDatabase, eventually, type TestDatabase, uniqueName } from "@trellis/testkit";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRecordingEventLog } from "../src/testing/recording-event-log.js";

// Postgres only: what a server restart or a dead server does to a Database.
// A restart is simulated per connection with pg_terminate_backend (the same
// FATAL admin-shutdown message a restarting server sends), so the shared
// test server keeps running for other suites.

describe("postgres resilience", () => {
  let testDatabase: TestDatabase;
  const opened: Database[] = [];

  beforeAll(async () => {
    testDatabase = await createTestDatabase("storage_res");
  });
  afterAll(async () => {
    await Promise.all(opened.map((d) => d.close()));
    await testDatabase?.drop();
  });

  const open = async (applicationName: string, errors: string[] = []) => {
    const database = await createDatabase({
      kind: "postgres",
      url: testDatabase.url,
      applicationName,
      onBackgroundError: (_error, context) => errors.push(context),
    });
    opened.push(database);
    return database;
  };

  /** Terminates this application's server sessions matching `where` (SQL on pg_stat_activity `a`). */
  const terminate = async (applicationName: string, where = "true"): Promise<number> => {
    const admin = new pg.Client({ connectionString: testDatabase.url });
    await admin.connect();
    try {
      const { rows } = await admin.query(
        `select pg_terminate_backend(a.pid) from pg_stat_activity a
         where a.application_name = $1 and a.pid <> pg_backend_pid() and (${where})`,
        [applicationName],
      );
      return rows.length;
    } finally {
      await admin.end();
    }
  };

  it("fails ping fast when the server is down", async () => {
    const down = await createDatabase({
      kind: "postgres",
      url: "postgres://postgres@127.0.0.1:1/postgres",
    });
    opened.push(down);
    const started = performance.now();
    await expect(ping(down)).rejects.toMatchObject({ reason: "service_unavailable" });
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("keeps the pool working after the server drops idle and busy connections", async () => {
    const app = uniqueName("pool");
    const errors: string[] = [];
    const database = await open(app, errors);
    // One connection lent out to a transaction, idle between two statements…
    let proceed: () => void = () => {};
    const gate = new Promise<void>((r) => {
      proceed = r;
    });
    const inFlight = database.kysely.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      await gate;
      await sql`select 1`.execute(trx);
    });
    // …and four idle ones in the pool.
    await new Promise((r) => setTimeout(r, 50));
    await Promise.all(
      Array.from({ length: 4 }, () => sql`select pg_sleep(0.05)`.execute(database.kysely)),
    );

    let killed = 0;
    try {
      killed = await terminate(app);
    } finally {
      proceed();
    }
    expect(killed).toBe(5);
    await expect(inFlight).rejects.toThrow();
    // pg-pool reports an idle client's error after discarding it: once all
    // four are reported, no dead connection is left to hand out.
    await eventually(
      () => errors.filter((c) => c === "idle pooled connection failed").length === 4,
      { what: "idle connections discarded" },
    );
    expect(errors).toContain("pooled connection failed");

    // New work gets new connections.
    await expect(ping(database)).resolves.toBeUndefined();
    const { rows } = await sql<{ n: bigint }>`select count(*) as n from pg_stat_activity`.execute(
      database.kysely,
    );
    expect(rows[0]?.n).toBeGreaterThan(0n);
  });

  it("relay gives up its lock when the lock connection dies, then takes it back", async () => {
    const app = uniqueName("relay");
    const database = await open(app);
    const schema = uniqueName("st");
    await migrate(database, { schema, migrations: outboxMigrations(schema) });
    const log = createRecordingEventLog();
    const relay = createOutboxRelay({
      database,
      schema,
      eventLog: log,
      pollIntervalMs: 50,
      onError: () => {},
    });
    relay.start();
    await eventually(() => relay.active, { what: "relay active" });

    // Only the session holding the advisory lock.
    const holders = async (): Promise<number[]> => {
      const { rows } = await sql<{ pid: number }>`
        select l.pid from pg_locks l join pg_stat_activity a on a.pid = l.pid
        where l.locktype = 'advisory' and l.granted and a.application_name = ${app}`.execute(
        database.kysely,
      );
      return rows.map((r) => Number(r.pid));
    };
    const [before] = await holders();
    const killed = await terminate(
      app,
      "a.pid in (select pid from pg_locks where locktype = 'advisory' and granted)",
    );
    expect(killed).toBe(1);
    // The relay notices the lost lock and takes it back on a new connection. The
    // moment it is inactive can be too short to observe under load, so check the
    // outcome: a different backend holds the lock and the relay is active.
    await eventually(
      async () => {
        const now = await holders();
        return now.length === 1 && now[0] !== before && relay.active;
      },
      { what: "lock taken back on a new connection", timeoutMs: 20_000 },
    );

    await database.kysely.transaction().execute((trx) =>
      appendToOutbox(trx, schema, [
        create(EventSchema, {
          kind: "task.submitted",
          workspaceId: "ws_1",
          resource: create(ResourceRefSchema, { object: "task", id: "task_1" }),
        }),
      ]),
    );
    await eventually(() => log.stats.stored === 1, { what: "published after takeover" });
    await relay.stop();
  });

  it("listener reconnects after its connection dies, and wakes its handlers", async () => {
    const app = uniqueName("listen");
    const errors: string[] = [];
    const database = await open(app, errors);
    const channel = uniqueName("ch");
    let calls = 0;
    await database.listen(channel, () => calls++);
    expect(await terminate(app, "a.query ilike 'LISTEN%'")).toBe(1);
    // The catch-up call after reconnecting (notifications may have been missed).
    await eventually(() => calls === 1, { what: "catch-up call" });
    expect(errors).toContain("notification listener disconnected");
    await sql`select pg_notify(${channel}, '')`.execute(database.kysely);
    await eventually(() => calls === 2, { what: "notification after reconnect" });
  });
});
