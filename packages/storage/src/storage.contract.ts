/**
 * The storage contract: one suite every backend of @trellis/storage passes
 * (PGlite in memory, PostgreSQL). A backend supplies a
 * {@link StorageContractTarget} and a two-line spec file:
 *
 * @example
 *   import { describeStorageContract, pgliteTarget } from "@trellis/storage/contract";
 *   describeStorageContract("pglite", pgliteTarget);
 *
 * The event log is reached only through the EventLog port; the recording
 * double is the default and an in-process EventLog can replace it
 * (`options.createEventLog`).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, equals } from "@bufbuild/protobuf";
import {
  type Event,
  EventPayloadSchema,
  EventSchema,
  ResourceRefSchema,
} from "@trellis/contracts/core";
import {
  type AppendResult,
  type EventLog,
  type LoggedEvent,
  MAX_EVENT_BYTES,
} from "@trellis/eventlog";
import { isTrellisError, TrellisError } from "@trellis/runtime";
import { createTestDatabase, eventually, uniqueName } from "@trellis/testkit";
import { type Kysely, type Migration, sql, type Transaction } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabase, type DatabaseConfig } from "./create-database.js";
import type { Database } from "./database.js";
import { openPGlite } from "./dialect/pglite/pglite-database.js";
import { migrate } from "./migrate.js";
import { DEAD_LETTER_KIND, type DeadLetter } from "./outbox/dead-letter.js";
import {
  appendToOutbox,
  type OutboxEntry,
  outboxTables,
  pruneOutbox,
  readOutbox,
  sequenceOutboxEvents,
} from "./outbox/outbox.js";
import { createOutboxRelay, type OutboxRelay } from "./outbox/outbox-relay.js";
import { outboxMigrations } from "./outbox/outbox-schema.js";
import { createOutboxWriter } from "./outbox/outbox-writer.js";
import type { ChildLine, CrashChildConfig } from "./testing/outbox-crash-child.js";
import { createRecordingEventLog } from "./testing/recording-event-log.js";

/** One backend under test: a database several handles ("replicas") can open. */
export interface StorageContractTarget {
  /** A new Database on the same underlying database each call. */
  open(): Promise<Database>;
  /**
   * How a child process reaches the same database. Given only where a
   * process can be killed without taking the database with it (a server);
   * the crash tests are skipped otherwise.
   */
  childConfig?: DatabaseConfig;
  /** Drops / closes everything the target created. */
  teardown(): Promise<void>;
}

/** Options of {@link describeStorageContract}. */
export interface StorageContractOptions {
  /** The event log the relay publishes to (default: the recording double). */
  createEventLog?: () => EventLog | Promise<EventLog>;
}

/** Target: one in-memory PGlite instance shared by every handle (one process). */
export async function pgliteTarget(): Promise<StorageContractTarget> {
  const pglite = await openPGlite();
  const opened: Database[] = [];
  return {
    async open() {
      const database = await createDatabase({ kind: "pglite", pglite });
      opened.push(database);
      return database;
    },
    async teardown() {
      await Promise.all(opened.map((d) => d.close()));
      await pglite.close();
    },
  };
}

/** Target: a fresh database on the test Postgres server, dropped at teardown. */
export async function postgresTarget(): Promise<StorageContractTarget> {
  const testDatabase = await createTestDatabase("storage");
  const config: DatabaseConfig = { kind: "postgres", url: testDatabase.url };
  const opened: Database[] = [];
  return {
    childConfig: config,
    async open() {
      const database = await createDatabase(config);
      opened.push(database);
      return database;
    },
    async teardown() {
      await Promise.all(opened.map((d) => d.close()));
      await testDatabase.drop();
    },
  };
}

/** Registers the storage contract suite for one backend. */
export function describeStorageContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
  options: StorageContractOptions = {},
): void {
  const newEventLog = async (): Promise<EventLog> =>
    options.createEventLog ? options.createEventLog() : createRecordingEventLog();

  describe(`storage contract: ${name}`, () => {
    let target: StorageContractTarget;
    let database: Database;
    const relays: OutboxRelay[] = [];

    beforeAll(async () => {
      target = await factory();
      database = await target.open();
    });
    afterAll(async () => {
      await Promise.all(relays.map((r) => r.stop()));
      await target?.teardown();
    });

    const startRelay = (
      eventLog: Pick<EventLog, "append">,
      schema: string,
      extra: {
        pollIntervalMs?: number;
        batchSize?: number;
        onError?: (e: unknown) => void;
        logRebuiltFromOutbox?: boolean;
        listen?: boolean;
        retryDelayMs?: number;
        onDeadLetter?: (dead: DeadLetter) => void;
      } = {},
      on: Database = database,
    ): OutboxRelay => {
      const relay = createOutboxRelay({
        database: on,
        schema,
        eventLog,
        pollIntervalMs: 50,
        retryDelayMs: 10,
        ...extra,
      });
      relays.push(relay);
      relay.start();
      return relay;
    };

    /** A fresh schema with the outbox migrated in. */
    const outboxSchema = async (): Promise<string> => {
      const schema = uniqueName("st");
      await migrate(database, { schema, migrations: outboxMigrations(schema) });
      return schema;
    };

    describe("database", () => {
      it("reads int8 (and count, int8[]) as bigint and bytea as Uint8Array", async () => {
        const { rows } = await sql<{
          small: unknown;
          big: unknown;
          n: unknown;
          list: unknown;
          bytes: unknown;
        }>`select 7::int8 as small, 9007199254740993::int8 as big, count(*) as n,
                 array[1, null, 3]::int8[] as list, decode('01ff', 'hex') as bytes
            from (values (1), (2)) as v(x)`.execute(database.kysely);
        const row = rows[0];
        expect(row?.small).toBe(7n);
        expect(row?.big).toBe(9007199254740993n);
        expect(row?.n).toBe(2n);
        expect(row?.list).toEqual([1n, null, 3n]);
        expect(row?.bytes).toBeInstanceOf(Uint8Array);
        expect(Array.from(row?.bytes as Uint8Array)).toEqual([1, 255]);
      });

      it("answers ping", async () => {
        await expect(database.ping()).resolves.toBeUndefined();
      });

      it("lets one holder at a time have a named lock, across handles", async () => {
        const other = await target.open();
        const name = uniqueName("lock");
        const first = await database.acquireLock(name);
        let secondGranted = false;
        const second = other.acquireLock(name).then((lease) => {
          secondGranted = true;
          return lease;
        });
        await new Promise((r) => setTimeout(r, 200));
        expect(secondGranted).toBe(false);

        // Giving up at once, and after waiting a while (blocked on the server).
        for (const after of [0, 200]) {
          const aborter = new AbortController();
          const third = database.acquireLock(name, { signal: aborter.signal });
          setTimeout(() => aborter.abort(new Error("gave up")), after);
          await expect(third).rejects.toThrow("gave up");
        }

        await first.release();
        const lease = await second;
        expect(lease.lost.aborted).toBe(false);
        await lease.release();
        // Released means free: an immediate acquire succeeds.
        await (await database.acquireLock(name)).release();
      });

      it("notifies listeners of committed NOTIFYs only", async () => {
        const other = await target.open();
        const channel = uniqueName("ch");
        let calls = 0;
        const unlisten = await database.listen(channel, () => calls++);
        await other.kysely
          .transaction()
          .execute(async (trx) => {
            await sql`select pg_notify(${channel}, '')`.execute(trx);
            throw new Error("roll back");
          })
          .catch(() => {});
        await new Promise((r) => setTimeout(r, 200));
        expect(calls).toBe(0);
        await other.kysely
          .transaction()
          .execute((trx) => sql`select pg_notify(${channel}, '')`.execute(trx));
        await eventually(() => calls === 1, { what: "notification" });
        await unlisten();
      });

      it("hands listeners the NOTIFY's payload", async () => {
        const channel = uniqueName("ch");
        const payloads: string[] = [];
        const unlisten = await database.listen(channel, (payload) => payloads.push(payload));
        await sql`select pg_notify(${channel}, '42')`.execute(database.kysely);
        await eventually(() => payloads.length === 1, { what: "notification" });
        expect(payloads).toEqual(["42"]);
        await unlisten();
      });
    });

    describe("migrate", () => {
      const things: Record<string, Migration> = {
        "2026_11_22_create_things": {
          async up(db: Kysely<unknown>) {
            // Unqualified on purpose: migrate() scopes both kysely and raw SQL.
            await db.schema
              .createTable("things")
              .addColumn("id", "text", (c) => c.primaryKey())
              .execute();
            await sql`create table raw_things (id int)`.execute(db);
          },
        },
      };
      const tablesOf = async (schema: string): Promise<string[]> => {
        const { rows } = await sql<{ table_name: string }>`
          select table_name from information_schema.tables
          where table_schema = ${schema} order by table_name`.execute(database.kysely);
        return rows.map((r) => r.table_name);
      };

      it("creates the schema, applies migrations once, keeps bookkeeping in the schema", async () => {
        const schema = uniqueName("st");
        const migrations = { ...outboxMigrations(schema), ...things };
        const first = await migrate(database, { schema, migrations });
        expect(first.applied).toEqual([
          "2026_11_22_000_create_outbox",
          "2026_11_22_create_things",
          "2027_02_03_000_outbox_notify_position",
        ]);
        const second = await migrate(database, { schema, migrations });
        expect(second.applied).toEqual([]);
        expect(await tablesOf(schema)).toEqual([
          "kysely_migration",
          "kysely_migration_lock",
          "outbox",
          "outbox_sequence",
          "raw_things",
          "things",
        ]);
      });

      it("is safe when replicas migrate at the same moment", async () => {
        const schema = uniqueName("st");
        const migrations = { ...outboxMigrations(schema), ...things };
        const handles = [database, ...(await Promise.all([1, 2, 3].map(() => target.open())))];
        const results = await Promise.all(handles.map((h) => migrate(h, { schema, migrations })));
        const applied = results.flatMap((r) => r.applied);
        expect(applied.sort()).toEqual(Object.keys(migrations).sort());
        expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
      });

      it("applies all pending migrations or none, and names the one that failed", async () => {
        const schema = uniqueName("st");
        const error = await migrate(database, {
          schema,
          migrations: {
            ...things,
            "2026_11_23_broken": {
              async up(db: Kysely<unknown>) {
                await sql`select * from no_such_table`.execute(db);
              },
            },
          },
        }).catch((e: unknown) => e);
        expect(isTrellisError(error)).toBe(true);
        expect(error).toMatchObject({
          reason: "internal_error",
          metadata: { migration: "2026_11_23_broken" },
        });
        expect(await tablesOf(schema)).not.toContain("things");
      });

      it("rejects schema names that would need quoting", async () => {
        for (const schema of ["Tasks", "pg_tasks", "tasks-1", "", "a".repeat(41)]) {
          const error = await migrate(database, { schema, migrations: {} }).catch(
            (e: unknown) => e,
          );
          expect(error).toMatchObject({ reason: "invalid_request", param: "schema" });
        }
      });
    });

    describe("outbox: unit of work (createOutboxWriter)", () => {
      it("appends at commit, folds into the caller's statement, hands over exactly the committed rows", async () => {
        const schema = await outboxSchema();
        const handed: (readonly LoggedEvent[] | undefined)[] = [];
        const writer = createOutboxWriter({ schema, relay: { kick: (rows) => handed.push(rows) } });
        await writer.transaction(database.kysely, async (unit) => {
          unit.add([event("ws_1", "task_u"), event("ws_1", "task_v")]);
          const fold = await unit.fold();
          if (!fold) throw new Error("nothing folded");
          const values = fold.rows.map(
            (r) =>
              sql`(${r.id}, ${r.workspace_id}, ${r.session_id}, ${r.resource_object},
                ${r.resource_id}, ${r.sequence}, ${r.kind}, ${r.body}, ${r.created_at})`,
          );
          const result = await sql<{ positions: unknown }>`
            with mine as (
              insert into ${sql.raw(fold.table)} (id, workspace_id, session_id, resource_object,
                resource_id, sequence, kind, body, created_at)
              values ${sql.join(values)} returning ${sql.raw(fold.returning)})
            select ${sql.raw(fold.positions("mine"))} as positions`.execute(unit.trx);
          fold.settle(result.rows[0]?.positions);
          unit.add([event("ws_1", "task_u")]);
        });
        // A rollback appends nothing and hands nothing over.
        await expect(
          writer.transaction(database.kysely, async (unit) => {
            unit.add([event("ws_1", "task_w")]);
            throw new Error("roll back");
          }),
        ).rejects.toThrow("roll back");
        const stored = await readAll(database, schema);
        expect(stored.map((s) => s.event.sequence)).toEqual([1n, 1n, 2n]);
        expect(handed).toHaveLength(1);
        expect(handed[0]?.map((e) => [e.position, e.event.id])).toEqual(
          stored.map((s) => [s.position, s.event.id]),
        );
        handed[0]?.forEach((e, i) => {
          expect(equals(EventSchema, e.event, stored[i]?.event as Event)).toBe(true);
        });
      });
    });

    describe("outbox: fresh resources in one statement (OutboxWriter.fresh)", () => {
      it("sequences without asking, inserts in the caller's statement, refuses a resource with events", async () => {
        const schema = await outboxSchema();
        const handed: (readonly LoggedEvent[] | undefined)[] = [];
        const writer = createOutboxWriter({ schema, relay: { kick: (rows) => handed.push(rows) } });
        const run = async (events: Event[], when?: boolean) => {
          const fold = writer.fresh(events);
          const result = await sql<{ positions: unknown }>`
            with ${fold.ctes("mine", when === undefined ? undefined : sql`${when}::boolean`)}
            select ${sql.raw(fold.positions("mine"))} as positions`.execute(database.kysely);
          return { fold, positions: result.rows[0]?.positions };
        };
        const input = [event("ws_1", "rcpt_a"), event("ws_1", "rcpt_b"), event("ws_1", "rcpt_a")];
        const { fold, positions } = await run(input);
        expect(fold.size).toBe(3);
        fold.committed(positions);
        const stored = await readAll(database, schema);
        expect(stored.map((s) => [s.event.resource?.id, s.event.sequence])).toEqual([
          ["rcpt_a", 1n],
          ["rcpt_b", 1n],
          ["rcpt_a", 2n],
        ]);
        expect(stored[2]?.event.previousEventId).toBe(stored[0]?.event.id);
        expect(input[0]?.sequence).toBe(0n); // copied, not adopted
        expect(handed[0]?.map((e) => [e.position, e.event.id])).toEqual(
          stored.map((s) => [s.position, s.event.id]),
        );
        // The counters continue where the statement left them.
        const [next] = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "rcpt_a")]),
        );
        expect(next?.sequence).toBe(3n);
        expect(next?.previousEventId).toBe(stored[2]?.event.id);
        // Gated off: nothing written.
        await run([event("ws_1", "rcpt_c")], false);
        expect(await readAll(database, schema)).toHaveLength(4);
        // Not fresh after all: the statement fails, nothing written.
        const error = await run([event("ws_1", "rcpt_d"), event("ws_1", "rcpt_b")]).catch(
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ code: "23505" });
        expect(await readAll(database, schema)).toHaveLength(4);
      });
    });

    describe("outbox: appendToOutbox", () => {
      it("assigns per-resource sequence and previous_event_id, fills id and created_at", async () => {
        const schema = await outboxSchema();
        const input = [
          event("ws_1", "task_a"),
          event("ws_1", "task_b"),
          event("ws_1", "task_a", { id: "evt_given" }),
        ];
        const first = await inTransaction(database, (trx) => appendToOutbox(trx, schema, input));
        expect(first.map((e) => e.sequence)).toEqual([1n, 1n, 2n]);
        expect(first.map((e) => e.previousEventId)).toEqual(["", "", first[0]?.id]);
        expect(first[0]?.id).toMatch(/^evt_[0-9a-f]{32}$/);
        expect(first[2]?.id).toBe("evt_given");
        expect(first.every((e) => e.createdAt !== undefined)).toBe(true);
        // The caller's objects are left alone.
        expect(input[0]?.sequence).toBe(0n);
        expect(input[0]?.id).toBe("");

        const [next] = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_a")]),
        );
        expect(next?.sequence).toBe(3n);
        expect(next?.previousEventId).toBe("evt_given");

        const stored = await readAll(database, schema);
        expect(stored.map((s) => s.event.id)).toEqual([...first, next].map((e) => e?.id));
        stored.forEach((s, i) => {
          expect(equals(EventSchema, s.event, [...first, next][i] as Event)).toBe(true);
          expect(s.publishedAt).toBeNull();
        });
        expect(await inTransaction(database, (trx) => appendToOutbox(trx, schema, []))).toEqual([]);
      });

      it("sequenceOutboxEvents: the caller inserts the rows in its own statement", async () => {
        const schema = await outboxSchema();
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_s")]),
        );
        const sequenced = await inTransaction(database, async (trx) => {
          const { events, rows } = await sequenceOutboxEvents(trx, schema, [
            event("ws_1", "task_s"),
            event("ws_1", "task_t"),
          ]);
          expect(rows.map((r) => [r.resource_id, r.sequence])).toEqual([
            ["task_s", 2n],
            ["task_t", 1n],
          ]);
          // One statement of the caller's: here a data-modifying CTE.
          await trx
            .with("new_outbox", (q) =>
              outboxTables(q as Kysely<unknown>, schema)
                .insertInto("outbox")
                .values(rows)
                .returning("position"),
            )
            .selectFrom("new_outbox")
            .selectAll()
            .execute();
          return events;
        });
        // A rolled-back sequencing uses up nothing.
        await expect(
          inTransaction(database, async (trx) => {
            await sequenceOutboxEvents(trx, schema, [event("ws_1", "task_s")]);
            throw new Error("rolled back");
          }),
        ).rejects.toThrow("rolled back");
        const [after] = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_s")]),
        );
        expect(after?.sequence).toBe(3n);
        const stored = await readAll(database, schema);
        expect(stored.map((s) => s.event.id).slice(1, 3)).toEqual(sequenced.map((e) => e.id));
        expect(stored.map((s) => [s.event.resource?.id, s.event.sequence])).toEqual([
          ["task_s", 1n],
          ["task_s", 2n],
          ["task_t", 1n],
          ["task_s", 3n],
        ]);
        expectChained(stored.filter((s) => s.event.resource?.id === "task_s").map((s) => s.event));
        await expect(
          database.kysely
            .connection()
            .execute((c) => sequenceOutboxEvents(c as unknown as Transaction<unknown>, schema, [])),
        ).rejects.toMatchObject({ reason: "invalid_request" });
      });

      it("stays gap-free per resource under concurrent transactions (20 tx × 10 events)", async () => {
        const schema = await outboxSchema();
        const started = performance.now();
        await Promise.all(
          Array.from({ length: 20 }, () =>
            inTransaction(database, (trx) =>
              appendToOutbox(
                trx,
                schema,
                Array.from({ length: 10 }, () => event("ws_1", "task_hot")),
              ),
            ),
          ),
        );
        const ms = performance.now() - started;
        const stored = await readAll(database, schema);
        expect(stored.map((s) => s.event.sequence)).toEqual(
          Array.from({ length: 200 }, (_, i) => BigInt(i + 1)),
        );
        expectChained(stored.map((s) => s.event));
        console.info(
          `[storage contract ${name}] 200 events in 20 concurrent tx on one resource: ${ms.toFixed(0)} ms`,
        );
      });

      it("appends batches larger than one statement can carry", async () => {
        const schema = await outboxSchema();
        // 2 500 events over 1 250 resources: several statements of each kind.
        const events = Array.from({ length: 2500 }, (_, i) => event("ws_1", `task_${i % 1250}`));
        const appended = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, events),
        );
        expect(appended.map((e) => e.sequence)).toEqual(events.map((_, i) => (i < 1250 ? 1n : 2n)));
        expect(appended[1250]?.previousEventId).toBe(appended[0]?.id);
        expect(await readAll(database, schema)).toHaveLength(2500);
      });

      it("leaves no event and uses up no sequence when the transaction rolls back", async () => {
        const schema = await outboxSchema();
        await database.kysely
          .transaction()
          .execute(async (trx) => {
            await appendToOutbox(trx, schema, [event("ws_1", "task_r"), event("ws_1", "task_r")]);
            throw new Error("roll back");
          })
          .catch(() => {});
        expect(await readAll(database, schema)).toEqual([]);
        const [e] = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_r")]),
        );
        expect(e?.sequence).toBe(1n);
        expect(e?.previousEventId).toBe("");
      });

      it("refuses an event larger than the event log takes, writing nothing", async () => {
        const schema = await outboxSchema();
        const workspaceId = uniqueName("ws");
        const huge = event(workspaceId, "task_big");
        huge.payload = create(EventPayloadSchema, {
          kind: { case: "data", value: { text: "x".repeat(MAX_EVENT_BYTES) } },
        });
        const error = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_big"), huge]),
        ).catch((e: unknown) => e);
        expect(isTrellisError(error) && error.reason, String(error)).toBe("payload_too_large");
        expect(await readAll(database, schema)).toEqual([]);
      });

      it("rejects events it cannot place, and calls outside a transaction", async () => {
        const schema = await outboxSchema();
        const attempts: Event[][] = [
          [create(EventSchema, { kind: "no.resource", workspaceId: "ws_1" })],
          [event("ws_1", "task_x", { sequence: 5n })],
          [event("ws_1", "task_x", { previousEventId: "evt_0" })],
          [
            event("ws_1", "task_x", { id: "evt_twice" }),
            event("ws_1", "task_y", { id: "evt_twice" }),
          ],
        ];
        for (const events of attempts) {
          const error = await inTransaction(database, (trx) =>
            appendToOutbox(trx, schema, events),
          ).catch((e: unknown) => e);
          expect(error).toMatchObject({ reason: "invalid_request", param: "events" });
        }
        const outside = await appendToOutbox(
          database.kysely as unknown as Transaction<unknown>,
          schema,
          [event("ws_1", "task_x")],
        ).catch((e: unknown) => e);
        expect(outside).toMatchObject({ reason: "invalid_request", param: "trx" });
        // An id stored before fails the insert, so the whole transaction.
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_x", { id: "evt_once" })]),
        );
        await expect(
          inTransaction(database, (trx) =>
            appendToOutbox(trx, schema, [event("ws_1", "task_z", { id: "evt_once" })]),
          ),
        ).rejects.toThrow();
        expect((await readAll(database, schema)).map((s) => s.event.id)).toEqual(["evt_once"]);
      });
    });

    describe("outbox: readOutbox and pruneOutbox", () => {
      it("pages through the outbox in position order", async () => {
        const schema = await outboxSchema();
        for (let i = 0; i < 5; i++) {
          await inTransaction(database, (trx) =>
            appendToOutbox(
              trx,
              schema,
              Array.from({ length: 5 }, (_, j) => event("ws_1", `task_${j % 3}`)),
            ),
          );
        }
        const pages: OutboxEntry[][] = [];
        let after: bigint | undefined;
        for (;;) {
          const page = await readOutbox(database, schema, {
            limit: 10,
            ...(after === undefined ? {} : { afterPosition: after }),
          });
          if (page.length === 0) break;
          pages.push(page);
          after = page[page.length - 1]?.position;
        }
        expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
        const positions = pages.flat().map((e) => e.position);
        expect([...positions].sort((a, b) => (a < b ? -1 : 1))).toEqual(positions);
        expect(new Set(positions).size).toBe(25);
        expect(
          await readOutbox(database, schema, { limit: 100, unpublishedOnly: true }),
        ).toHaveLength(25);
      });

      it("prunes only published rows older than the cut-off; sequences continue", async () => {
        const schema = await outboxSchema();
        const events = await inTransaction(database, (trx) =>
          appendToOutbox(
            trx,
            schema,
            Array.from({ length: 5 }, () => event("ws_1", "task_p")),
          ),
        );
        const tables = outboxTables(database.kysely, schema);
        // Three published two hours ago, one just now, one still pending.
        await tables
          .updateTable("outbox")
          .set({ published_at: sql<Date>`now() - interval '2 hours'` })
          .where("sequence", "<=", 3n)
          .execute();
        await tables
          .updateTable("outbox")
          .set({ published_at: sql<Date>`now()` })
          .where("sequence", "=", 4n)
          .execute();
        const deleted = await pruneOutbox(database, schema, {
          olderThanMs: 60 * 60 * 1000,
          batchSize: 2,
        });
        expect(deleted).toBe(3);
        expect((await readAll(database, schema)).map((s) => s.event.sequence)).toEqual([4n, 5n]);
        const [next] = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_p")]),
        );
        expect(next?.sequence).toBe(6n);
        expect(next?.previousEventId).toBe(events[4]?.id);
      });
    });

    describe("outbox: relay", () => {
      it("publishes every event once, per resource in sequence order, while writers run", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const relay = startRelay(log, schema, { batchSize: 16 });
        const workspaceId = uniqueName("ws");
        await Promise.all(
          Array.from({ length: 30 }, (_, tx) =>
            inTransaction(database, (trx) =>
              appendToOutbox(
                trx,
                schema,
                Array.from({ length: 5 }, (_, i) => event(workspaceId, `task_${(tx + i) % 4}`)),
              ),
            ).then(() => relay.kick()),
          ),
        );
        const published = await eventually(
          async () => {
            const events = await readLog(log, workspaceId);
            return events.length >= 150 ? events : undefined;
          },
          { what: "150 published events" },
        );
        expect(published).toHaveLength(150);
        expectPerResourceOrder(published);
        const stored = await readAll(database, schema);
        expect(new Set(published.map((e) => e.id))).toEqual(new Set(stored.map((s) => s.event.id)));
        await eventually(async () => (await unpublished(database, schema)) === 0, {
          what: "rows marked published",
        });
        await relay.stop();
      });

      it("wakes up on commit (NOTIFY) without a kick or a poll", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const relay = startRelay(log, schema, { pollIntervalMs: 60_000 });
        await eventually(() => relay.active, { what: "relay active" });
        // Let its first round find nothing and go to sleep.
        await new Promise((r) => setTimeout(r, 300));
        const workspaceId = uniqueName("ws");
        const started = performance.now();
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_n")]),
        );
        await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
          timeoutMs: 3000,
          what: "event published after NOTIFY",
        });
        console.info(
          `[storage contract ${name}] commit → published via NOTIFY: ${(performance.now() - started).toFixed(1)} ms`,
        );
        await relay.stop();
      });

      it("NOTIFYs the highest position a statement inserted", async () => {
        const schema = await outboxSchema();
        const payloads: string[] = [];
        const unlisten = await database.listen(`trellis_outbox_${schema}`, (payload) =>
          payloads.push(payload),
        );
        const workspaceId = uniqueName("ws");
        const appended = await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_a"), event(workspaceId, "task_b")]),
        );
        await eventually(() => payloads.length === 1, { what: "notification" });
        const rows = await readOutbox(database, schema, { limit: 100 });
        const positions = rows
          .filter((row) => appended.some((e) => e.id === row.event.id))
          .map((row) => row.position);
        expect(positions).toHaveLength(2);
        expect(payloads).toEqual([String(positions.reduce((a, b) => (a > b ? a : b)))]);
        await unlisten();
      });

      it("one round per commit when the writer kicks and the outbox NOTIFYs", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        // Count the relay's reads of unpublished rows: one per round.
        let rounds = 0;
        const counting: Database = {
          kind: database.kind,
          kysely: database.kysely.withPlugin({
            transformQuery: (args) => {
              if (args.node.kind === "SelectQueryNode") rounds++;
              return args.node;
            },
            transformResult: async (args) => args.result,
          }),
          ping: (o) => database.ping(o),
          acquireLock: (n, o) => database.acquireLock(n, o),
          listen: (c, f) => database.listen(c, f),
          close: () => database.close(),
        };
        const relay = startRelay(log, schema, { pollIntervalMs: 60_000 }, counting);
        await eventually(() => relay.active && rounds >= 1, { what: "relay's first round" });
        const notified: string[] = [];
        const unlisten = await database.listen(`trellis_outbox_${schema}`, (p) => notified.push(p));
        const writer = createOutboxWriter({ schema, relay });
        for (let commit = 1; commit <= 5; commit++) {
          const workspaceId = uniqueName("ws");
          const before = rounds;
          await writer.transaction(database.kysely, async (unit) => {
            unit.add([event(workspaceId, "task_x"), event(workspaceId, "task_y")]);
          });
          await eventually(async () => (await readLog(log, workspaceId)).length === 2, {
            what: "events published",
          });
          await eventually(() => notified.length === commit, { what: "the commit's NOTIFY" });
          // The kick and the NOTIFY reported the same rows: whichever came
          // second starts no round of its own (before: two rounds per commit).
          await new Promise((r) => setTimeout(r, 200));
          expect(rounds - before).toBe(1);
        }
        await unlisten();
        await relay.stop();
      });

      it("wakes up on kick() when no notification arrives", async () => {
        const schema = await outboxSchema();
        // Without the trigger no NOTIFY is sent: only kick() or the poll can wake it.
        await sql`drop trigger outbox_notify on ${sql.id(schema, "outbox")}`.execute(
          database.kysely,
        );
        const log = await newEventLog();
        const relay = startRelay(log, schema, { pollIntervalMs: 60_000 });
        await eventually(() => relay.active, { what: "relay active" });
        await new Promise((r) => setTimeout(r, 300));
        const workspaceId = uniqueName("ws");
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_k")]),
        );
        await new Promise((r) => setTimeout(r, 300));
        expect(await readLog(log, workspaceId)).toHaveLength(0);
        relay.kick();
        await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
          timeoutMs: 3000,
          what: "event published after kick",
        });
        await relay.stop();
      });

      it("re-publishes after a crash between publish and mark; the log stores it once", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const results: AppendResult[][] = [];
        let crashes = 0;
        const crashingOnce: Pick<EventLog, "append"> = {
          async append(events) {
            const result = await log.append(events);
            results.push(result);
            if (crashes++ === 0) throw new Error("crashed after publishing, before marking");
            return result;
          },
        };
        const errors: unknown[] = [];
        const workspaceId = uniqueName("ws");
        const appended = await inTransaction(database, (trx) =>
          appendToOutbox(
            trx,
            schema,
            Array.from({ length: 6 }, (_, i) => event(workspaceId, `task_${i % 2}`)),
          ),
        );
        const relay = startRelay(crashingOnce, schema, { onError: (e) => errors.push(e) });
        await eventually(async () => (await unpublished(database, schema)) === 0, {
          what: "rows marked published",
        });
        await relay.stop();
        expect(errors).toHaveLength(1);
        // The second attempt re-sent the same ids and the log recognised them.
        expect(results[1]?.map((r) => r.duplicate)).toEqual(appended.map(() => true));
        const published = await readLog(log, workspaceId);
        expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
        expectPerResourceOrder(published);
      });

      it("logRebuiltFromOutbox: publishes every event in order and marks them published", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const relay = startRelay(log, schema, {
          batchSize: 16,
          logRebuiltFromOutbox: true,
          listen: false,
        });
        const workspaceId = uniqueName("ws");
        await Promise.all(
          Array.from({ length: 20 }, (_, tx) =>
            inTransaction(database, (trx) =>
              appendToOutbox(
                trx,
                schema,
                Array.from({ length: 5 }, (_, i) => event(workspaceId, `task_${(tx + i) % 3}`)),
              ),
            ).then(() => relay.kick()),
          ),
        );
        const published = await eventually(
          async () => {
            const events = await readLog(log, workspaceId);
            return events.length >= 100 ? events : undefined;
          },
          { what: "100 published events" },
        );
        expect(published).toHaveLength(100);
        expectPerResourceOrder(published);
        // Rows handed to the log are marked published by the time the relay stops.
        await relay.stop();
        expect(await unpublished(database, schema)).toBe(0);
      });

      it("logRebuiltFromOutbox: an append that fails is retried with the same events first", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        let failures = 0;
        const failingOnce: Pick<EventLog, "append"> = {
          async append(events) {
            if (failures++ === 0) throw new Error("the log is down");
            return log.append(events);
          },
        };
        const errors: unknown[] = [];
        const workspaceId = uniqueName("ws");
        const appended = await inTransaction(database, (trx) =>
          appendToOutbox(
            trx,
            schema,
            Array.from({ length: 4 }, (_, i) => event(workspaceId, `task_${i % 2}`)),
          ),
        );
        const relay = startRelay(failingOnce, schema, {
          logRebuiltFromOutbox: true,
          onError: (e) => errors.push(e),
        });
        await eventually(async () => (await readLog(log, workspaceId)).length === 4, {
          what: "published after the retry",
        });
        await relay.stop();
        expect(errors).toHaveLength(1);
        const published = await readLog(log, workspaceId);
        expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
        expectPerResourceOrder(published);
      });

      for (const logRebuiltFromOutbox of [false, true]) {
        it(`dead-letters an event the log refuses for good and goes on at once (logRebuiltFromOutbox: ${logRebuiltFromOutbox})`, async () => {
          const schema = await outboxSchema();
          const log = await newEventLog();
          // A log that refuses one kind for good, as JetStream refuses a
          // message over its max payload.
          const refusing: Pick<EventLog, "append"> = {
            async append(events) {
              if (events.some((e) => e.kind === "test.poison")) {
                throw new TrellisError({
                  reason: "payload_too_large",
                  message: "the event exceeds the log's largest message",
                });
              }
              return log.append(events);
            },
          };
          const errors: unknown[] = [];
          const dead: DeadLetter[] = [];
          // A retry would wait a minute: the events after the poison arriving
          // at all shows the relay never went into retry.
          const relay = startRelay(refusing, schema, {
            logRebuiltFromOutbox,
            retryDelayMs: 60_000,
            onError: (e) => errors.push(e),
            onDeadLetter: (d) => dead.push(d),
          });
          const workspaceId = uniqueName("ws");
          const poison = { ...event(workspaceId, "task_p"), kind: "test.poison" };
          const appended = await inTransaction(database, (trx) =>
            appendToOutbox(trx, schema, [
              event(workspaceId, "task_p"),
              poison,
              event(workspaceId, "task_p"),
              event(workspaceId, "task_q"),
            ]),
          );
          relay.kick();
          const published = await eventually(
            async () => {
              const events = await readLog(log, workspaceId);
              return events.length === 4 ? events : undefined;
            },
            { what: "the events after the poison published", timeoutMs: 10_000 },
          );
          await relay.stop();
          expect(errors).toEqual([]);
          expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
          const standIn = published[1];
          expect(standIn?.kind).toBe(DEAD_LETTER_KIND);
          expect(standIn?.sequence).toBe(2n);
          expect(standIn?.payload?.kind.case).toBe("data");
          expect(standIn?.payload?.kind.value).toMatchObject({
            original_kind: "test.poison",
            reason: "payload_too_large",
          });
          expect(published[2]?.sequence).toBe(3n);
          expectPerResourceOrder(published);
          expect(dead).toHaveLength(1);
          expect(dead[0]).toMatchObject({ eventId: appended[1]?.id, kind: "test.poison" });
          expect(await unpublished(database, schema)).toBe(0);
        });
      }

      it("keeps one active relay per schema; a standby takes over when it stops", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const other = await target.open();
        const a = startRelay(log, schema);
        const b = startRelay(log, schema, {}, other);
        await eventually(() => a.active || b.active, { what: "a relay active" });
        for (let i = 0; i < 20; i++) {
          expect(Number(a.active) + Number(b.active)).toBe(1);
          await new Promise((r) => setTimeout(r, 10));
        }
        const [leader, standby] = a.active ? [a, b] : [b, a];
        await leader.stop();
        await eventually(() => standby.active, { what: "standby took over" });
        const workspaceId = uniqueName("ws");
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_t"), event(workspaceId, "task_t")]),
        );
        await eventually(async () => (await readLog(log, workspaceId)).length === 2, {
          what: "published by the new leader",
        });
        await standby.stop();
      });

      it("resumes where it stopped: events committed while no relay ran go out in order", async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        const workspaceId = uniqueName("ws");
        const batch = () =>
          inTransaction(database, (trx) =>
            appendToOutbox(
              trx,
              schema,
              Array.from({ length: 10 }, (_, i) => event(workspaceId, `task_${i % 3}`)),
            ),
          );
        await batch();
        const first = startRelay(log, schema);
        await eventually(async () => (await readLog(log, workspaceId)).length === 10, {
          what: "first batch",
        });
        await first.stop();
        await batch();
        await batch();
        startRelay(log, schema);
        const published = await eventually(async () => {
          const events = await readLog(log, workspaceId);
          return events.length === 30 ? events : undefined;
        });
        expectPerResourceOrder(published);
      });
    });

    describe("crash safety (child process killed)", () => {
      const childPath = fileURLToPath(new URL("./testing/outbox-crash-child.ts", import.meta.url));
      const packageDir = fileURLToPath(new URL("..", import.meta.url));

      /**
       * Runs the child until it dies. `onLine` sees every line it prints
       * (with the ids committed so far) and may kill it.
       */
      const runChild = (
        config: CrashChildConfig,
        onLine: (line: ChildLine, committed: string[], kill: () => void) => void = () => {},
      ): Promise<{ committed: string[]; signal: NodeJS.Signals | null }> =>
        new Promise((resolve, reject) => {
          const child = spawn(process.execPath, ["--import", "tsx", childPath], {
            cwd: packageDir,
            env: { ...process.env, TRELLIS_CRASH_CHILD: JSON.stringify(config) },
            stdio: ["ignore", "pipe", "inherit"],
          });
          const committed: string[] = [];
          let buffer = "";
          child.stdout.setEncoding("utf8");
          child.stdout.on("data", (chunk: string) => {
            buffer += chunk;
            const lines = buffer.split("\n");
            buffer = lines.pop() ?? "";
            for (const text of lines) {
              const line = JSON.parse(text) as ChildLine;
              if ("committed" in line) committed.push(...line.committed);
              onLine(line, committed, () => child.kill("SIGKILL"));
            }
          });
          child.on("error", reject);
          child.on("exit", (_code, signal) => resolve({ committed, signal }));
        });

      it("loses no event when the process is killed between commit and publish", async (ctx) => {
        if (target.childConfig === undefined) return ctx.skip();
        const schema = await outboxSchema();
        const workspaceId = uniqueName("ws");
        const { committed, signal } = await runChild(
          {
            database: target.childConfig,
            schema,
            workspaceId,
            mode: "commit",
            resources: 3,
            eventsPerTransaction: 4,
          },
          // Killed while it keeps committing: most likely mid-transaction.
          (_line, committed, kill) => committed.length >= 60 && kill(),
        );
        expect(signal).toBe("SIGKILL");
        const stored = await readAll(database, schema);
        const storedIds = new Set(stored.map((s) => s.event.id));
        expect(committed.every((id) => storedIds.has(id))).toBe(true);
        // Transactions are atomic: whole transactions only, even the one killed mid-way.
        expect(stored.length % 4).toBe(0);
        expect(stored.every((s) => s.publishedAt === null)).toBe(true);

        const log = await newEventLog();
        startRelay(log, schema);
        await eventually(async () => (await unpublished(database, schema)) === 0, {
          what: "everything published",
        });
        const published = await readLog(log, workspaceId);
        expect(published.map((e) => e.id)).toEqual(stored.map((s) => s.event.id));
        expectPerResourceOrder(published);
      });

      it("publishes once when the relay is killed after publishing, before marking", async (ctx) => {
        if (target.childConfig === undefined) return ctx.skip();
        const schema = await outboxSchema();
        const workspaceId = uniqueName("ws");
        const dir = mkdtempSync(join(tmpdir(), "trellis-outbox-"));
        const logFile = join(dir, "log.jsonl");
        try {
          const { committed, signal } = await runChild({
            database: target.childConfig,
            schema,
            workspaceId,
            mode: "relay-crash",
            resources: 3,
            eventsPerTransaction: 5,
            transactions: 6,
            batchSize: 5,
            crashAfterAppends: 3,
            logFile,
          });
          expect(signal).toBe("SIGKILL");
          expect(committed).toHaveLength(30);
          // Batches 1–2 were marked; batch 3 reached the log, not the outbox.
          expect(await unpublished(database, schema)).toBe(20);
          // The durable log the child wrote survives it.
          const log = createRecordingEventLog({ file: logFile });
          expect(log.stats.stored).toBe(15);

          startRelay(log, schema, { batchSize: 5 });
          await eventually(async () => (await unpublished(database, schema)) === 0, {
            what: "everything published",
          });
          expect(log.stats.duplicates).toBe(5);
          expect(log.stats.stored).toBe(30);
          const published = await readLog(log, workspaceId);
          expect(published.map((e) => e.id)).toEqual(committed);
          expectPerResourceOrder(published);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

      it("hands the relay to a standby within moments when the active process dies", async (ctx) => {
        if (target.childConfig === undefined) return ctx.skip();
        const schema = await outboxSchema();
        const log = await newEventLog();
        let standby: OutboxRelay | undefined;
        let standbyActiveBeforeKill: boolean | undefined;
        let killedAt = 0;
        const { signal } = await runChild(
          {
            database: target.childConfig,
            schema,
            workspaceId: "ws_1",
            mode: "relay-hold",
            resources: 1,
            eventsPerTransaction: 1,
          },
          (line, _committed, kill) => {
            if (!("active" in line)) return;
            // The child leads; ours waits, then the child dies.
            standby = startRelay(log, schema, { pollIntervalMs: 60_000 });
            setTimeout(() => {
              standbyActiveBeforeKill = standby?.active;
              killedAt = performance.now();
              kill();
            }, 300);
          },
        );
        expect(signal).toBe("SIGKILL");
        expect(standbyActiveBeforeKill).toBe(false);
        await eventually(() => standby?.active, { what: "standby took over", intervalMs: 5 });
        console.info(
          `[storage contract ${name}] relay takeover after SIGKILL: ${(performance.now() - killedAt).toFixed(0)} ms`,
        );
        const workspaceId = uniqueName("ws");
        await inTransaction(database, (trx) =>
          appendToOutbox(trx, schema, [event(workspaceId, "task_h")]),
        );
        await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
          what: "published by the standby",
        });
      });
    });
  });
}

/** A new event on `task` resource `resourceId`. */
function event(
  workspaceId: string,
  resourceId: string,
  init: Partial<Pick<Event, "id" | "sequence" | "previousEventId">> = {},
): Event {
  return create(EventSchema, {
    kind: "test.happened",
    workspaceId,
    sessionId: "ses_1",
    resource: create(ResourceRefSchema, { object: "task", id: resourceId }),
    ...init,
  });
}

function inTransaction<T>(database: Database, fn: (trx: Transaction<unknown>) => Promise<T>) {
  return database.kysely.transaction().execute(fn);
}

async function readAll(database: Database, schema: string): Promise<OutboxEntry[]> {
  return readOutbox(database, schema, { limit: 100_000 });
}

async function unpublished(database: Database, schema: string): Promise<number> {
  return (await readOutbox(database, schema, { limit: 100_000, unpublishedOnly: true })).length;
}

/** Everything the log holds for a workspace, in log order. */
async function readLog(log: EventLog, workspaceId: string): Promise<Event[]> {
  const out: Event[] = [];
  let after: bigint | undefined;
  for (;;) {
    const page = await log.read({
      filter: { workspaceId },
      limit: 1000,
      ...(after === undefined ? {} : { after: { afterPosition: after } }),
    });
    if (page.length === 0) return out;
    out.push(...page.map((p) => p.event));
    after = page[page.length - 1]?.position;
  }
}

/** Each event's previous_event_id is the event before it. */
function expectChained(events: Event[]): void {
  events.forEach((e, i) => {
    expect(e.previousEventId).toBe(i === 0 ? "" : events[i - 1]?.id);
  });
}

/** Per resource: sequences 1, 2, 3, … in the given order, chained by previous_event_id. */
function expectPerResourceOrder(events: Event[]): void {
  const byResource = new Map<string, Event[]>();
  for (const e of events) {
    const key = `${e.resource?.object}/${e.resource?.id}`;
    byResource.set(key, [...(byResource.get(key) ?? []), e]);
  }
  for (const group of byResource.values()) {
    expect(group.map((e) => e.sequence)).toEqual(group.map((_, i) => BigInt(i + 1)));
    expectChained(group);
  }
}
