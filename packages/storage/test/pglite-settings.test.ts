import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, describe, expect, it } from "vitest";
import { openPGlite } from "../src/index.js";

// The server settings openPGlite adds to PGlite's own (see its doc comment).

async function setting(pglite: PGlite, name: string): Promise<string | undefined> {
  const result = await pglite.query<{ setting: string }>(
    "select setting from pg_settings where name = $1",
    [name],
  );
  return result.rows[0]?.setting;
}

describe("openPGlite settings", () => {
  const dir = mkdtempSync(join(tmpdir(), "trellis-pglite-settings-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("does not zero-fill new WAL segments, on a fresh data directory", async () => {
    const pglite = await openPGlite({ dataDir: join(dir, "fresh") });
    try {
      expect(await setting(pglite, "wal_init_zero")).toBe("off");
    } finally {
      await pglite.close();
    }
  });

  it("does not zero-fill new WAL segments on a data directory made without it, opened again", async () => {
    const dataDir = join(dir, "existing");
    // A data directory as earlier versions left it: PGlite's defaults only.
    const plain = new PGlite({ dataDir });
    await plain.waitReady;
    expect(await setting(plain, "wal_init_zero")).toBe("on");
    await plain.query("create table kept (id int primary key)");
    await plain.query("insert into kept values (1)");
    await plain.close();

    const reopened = await openPGlite({ dataDir });
    try {
      expect(await setting(reopened, "wal_init_zero")).toBe("off");
      const rows = await reopened.query<{ id: number }>("select id from kept");
      expect(rows.rows).toEqual([{ id: 1 }]);
      // Writing on (a segment switch makes the next write start a new file) still works.
      await reopened.query("select pg_switch_wal()");
      await reopened.query("insert into kept values (2)");
    } finally {
      await reopened.close();
    }
    const again = await openPGlite({ dataDir });
    try {
      expect(await setting(again, "wal_init_zero")).toBe("off");
      const rows = await again.query<{ n: number }>("select count(*)::int as n from kept");
      expect(rows.rows).toEqual([{ n: 2 }]);
    } finally {
      await again.close();
    }
  });

  it("keeps PGlite's other start parameters and Postgres's WAL safety settings", async () => {
    const pglite = await openPGlite();
    try {
      // From PGlite's defaults (search_path=public) and Postgres's own.
      expect(await setting(pglite, "search_path")).toBe("public");
      expect(await setting(pglite, "full_page_writes")).toBe("on");
      expect(await setting(pglite, "synchronous_commit")).toBe("on");
    } finally {
      await pglite.close();
    }
  });

  it("starts each in-memory instance as a fresh cluster, the ones after the second from its copy", async () => {
    const first = await openPGlite();
    const second = await openPGlite();
    try {
      // The first's data is its own; the second's copy is taken before it is used.
      await first.query("create table only_first (id int8 primary key)");
      await first.query("insert into only_first values (9007199254740993)");
      const tables = await second.query<{ n: number }>(
        "select count(*)::int as n from pg_tables where tablename = 'only_first'",
      );
      expect(tables.rows).toEqual([{ n: 0 }]);
      // The second has storage's settings and parsers too.
      expect(await setting(second, "wal_init_zero")).toBe("off");
      await second.query("create table own (id int8 primary key)");
      await second.query("insert into own values (9007199254740993)");
      const own = await second.query<{ id: bigint }>("select id from own");
      expect(own.rows).toEqual([{ id: 9007199254740993n }]);
      const firsts = await first.query<{ id: bigint }>("select id from only_first");
      expect(firsts.rows).toEqual([{ id: 9007199254740993n }]);
    } finally {
      await second.close();
      await first.close();
    }
    // A third after both closed starts fresh (from a copy taken before any write).
    const third = await openPGlite();
    try {
      expect(await setting(third, "search_path")).toBe("public");
      const tables = await third.query<{ n: number }>(
        "select count(*)::int as n from pg_tables where tablename in ('only_first', 'own')",
      );
      expect(tables.rows).toEqual([{ n: 0 }]);
    } finally {
      await third.close();
    }
  });
});
