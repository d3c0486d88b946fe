// Storage's own kysely dialect for PGlite (kysely 0.28 has none): one
// connection, so transactions run one at a time and whole; a failed one
// leaves nothing; savepoints and transaction settings reach the database.
import { PGlite } from "@electric-sql/pglite";
import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../src/database.js";
import { createDatabase } from "../src/index.js";

interface DB {
  t: { id: number; note: string };
}

describe("PGlite dialect", () => {
  let database: Database<DB>;
  let db: Kysely<DB>;

  beforeAll(async () => {
    database = await createDatabase<DB>({ kind: "pglite" });
    db = database.kysely;
    await sql`create table t (id int primary key, note text not null)`.execute(db);
  });
  afterAll(async () => {
    await database?.close();
  });

  it("runs concurrent transactions one at a time, each whole", async () => {
    await db.deleteFrom("t").execute();
    const order: string[] = [];
    await Promise.all(
      [1, 2, 3, 4].map((n) =>
        db.transaction().execute(async (trx) => {
          order.push(`begin ${n}`);
          await trx.insertInto("t").values({ id: n, note: "a" }).execute();
          await new Promise((r) => setTimeout(r, 5));
          await trx.updateTable("t").set({ note: "b" }).where("id", "=", n).execute();
          order.push(`end ${n}`);
        }),
      ),
    );
    expect(order).toEqual([
      "begin 1",
      "end 1",
      "begin 2",
      "end 2",
      "begin 3",
      "end 3",
      "begin 4",
      "end 4",
    ]);
    const rows = await db.selectFrom("t").select(["id", "note"]).orderBy("id").execute();
    expect(rows).toEqual([1, 2, 3, 4].map((id) => ({ id, note: "b" })));
  });

  it("rolls a failed transaction back and keeps working", async () => {
    await db.deleteFrom("t").execute();
    const failed = db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto("t").values({ id: 10, note: "kept?" }).execute();
        await trx.insertInto("t").values({ id: 10, note: "duplicate" }).execute();
      })
      .catch((error: Error) => error);
    expect(String(await failed)).toMatch(/duplicate key/);
    expect(await db.selectFrom("t").selectAll().execute()).toEqual([]);
    const result = await db.insertInto("t").values({ id: 11, note: "after" }).executeTakeFirst();
    expect(result.numInsertedOrUpdatedRows).toBe(1n);
  });

  it("reports affected rows and reads within the transaction's own snapshot", async () => {
    await db.deleteFrom("t").execute();
    await db
      .insertInto("t")
      .values([1, 2, 3].map((id) => ({ id, note: "x" })))
      .execute();
    const updated = await db
      .updateTable("t")
      .set({ note: "y" })
      .where("id", "<", 3)
      .executeTakeFirst();
    expect(updated.numUpdatedRows).toBe(2n);
    await db.transaction().execute(async (trx) => {
      await trx.deleteFrom("t").execute();
      expect(await trx.selectFrom("t").selectAll().execute()).toEqual([]);
    });
    expect(await db.selectFrom("t").selectAll().execute()).toEqual([]);
  });

  it("supports savepoints and transaction settings", async () => {
    await db.deleteFrom("t").execute();
    const trx = await db.startTransaction().setIsolationLevel("serializable").execute();
    try {
      const level = await sql<{
        level: string;
      }>`select current_setting('transaction_isolation') as level`.execute(trx);
      expect(level.rows[0]?.level).toBe("serializable");
      await trx.insertInto("t").values({ id: 1, note: "kept" }).execute();
      const sp = await trx.savepoint("before_two").execute();
      await sp.insertInto("t").values({ id: 2, note: "undone" }).execute();
      await sp.rollbackToSavepoint("before_two").execute();
      await trx.commit().execute();
    } catch (error) {
      await trx.rollback().execute();
      throw error;
    }
    expect(await db.selectFrom("t").select("id").execute()).toEqual([{ id: 1 }]);
  });

  it("leaves a shared instance open when the database closes", async () => {
    const pglite = new PGlite();
    const one = await createDatabase<DB>({ kind: "pglite", pglite });
    await sql`select 1`.execute(one.kysely);
    await one.close();
    expect(pglite.closed).toBe(false);
    expect((await pglite.query<{ n: number }>("select 2 as n")).rows).toEqual([{ n: 2 }]);
    await pglite.close();
  });
});
