// The shared fixed-window counters on both databases (PGlite for embedded
// mode, PostgreSQL for distributed mode): concurrent takers never exceed the
// limit, refunds give units back, windows roll over, usage is reported.
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReservedCounters } from "../src/quota/reserved-counters.js";
import { quotaMigrations } from "../src/quota/schema.js";
import { type CounterTake, PostgresQuotaCounters, type QuotaCounters } from "../src/quota/store.js";
import { WriteBehindCounters } from "../src/quota/write-behind-counters.js";

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
    // Each counter resets at the end of its own window (in the last hour of
    // a UTC day both windows end at midnight: not a strict order).
    const hourReset = first[0]?.resetAt.getTime() ?? 0;
    const dayReset = first[2]?.resetAt.getTime() ?? 0;
    expect(hourReset % hour).toBe(0);
    expect(dayReset % 86_400_000).toBe(0);
    expect(dayReset).toBeGreaterThanOrEqual(hourReset);
    expect(dayReset - hourReset).toBeLessThan(86_400_000);
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

  it("adds granted units to their window, never to a newer one", async () => {
    const hour = 3_600_000;
    const taken = await counters.take("b:add", hour, 100);
    const added = await counters.addAll([
      { bucket: "b:add", windowStart: taken.windowStart, resetAt: taken.resetAt, cost: 4 },
      {
        bucket: "b:add-new",
        windowStart: taken.windowStart,
        resetAt: taken.resetAt,
        cost: 2,
      },
    ]);
    expect(added).toEqual(
      new Map([
        ["b:add", 5],
        ["b:add-new", 2],
      ]),
    );
    // An add for an older window than the row's is dropped (and not reported).
    const older = new Date(taken.windowStart.getTime() - hour);
    const stale = await counters.addAll([
      { bucket: "b:add", windowStart: older, resetAt: taken.windowStart, cost: 7 },
    ]);
    expect(stale.size).toBe(0);
    expect((await counters.usage("b:add", hour)).used).toBe(5);
  });

  it("counts reads write-behind: exact on one replica, bounded across two", async () => {
    const hour = 3_600_000;
    const errors: unknown[] = [];
    // A long interval: the test flushes by hand.
    const a = new WriteBehindCounters(counters, 60_000, (e) => errors.push(e));
    const b = new WriteBehindCounters(counters, 60_000, (e) => errors.push(e));
    const granted = async (c: WriteBehindCounters, n: number) => {
      let allowed = 0;
      for (let i = 0; i < n; i++) if ((await c.take("b:reads", hour, 10)).allowed) allowed++;
      return allowed;
    };
    // One replica: the first read is written at once, the next ones are held.
    expect(await granted(a, 4)).toBe(4);
    expect((await counters.usage("b:reads", hour)).used).toBe(1);
    await a.flush();
    expect((await counters.usage("b:reads", hour)).used).toBe(4);
    // Up to the limit, then refused by the table itself.
    expect(await granted(a, 6)).toBe(6);
    const refused = await a.take("b:reads", hour, 10);
    expect(refused.allowed).toBe(false);
    expect(refused.used).toBe(10);
    expect((await counters.usage("b:reads", hour)).used).toBe(10);
    // The other replica sees the shared count at its first read.
    expect((await b.take("b:reads", hour, 10)).allowed).toBe(false);

    // Two replicas granting at once may pass the limit by what the other one
    // granted since its last flush; after a flush both see the shared count.
    const bucket = "b:reads-two";
    const take = (c: WriteBehindCounters) => c.take(bucket, hour, 10);
    expect((await take(a)).allowed).toBe(true);
    expect((await take(b)).allowed).toBe(true);
    let total = 2;
    for (let i = 0; i < 12; i++) {
      if ((await take(a)).allowed) total++;
      if ((await take(b)).allowed) total++;
    }
    expect(total).toBeGreaterThanOrEqual(10);
    expect(total).toBeLessThanOrEqual(20);
    await a.flush();
    await b.flush();
    expect((await counters.usage(bucket, hour)).used).toBe(total);
    expect((await take(a)).allowed).toBe(false);
    expect((await take(b)).allowed).toBe(false);
    await a.close();
    await b.close();
    expect(errors).toEqual([]);
  });

  it("takes a request's counters write-behind, in order, exact on one replica", async () => {
    const hour = 3_600_000;
    const writes = new WriteBehindCounters(counters, 60_000, (e) => {
      throw e;
    });
    const takes = [
      { bucket: "w:actor", periodMs: hour, limit: 100 },
      { bucket: "w:quota", periodMs: hour, limit: 3 },
    ];
    const used = async (bucket: string) => (await counters.usage(bucket, hour)).used;
    // First request: the table (learning the windows); then held in memory.
    const first = await writes.takeAll(takes);
    expect(first.map((r) => [r.allowed, r.used])).toEqual([
      [true, 1],
      [true, 1],
    ]);
    const second = await writes.takeAll(takes);
    expect(second.map((r) => [r.allowed, r.used])).toEqual([
      [true, 2],
      [true, 2],
    ]);
    expect(await used("w:quota")).toBe(1);
    // The report sees the held units (it writes them first).
    expect((await writes.usage("w:quota", hour)).used).toBe(2);
    expect(await used("w:actor")).toBe(2);
    // A refund of a unit still held never reaches the table.
    await writes.takeAll(takes);
    await writes.refund("w:quota", first[1]?.windowStart as Date);
    await writes.flush();
    expect(await used("w:quota")).toBe(2);
    // At the limit the table decides, stopping at the refused counter: the
    // actor's unit before it is counted, exactly as one statement would.
    expect((await writes.takeAll(takes)).map((r) => r.allowed)).toEqual([true, true]);
    const refused = await writes.takeAll(takes);
    expect(refused.map((r) => [r.allowed, r.used])).toEqual([
      [true, 5],
      [false, 3],
    ]);
    await writes.close();
    expect(await used("w:actor")).toBe(5);
    expect(await used("w:quota")).toBe(3);
  });

  it("writes held reads within the flush interval without being asked", async () => {
    const hour = 3_600_000;
    const reads = new WriteBehindCounters(counters, 20, (e) => {
      throw e;
    });
    for (let i = 0; i < 3; i++) expect((await reads.take("b:timer", hour, 100)).allowed).toBe(true);
    const deadline = Date.now() + 20_000;
    while ((await counters.usage("b:timer", hour)).used < 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect((await counters.usage("b:timer", hour)).used).toBe(3);
    await reads.close();
  });

  /** `counters`, counting the takes that reach the table. */
  function counted(): { counters: QuotaCounters; takes: () => number } {
    let takes = 0;
    const proxy: QuotaCounters = Object.create(counters);
    proxy.takeAll = (t: readonly CounterTake[]) => {
      takes++;
      return counters.takeAll(t);
    };
    return { counters: proxy, takes: () => takes };
  }
  const reserved = (c: QuotaCounters, holdMs = 60_000) =>
    new ReservedCounters(c, {
      maxBlock: 64,
      holdMs,
      onError: (e) => {
        throw e;
      },
    });

  it("grants writes from blocks of units: exact, with a statement per block", async () => {
    const hour = 3_600_000;
    const table = counted();
    const writes = reserved(table.counters);
    const bucket = "r:block";
    for (let i = 0; i < 500; i++) {
      const taken = await writes.takeAll([{ bucket, periodMs: hour, limit: 10_000 }]);
      expect(taken.map((r) => [r.allowed, r.used])).toEqual([[true, i + 1]]);
    }
    // Blocks of 1, 2, 4, … 63 spare units: a few statements, not 500.
    expect(table.takes()).toBeLessThanOrEqual(14);
    const inTable = (await counters.usage(bucket, hour)).used;
    expect(inTable).toBeGreaterThanOrEqual(500);
    expect(inTable).toBeLessThan(500 + 64);
    // The replica's report leaves its spare units out; closing gives them back.
    expect((await writes.usage(bucket, hour)).used).toBe(500);
    await writes.close();
    expect((await counters.usage(bucket, hour)).used).toBe(500);
    // One unit per statement asked for: no blocks.
    const single = counted();
    const exact = new ReservedCounters(single.counters, {
      maxBlock: 1,
      holdMs: 60_000,
      onError: () => {},
    });
    for (let i = 0; i < 5; i++) await exact.takeAll([{ bucket, periodMs: hour, limit: 10_000 }]);
    expect(single.takes()).toBe(5);
  });

  it("takes one block at a time for a bucket, however many requests are short at once", async () => {
    const hour = 3_600_000;
    const table = counted();
    const writes = reserved(table.counters);
    const bucket = "r:burst";
    const take = () => writes.takeAll([{ bucket, periodMs: hour, limit: 10_000 }]);
    // Warm the bucket up to its largest block (1, 2, 4, … 63 spare units).
    for (let i = 0; i < 200; i++) await take();
    expect((await counters.usage(bucket, hour)).used - 200).toBeLessThan(64);
    // A burst of 100, more than the block holds: those the block cannot
    // serve go to the table at once, but only one of them asks for spare
    // units, so at most one block is held after it (not one per request).
    const burst = await Promise.all(Array.from({ length: 100 }, take));
    expect(burst.every((r) => r[0]?.allowed)).toBe(true);
    const held = (await counters.usage(bucket, hour)).used - 300;
    expect(held).toBeGreaterThanOrEqual(0);
    expect(held).toBeLessThan(64);
    expect(table.takes()).toBeLessThan(14 + 100);
    expect((await writes.usage(bucket, hour)).used).toBe(300);
    await writes.close();
    expect((await counters.usage(bucket, hour)).used).toBe(300);
  });

  it("gives back the spare units of a refill still out when it closes", async () => {
    const hour = 3_600_000;
    const writes = reserved(counters);
    const bucket = "r:closing";
    const take = () => writes.takeAll([{ bucket, periodMs: hour, limit: 10_000 }]);
    for (let i = 0; i < 100; i++) await take();
    // Enough at once to run the block dry and send a refill to the table,
    // closed while that refill is out.
    const burst = Promise.all(Array.from({ length: 80 }, take));
    await writes.close();
    const granted = (await burst).filter((r) => r[0]?.allowed).length;
    expect(granted).toBe(80);
    expect((await counters.usage(bucket, hour)).used).toBe(180);
    // Closed counters count every take in the table.
    await take();
    expect((await counters.usage(bucket, hour)).used).toBe(181);
  });

  it("never grants past the limit across replicas; spare units go back", async () => {
    const hour = 3_600_000;
    const bucket = "r:replicas";
    const limit = 100;
    const a = reserved(counters);
    const b = reserved(counters);
    const take = (c: ReservedCounters) => c.takeAll([{ bucket, periodMs: hour, limit }]);
    // Warm both replicas' blocks, then a burst on both at once.
    let granted = 0;
    for (let i = 0; i < 20; i++) {
      for (const c of [a, b]) if ((await take(c))[0]?.allowed) granted++;
    }
    const burst = await Promise.all(Array.from({ length: 150 }, (_, i) => take(i % 2 ? a : b)));
    granted += burst.filter((r) => r[0]?.allowed).length;
    expect(granted).toBeLessThanOrEqual(limit);
    // The table counts every granted unit plus the spare ones held; closed, just the granted.
    expect((await counters.usage(bucket, hour)).used).toBeGreaterThanOrEqual(granted);
    await a.close();
    await b.close();
    expect((await counters.usage(bucket, hour)).used).toBe(granted);
    // What is left is granted to a third replica, exactly up to the limit.
    const c = reserved(counters);
    while ((await take(c))[0]?.allowed) granted++;
    expect(granted).toBe(limit);
    await c.close();
    expect((await counters.usage(bucket, hour)).used).toBe(limit);
  });

  it("takes a request's counters from blocks in order, stopping at the first refusal", async () => {
    const hour = 3_600_000;
    const writes = reserved(counters);
    const takes = [
      { bucket: "r:actor", periodMs: hour, limit: 1_000 },
      { bucket: "r:quota", periodMs: hour, limit: 3 },
      { bucket: "r:agent", periodMs: hour, limit: 1_000 },
    ];
    for (let i = 1; i <= 3; i++) {
      expect((await writes.takeAll(takes)).map((r) => [r.allowed, r.used])).toEqual([
        [true, i],
        [true, i],
        [true, i],
      ]);
    }
    // The quota is used up: the actor's unit before it counts, the agent's after it does not.
    const refused = await writes.takeAll(takes);
    expect(refused.map((r) => [r.allowed, r.used])).toEqual([
      [true, 4],
      [false, 3],
    ]);
    // A refunded unit of the current block is the replica's to grant again.
    await writes.refund("r:actor", refused[0]?.windowStart as Date);
    await writes.close();
    const used = async (bucket: string) => (await counters.usage(bucket, hour)).used;
    expect([await used("r:actor"), await used("r:quota"), await used("r:agent")]).toEqual([
      3, 3, 3,
    ]);
  });

  it("gives spare units nobody uses back after the hold time, and starts new windows", async () => {
    const bucket = "r:idle";
    const hour = 3_600_000;
    const writes = reserved(counters, 20);
    for (let i = 0; i < 4; i++) await writes.takeAll([{ bucket, periodMs: hour, limit: 1_000 }]);
    expect((await counters.usage(bucket, hour)).used).toBeGreaterThan(4);
    const deadline = Date.now() + 20_000;
    while ((await counters.usage(bucket, hour)).used > 4 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect((await counters.usage(bucket, hour)).used).toBe(4);
    // A block of an ended window is not granted from: the next take is counted in the new one.
    const second = "r:second";
    const first = await writes.takeAll([{ bucket: second, periodMs: 1_000, limit: 1_000 }]);
    await writes.takeAll([{ bucket: second, periodMs: 1_000, limit: 1_000 }]);
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, (first[0]?.resetAt.getTime() ?? 0) - Date.now()) + 50),
    );
    const next = await writes.takeAll([{ bucket: second, periodMs: 1_000, limit: 1_000 }]);
    expect(next[0]?.allowed).toBe(true);
    expect(next[0]?.windowStart.getTime()).toBeGreaterThan(first[0]?.windowStart.getTime() ?? 0);
    await writes.close();
  });
});
