/**
 * Storage contract, part 1: the Database handle (types, transactions,
 * replicas) and migrate. Registered by describeStorageContract.
 */
import { isTrellisError } from "@trellis/runtime";
import { eventually, uniqueName } from "@trellis/testkit";
import { type Kysely, type Migration, sql } from "kysely";
import { describe, expect, it } from "vitest";
import { migrate } from "../migrate.js";
import { outboxMigrations } from "../outbox/outbox-schema.js";
import type { StorageSuite } from "./suite.js";

export function describeDatabaseContract(suite: StorageSuite): void {
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
            from (values (1), (2)) as v(x)`.execute(suite.database.kysely);
      const row = rows[0];
      expect(row?.small).toBe(7n);
      expect(row?.big).toBe(9007199254740993n);
      expect(row?.n).toBe(2n);
      expect(row?.list).toEqual([1n, null, 3n]);
      expect(row?.bytes).toBeInstanceOf(Uint8Array);
      expect(Array.from(row?.bytes as Uint8Array)).toEqual([1, 255]);
    });

    it("answers ping", async () => {
      await expect(suite.database.ping()).resolves.toBeUndefined();
    });

    it("lets one holder at a time have a named lock, across handles", async () => {
      const other = await suite.target.open();
      const name = uniqueName("lock");
      const first = await suite.database.acquireLock(name);
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
        const third = suite.database.acquireLock(name, { signal: aborter.signal });
        setTimeout(() => aborter.abort(new Error("gave up")), after);
        await expect(third).rejects.toThrow("gave up");
      }

      await first.release();
      const lease = await second;
      expect(lease.lost.aborted).toBe(false);
      await lease.release();
      // Released means free: an immediate acquire succeeds.
      await (await suite.database.acquireLock(name)).release();
    });

    it("notifies listeners of committed NOTIFYs only", async () => {
      const other = await suite.target.open();
      const channel = uniqueName("ch");
      let calls = 0;
      const unlisten = await suite.database.listen(channel, () => calls++);
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
      const unlisten = await suite.database.listen(channel, (payload) => payloads.push(payload));
      await sql`select pg_notify(${channel}, '42')`.execute(suite.database.kysely);
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
          where table_schema = ${schema} order by table_name`.execute(suite.database.kysely);
      return rows.map((r) => r.table_name);
    };

    it("creates the schema, applies migrations once, keeps bookkeeping in the schema", async () => {
      const schema = uniqueName("st");
      const migrations = { ...outboxMigrations(schema), ...things };
      const first = await migrate(suite.database, { schema, migrations });
      expect(first.applied).toEqual([
        "2026_11_22_000_create_outbox",
        "2026_11_22_create_things",
        "2027_02_03_000_outbox_notify_position",
      ]);
      const second = await migrate(suite.database, { schema, migrations });
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
      const handles = [
        suite.database,
        ...(await Promise.all([1, 2, 3].map(() => suite.target.open()))),
      ];
      const results = await Promise.all(handles.map((h) => migrate(h, { schema, migrations })));
      const applied = results.flatMap((r) => r.applied);
      expect(applied.sort()).toEqual(Object.keys(migrations).sort());
      expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
    });

    it("applies all pending migrations or none, and names the one that failed", async () => {
      const schema = uniqueName("st");
      const error = await migrate(suite.database, {
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
        const error = await migrate(suite.database, { schema, migrations: {} }).catch(
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ reason: "invalid_request", param: "schema" });
      }
    });
  });
}
