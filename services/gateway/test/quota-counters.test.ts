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
