import { type Kysely, sql } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createDatabase, type Database, openPGlite } from "../src/index.js";

type PGlite = Awaited<ReturnType<typeof openPGlite>>;

/** The statements the instance's backend holds prepared. */
async function prepared(pglite: PGlite): Promise<string[]> {
  const { rows } = await pglite.query<{ statement: string }>(
    "select statement from pg_prepared_statements order by prepare_time",
  );
  return rows.map((row) => row.statement);
}

describe("repeated statements on PGlite run prepared", () => {
  let pglite: PGlite;
  let db: Database<unknown>;
  let kysely: Kysely<unknown>;

  beforeEach(async () => {
    pglite = await openPGlite();
    db = await createDatabase<unknown>({ kind: "pglite", pglite });
    kysely = db.kysely;
    await sql`create table t (id text primary key, n int8, b bytea, at timestamptz)`.execute(
      kysely,
    );
  });

  afterEach(async () => {
    await db.close();
    await pglite.close();
  });

  it("prepares a text at its second use and returns what the inlined statement did", async () => {
    const at = new Date("2026-03-04T05:06:07.890Z");
    const insert = (id: string, n: bigint | null, b: Uint8Array) =>
      sql`insert into t (id, n, b, at) values (${id}, ${n}, ${b}, ${at})`.execute(kysely);
    const read = (id: string) =>
      sql<Record<string, unknown>>`select * from t where id = ${id}`.execute(kysely);

    await insert("first", 1n, new Uint8Array([1]));
    expect(await prepared(pglite)).toEqual([]);
    const hostile = `it's $1 \\x'); drop table t; --`;
    const second = await insert(hostile, 9007199254740993n, new Uint8Array([0, 255]));
    expect(second.numAffectedRows).toBe(1n);
    await insert("third", null, new Uint8Array([]));
    expect(await prepared(pglite)).toEqual([
      expect.stringContaining("prepare trellis_stmt_0 as insert into t"),
    ]);

    for (let i = 0; i < 8; i++) {
      // Past the backend's first five custom plans, onto its generic plan.
      expect((await read(hostile)).rows).toEqual([
        { id: hostile, n: 9007199254740993n, b: new Uint8Array([0, 255]), at },
      ]);
    }
    expect((await read("third")).rows).toEqual([
      { id: "third", n: null, b: new Uint8Array([]), at },
    ]);
    expect(await prepared(pglite)).toHaveLength(2);
    // A constraint violation of a prepared statement is the same error.
    await expect(insert("third", 3n, new Uint8Array([3]))).rejects.toThrow(/duplicate key/);
  });

  it("inlines a text the backend will not prepare, without failing the transaction", async () => {
    // `$1 is null` has no type to infer: PREPARE refuses it, a literal is fine.
    const probe = (value: string | null) =>
      sql<{ missing: boolean }>`select ${value} is null as missing`;
    await kysely.transaction().execute(async (trx) => {
      await sql`insert into t (id) values (${"in-tx"})`.execute(trx);
      expect((await probe("a").execute(trx)).rows).toEqual([{ missing: false }]);
      expect((await probe(null).execute(trx)).rows).toEqual([{ missing: true }]);
      expect((await probe("b").execute(trx)).rows).toEqual([{ missing: false }]);
    });
    const { rows } = await sql<{ id: string }>`select id from t where id = ${"in-tx"}`.execute(
      kysely,
    );
    expect(rows).toEqual([{ id: "in-tx" }]);
  });

  it("keeps prepared statements across a rolled-back transaction", async () => {
    const count = () => sql<{ n: bigint }>`select count(*) as n from t where n > ${0n}`;
    await expect(
      kysely.transaction().execute(async (trx) => {
        await sql`insert into t (id, n) values (${"gone"}, ${5n})`.execute(trx);
        await count().execute(trx);
        await count().execute(trx);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect((await count().execute(kysely)).rows).toEqual([{ n: 0n }]);
  });

  it("forgets every prepared statement after DDL, so a changed table reads right", async () => {
    const all = () => sql<Record<string, unknown>>`select * from t where id = ${"x"}`;
    await sql`insert into t (id, n) values (${"x"}, ${1n})`.execute(kysely);
    await all().execute(kysely);
    await all().execute(kysely);
    expect(await prepared(pglite)).not.toEqual([]);
    await sql`alter table t add column extra text default 'new'`.execute(kysely);
    expect(await prepared(pglite)).toEqual([]);
    expect((await all().execute(kysely)).rows[0]).toMatchObject({ id: "x", extra: "new" });
  });

  it("drops a statement whose result changed under it by DDL from elsewhere", async () => {
    const all = () => sql<Record<string, unknown>>`select * from t where id = ${"y"}`;
    await sql`insert into t (id) values (${"y"})`.execute(kysely);
    await all().execute(kysely);
    await all().execute(kysely);
    // Not through storage: the cache does not see it.
    await pglite.exec("alter table t add column later int default 7");
    expect((await all().execute(kysely)).rows[0]).toMatchObject({ id: "y", later: 7 });
    // Inside a transaction the statement fails once (it cannot be retried
    // there), then is prepared afresh.
    await all().execute(kysely);
    await all().execute(kysely);
    await pglite.exec("alter table t add column latest int default 8");
    await expect(kysely.transaction().execute((trx) => all().execute(trx))).rejects.toThrow(
      /cached plan must not change result type/,
    );
    expect((await all().execute(kysely)).rows[0]).toMatchObject({ later: 7, latest: 8 });
  });
});
