// The shared fixed-window counters on both databases (PGlite for embedded
// mode, PostgreSQL for distributed mode): concurrent takers never exceed the
// limit, refunds give units back, windows roll over, usage is reported.
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quotaMigrations } from "../src/quota/schema.js";
import { PostgresQuotaCounters } from "../src/quota/store.js";

const backends = [
  {
    name: "PGlite",
    async open() {
      const db = await createDatabase({ kind: "pglite" });
      return { db, close: () => db.close() };
    },
  },
  {
    name: "PostgreSQL",
    async open() {
      const test: TestDatabase = await createTestDatabase("trellis_quota_counters");
      const db = await createDatabase({ kind: "postgres", url: test.url });
      return {
        db,
        close: async () => {
          await db.close();
          await test.drop();
        },
      };
    },
  },
];

describe.each(backends)("quota counters on $name", ({ open }) => {
  let opened: { db: Database<unknown>; close(): Promise<void> };
  let counters: PostgresQuotaCounters;

  beforeAll(async () => {
    opened = await open();
    await migrate(opened.db, { schema: "gateway", migrations: quotaMigrations });
    counters = new PostgresQuotaCounters(opened.db, "gateway");
  }, 60_000);
  afterAll(async () => {
    await opened?.close();
  });

  it("grants exactly the limit to concurrent takers and reports usage", async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => counters.take("b:concurrent", 3_600_000, 7)),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(7);
    const refused = results.filter((r) => !r.allowed);
    expect(refused.every((r) => r.used === 7 && r.resetAt.getTime() > Date.now())).toBe(true);
    const usage = await counters.usage("b:concurrent", 3_600_000);
    expect(usage.used).toBe(7);
    expect((await counters.usage("b:untouched", 3_600_000)).used).toBe(0);
  });

  it("takes several counters in one statement, stopping at the first refusal", async () => {
    const hour = 3_600_000;
    const takes = [
      { bucket: "m:actor", periodMs: hour, limit: 5 },
      { bucket: "m:workspace", periodMs: hour, limit: 2 },
      { bucket: "m:day", periodMs: 86_400_000, limit: 100, cost: 3 },
    ];
    const first = await counters.takeAll(takes);
    expect(first.map((r) => [r.allowed, r.used])).toEqual([
      [true, 1],
      [true, 1],
      [true, 3],
    ]);
    expect(first[2]?.resetAt.getTime()).toBeGreaterThan(first[0]?.resetAt.getTime() ?? 0);
    // Concurrent multi-counter takes share the rows like single takes do.
    const concurrent = await Promise.all(Array.from({ length: 4 }, () => counters.takeAll(takes)));
    const whole = concurrent.filter((r) => r.length === 3 && r.every((c) => c.allowed));
    expect(whole).toHaveLength(1);
    // The refused counter is the last result; those after it were not counted.
    for (const r of concurrent.filter((r) => r !== whole[0])) {
      expect(r.map((c) => c.allowed)).toEqual([true, false]);
      expect(r[1]?.used).toBe(2);
    }
    expect((await counters.usage("m:actor", hour)).used).toBe(5);
    expect((await counters.usage("m:workspace", hour)).used).toBe(2);
    expect((await counters.usage("m:day", 86_400_000)).used).toBe(6);
    // The first counter refused: nothing else is taken.
    const refused = await counters.takeAll(takes);
    expect(refused.map((r) => [r.allowed, r.used])).toEqual([[false, 5]]);
    expect((await counters.usage("m:workspace", hour)).used).toBe(2);
    // A cost above the limit is refused without a row; buckets must differ.
    expect(
      await counters.takeAll([{ bucket: "m:huge", periodMs: hour, limit: 1, cost: 2 }]),
    ).toEqual([expect.objectContaining({ allowed: false, used: 0 })]);
    await expect(counters.takeAll([takes[0]!, takes[0]!])).rejects.toThrow(/distinct/);
    expect(await counters.takeAll([])).toEqual([]);
  });

  it("gives refunded units back to their window", async () => {
    const first = await counters.take("b:refund", 3_600_000, 1);
    expect(first.allowed).toBe(true);
    expect((await counters.take("b:refund", 3_600_000, 1)).allowed).toBe(false);
    await counters.refund("b:refund", first.windowStart);
    expect((await counters.take("b:refund", 3_600_000, 1)).allowed).toBe(true);
  });

  it("starts a new window when the old one is over", async () => {
    expect((await counters.take("b:window", 1_000, 1)).allowed).toBe(true);
    // One unit per window: taking until refused ends within the next window at most.
    let refused = await counters.take("b:window", 1_000, 1);
    while (refused.allowed) refused = await counters.take("b:window", 1_000, 1);
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, refused.resetAt.getTime() - Date.now()) + 50),
    );
    const next = await counters.take("b:window", 1_000, 1);
    expect(next.allowed).toBe(true);
    expect(next.windowStart.getTime()).toBeGreaterThan(refused.windowStart.getTime());
    expect(await counters.prune()).toBeGreaterThanOrEqual(0);
  });
});
