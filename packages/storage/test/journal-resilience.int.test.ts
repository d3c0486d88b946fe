import {
  createDatabase,
  createJournal,
  createProjector,
  type Database,
  journalMigrations,
  migrate,
} from "@trellis/storage";
import { createTestDatabase, eventually, type TestDatabase, uniqueName } from "@trellis/testkit";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// Postgres only: the journal and a projector while the server drops their
// connections (pg_terminate_backend, what a restarting server does to each
// session), so the shared test server keeps running for other suites.

describe("journal resilience (postgres)", () => {
  let testDatabase: TestDatabase;
  const opened: Database[] = [];

  beforeAll(async () => {
    testDatabase = await createTestDatabase("storage_jres");
  });
  afterAll(async () => {
    await Promise.all(opened.map((d) => d.close()));
    await testDatabase?.drop();
  });

  const open = async (applicationName: string) => {
    const database = await createDatabase({
      kind: "postgres",
      url: testDatabase.url,
      applicationName,
      onBackgroundError: () => {},
    });
    opened.push(database);
    return database;
  };
  const terminate = async (applicationName: string): Promise<number> => {
    const admin = new pg.Client({ connectionString: testDatabase.url });
    await admin.connect();
    try {
      const { rows } = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
         where application_name = $1 and pid <> pg_backend_pid()`,
        [applicationName],
      );
      return rows.length;
    } finally {
      await admin.end();
    }
  };
  const entry = (stream: string) => ({ stream, kind: "k", body: new Uint8Array([1, 2, 3]) });

  it("keeps projecting, exactly once, while the server drops its connections", async () => {
    const app = uniqueName("jres");
    const writer = await open(`${app}_w`);
    const reader = await open(app);
    const schema = uniqueName("jr");
    await migrate(writer, { schema, migrations: journalMigrations(schema) });
    await sql`create table ${sql.id(schema, "applied")} (position bigint not null)`.execute(
      writer.kysely,
    );
    const journal = createJournal(writer, { schema });
    for (let i = 0; i < 30; i++) await journal.append([entry(`s${i}`), entry(`s${i}`)]);
    const errors: unknown[] = [];
    const projector = await createProjector({
      database: reader,
      schema,
      name: "resilient",
      batchSize: 10,
      pollIntervalMs: 50,
      retryMs: 20,
      maxRetryMs: 200,
      onError: (error) => errors.push(error),
      project: async (batch, trx) => {
        await sql`insert into ${sql.id(schema, "applied")} (position) values ${sql.join(
          batch.map((r) => sql`(${r.position})`),
        )}`.execute(trx);
        // Long enough to be killed in the middle of a batch now and then.
        await sql`select pg_sleep(0.03)`.execute(trx);
      },
    });
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 30));
      await terminate(app);
    }
    await eventually(() => expect(projector.position()).toBe(60n), { timeoutMs: 20_000 });
    expect(errors.length).toBeGreaterThan(0);
    const rows = await sql<{ position: bigint; n: bigint }>`
      select position, count(*) as n from ${sql.id(schema, "applied")}
      group by position order by position`.execute(writer.kysely);
    expect(rows.rows.map((r) => Number(r.position))).toEqual(
      Array.from({ length: 60 }, (_, i) => i + 1),
    );
    expect(rows.rows.every((r) => Number(r.n) === 1)).toBe(true);
    await eventually(() => expect(projector.status()).toMatchObject({ failures: 0, lag: 0n }));
    await projector.stop();
    await journal.close();
  });

  it("fails the appends of a batch whose connection dropped, then appends again", async () => {
    const app = uniqueName("jres");
    const writer = await open(app);
    const schema = uniqueName("jr");
    await migrate(writer, { schema, migrations: journalMigrations(schema) });
    const journal = createJournal(writer, { schema });
    await journal.append([entry("s")]);
    // Hold the journal's lock elsewhere so the next batch waits inside its
    // transaction, then drop that connection.
    const blocker = await open(`${app}_lock`);
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let holding: () => void = () => {};
    const holds = new Promise<void>((r) => {
      holding = r;
    });
    const held = blocker.kysely.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtextextended(${`trellis.journal.${schema}`}, 0))`.execute(
        trx,
      );
      holding();
      await gate;
    });
    try {
      await holds;
      // Observed at once: it rejects while the test is still terminating.
      const waiting = journal.append([entry("s")], { idempotencyKey: "once" }).then(
        () => undefined,
        (error: unknown) => error,
      );
      await new Promise((r) => setTimeout(r, 100));
      expect(await terminate(app)).toBeGreaterThan(0);
      expect(await waiting).toMatchObject({ reason: "service_unavailable" });
    } finally {
      release();
      await held;
    }
    // Retried with its key: written once, right after the first entry.
    await eventually(async () =>
      expect(await journal.append([entry("s")], { idempotencyKey: "once" })).toEqual({
        positions: [2n],
        duplicate: false,
      }),
    );
    expect(await journal.append([entry("s")], { idempotencyKey: "once" })).toEqual({
      positions: [2n],
      duplicate: true,
    });
    await journal.close();
  });
});
