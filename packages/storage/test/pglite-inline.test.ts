import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { inlineParameters } from "../src/dialect/pglite/pglite-inline.js";
import { createDatabase, openPGlite } from "../src/index.js";

describe("inlineParameters", () => {
  it("writes every kind of scalar as a quoted literal", () => {
    const at = new Date("2026-01-02T03:04:05.678Z");
    expect(
      inlineParameters("select $1, $2, $3, $4, $5, $6, $7, $8", [
        "it's",
        42,
        -1.5,
        12345678901234567890n,
        true,
        null,
        at,
        new Uint8Array([0, 255, 16]),
      ]),
    ).toBe(
      "select 'it''s', '42', '-1.5', '12345678901234567890', 't', NULL, '2026-01-02T03:04:05.678Z', '\\x00ff10'",
    );
  });

  it("leaves placeholders inside strings, identifiers, comments and dollar quotes alone", () => {
    const text = `select '$1', "a$1", E'\\'$1', $tag$ $1 $tag$, $$ $1 $$ -- $1
      /* $1 */, col$1, $1`;
    expect(
      inlineParameters(text, ["v"]),
    ).toBe(`select '$1', "a$1", E'\\'$1', $tag$ $1 $tag$, $$ $1 $$ -- $1
      /* $1 */, col$1, 'v'`);
  });

  it("keeps $10 apart from $1", () => {
    const params = Array.from({ length: 10 }, (_, i) => `p${i + 1}`);
    expect(inlineParameters("select $10, $1", params)).toBe("select 'p10', 'p1'");
  });

  it("declines values whose text depends on the target type, and missing parameters", () => {
    expect(inlineParameters("select $1", [["a", "b"]])).toBeUndefined();
    expect(inlineParameters("select $1", [{ a: 1 }])).toBeUndefined();
    expect(inlineParameters("select $2", ["only one"])).toBeUndefined();
  });

  it("reuses a statement's scan for new values, and still declines missing ones", () => {
    const text = "select $1 /* $2 */, '$1', $2 where x = $1";
    expect(inlineParameters(text, ["a", 1])).toBe("select 'a' /* $2 */, '$1', '1' where x = 'a'");
    expect(inlineParameters(text, ["it's", 2n])).toBe(
      "select 'it''s' /* $2 */, '$1', '2' where x = 'it''s'",
    );
    expect(inlineParameters(text, ["only one"])).toBeUndefined();
    expect(inlineParameters("select 1", ["unused"])).toBe("select 1");
  });

  it("refuses a NUL character instead of cutting the statement short", () => {
    expect(() => inlineParameters("select $1", ["a\0b"])).toThrow(/0x00/);
  });
});

describe("PGlite through storage", () => {
  it("returns the same values inlined as bound, for every scalar type", async () => {
    const pglite = await openPGlite();
    const db = await createDatabase<unknown>({ kind: "pglite", pglite });
    try {
      await sql`create table t (a text, n int8, f float8, b bytea, ts timestamptz, ok boolean, j jsonb, ids int8[])`.execute(
        db.kysely,
      );
      const at = new Date("2026-01-02T03:04:05.678Z");
      const hostile = `x'); drop table t; --\\ $1 "q"`;
      await sql`insert into t values (${hostile}, ${9007199254740993n}, ${0.25}, ${new Uint8Array([1, 2, 3])}, ${at}, ${false}, ${JSON.stringify({ k: ["v"] })}, ${[1n, 2n]})`.execute(
        db.kysely,
      );
      const { rows } = await sql<
        Record<string, unknown>
      >`select * from t where a = ${hostile} and n = ${9007199254740993n}`.execute(db.kysely);
      expect(rows).toEqual([
        {
          a: hostile,
          n: 9007199254740993n,
          f: 0.25,
          b: new Uint8Array([1, 2, 3]),
          ts: at,
          ok: false,
          j: { k: ["v"] },
          ids: [1n, 2n],
        },
      ]);
      const updated = await sql`update t set f = ${1.5} where ok = ${false}`.execute(db.kysely);
      expect(updated.numAffectedRows).toBe(1n);
    } finally {
      await db.close();
      await pglite.close();
    }
  });
});
