/**
 * The lease contract: what `createLeases` promises, with the journal's
 * `expectedPosition` as the fence, run by every backend (PGlite in memory,
 * PostgreSQL) with a two-line spec:
 *
 * @example
 *   import { describeLeaseContract } from "../src/lease/leases.contract.js";
 *   import { pgliteTarget } from "@trellis/storage/contract";
 *   describeLeaseContract("pglite", pgliteTarget);
 *
 * Each test works in a schema of its own. A lapse is made by moving the
 * row's expiry into the past on the database clock (what a stalled owner's
 * lease looks like), never by sleeping; the crash test waits for a condition
 * with a generous deadline.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { isTrellisError } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openContractBackend } from "../contract/support.js";
import type { Database } from "../database.js";
import { createJournal, type Journal } from "../journal/journal.js";
import { readJournal } from "../journal/journal-read.js";
import { journalMigrations } from "../journal/journal-schema.js";
import type { StorageContractTarget } from "../storage.contract.js";
import type { LeaseChildConfig, LeaseChildLine } from "../testing/lease-crash-child.js";
import { leaseMigrations } from "./lease-schema.js";
import { createLeases, type Leases, type LeasesOptions, type LostLease } from "./leases.js";

const text = new TextEncoder();

/**
 * What a granted acquire answers: its fence, the journal head to append at,
 * and, when it took the stream from `previousOwner`, that owner.
 */
function granted(fence: bigint, expectedPosition: bigint, previousOwner?: string) {
  return previousOwner === undefined
    ? { acquired: true, fence, expectedPosition, tookOver: false }
    : { acquired: true, fence, expectedPosition, tookOver: true, previousOwner };
}

/** Registers the lease contract suite for one backend. */
export function describeLeaseContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
): void {
  describe(`lease contract: ${name}`, () => {
    const opened: Leases[] = [];
    const journals: Journal[] = [];
    const backend = openContractBackend(factory, {
      other: true,
      async release() {
        await Promise.all(opened.map((l) => l.close()));
        await Promise.all(journals.map((j) => j.close()));
      },
      // Opening PGlite can take most of a minute on the loaded shared box.
      timeoutMs: 180_000,
    });
    const freshSchema = () =>
      backend.freshSchema("ls", (schema) => ({
        ...journalMigrations(schema),
        ...leaseMigrations(schema),
      }));
    const open = (
      schema: string,
      options: Partial<LeasesOptions> = {},
      on: Database = backend.database,
    ): Leases => {
      const leases = createLeases({ database: on, schema, ttlMs: 30_000, ...options });
      opened.push(leases);
      return leases;
    };
    const journalOf = (schema: string) => {
      const journal = createJournal(backend.database, { schema });
      journals.push(journal);
      return journal;
    };
    const entry = (stream: string, body: string) => ({
      stream,
      kind: "test.step",
      body: text.encode(body),
    });
    /** A stalled owner: its lease's expiry passes on the database clock. */
    const lapse = (schema: string, stream: string) =>
      sql`update ${sql.id(schema, "session_leases")} set expires_at = now() - interval '1 second'
        where stream = ${stream}`.execute(backend.other.kysely);
    const row = async (schema: string, stream: string) => {
      const result = await sql<{ owner: string; fence: bigint; expires_at: Date }>`
        select owner, fence, expires_at from ${sql.id(schema, "session_leases")}
        where stream = ${stream}`.execute(backend.other.kysely);
      return result.rows[0];
    };
    const reasonOf = (error: unknown) => (isTrellisError(error) ? error.reason : String(error));

    it("acquires, refuses a second owner, renews, releases", async () => {
      const schema = await freshSchema();
      const a = open(schema);
      const b = open(schema, {}, backend.other);
      const first = await a.acquire("ses_1");
      expect(first).toMatchObject(granted(1n, 0n));
      expect(a.held("ses_1")?.fence).toBe(1n);

      await journalOf(schema).append([entry("ses_1", "a1"), entry("ses_1", "a2")], {
        expectedPosition: 0n,
      });
      const refused = await b.acquire("ses_1");
      expect(refused).toMatchObject({ acquired: false, ownedBy: a.owner });
      if (refused.acquired) throw new Error("unreachable");
      const before = await row(schema, "ses_1");
      expect(refused.until.getTime()).toBe(before?.expires_at.getTime());

      expect(await a.renew()).toEqual([]);
      const after = await row(schema, "ses_1");
      expect(after?.fence).toBe(1n);
      expect(after?.expires_at.getTime()).toBeGreaterThan(before?.expires_at.getTime() ?? 0);

      expect(await a.release("ses_1")).toBe(true);
      expect(await a.release("ses_1")).toBe(false);
      expect(a.held("ses_1")).toBeUndefined();
      // Released: another owner takes it at once, with a new fence and the head.
      const second = await b.acquire("ses_1");
      expect(second).toMatchObject(granted(2n, 2n, a.owner));
      expect(a.stats()).toMatchObject({ acquired: 1, released: 1, held: 0, lost: 0 });
      expect(b.stats()).toMatchObject({ acquired: 1, refused: 1, tookOver: 1, held: 1 });
    });

    it("renews every held lease in one statement and on its own timer", async () => {
      const schema = await freshSchema();
      const a = open(schema, { ttlMs: 60_000, renewEveryMs: 50 });
      const streams = Array.from({ length: 50 }, (_, i) => `ses_${i}`);
      for (const stream of streams) expect((await a.acquire(stream)).acquired).toBe(true);
      const roundsBefore = a.stats().rounds;
      // The timer renews by itself (waited for, not timed).
      await eventually(() => a.stats().rounds >= roundsBefore + 2, {
        timeoutMs: 30_000,
        what: "two timer rounds",
      });
      expect(await a.renew()).toEqual([]);
      // One statement: every row got the same database time.
      const result = await sql<{ n: bigint }>`
        select count(distinct expires_at) as n from ${sql.id(schema, "session_leases")}`.execute(
        backend.other.kysely,
      );
      expect(Number(result.rows[0]?.n)).toBe(1);
      for (const stream of streams) await a.release(stream);
      expect(a.stats().held).toBe(0);
    });

    it("lets exactly one of two racing owners win each stream", async () => {
      const schema = await freshSchema();
      const a = open(schema);
      const b = open(schema, {}, backend.other);
      const streams = Array.from({ length: 20 }, (_, i) => `race_${i}`);
      const results = await Promise.all(
        streams.map((stream) => Promise.all([a.acquire(stream), b.acquire(stream)])),
      );
      for (const [ra, rb] of results) {
        expect(ra.acquired !== rb.acquired).toBe(true);
        const loser = ra.acquired ? rb : ra;
        expect(loser).toMatchObject({ acquired: false, ownedBy: ra.acquired ? a.owner : b.owner });
        expect(ra.acquired ? ra.fence : rb.acquired ? rb.fence : 0n).toBe(1n);
      }
      expect(a.stats().held + b.stats().held).toBe(streams.length);
    });

    it("takes a lapsed lease over and tells the deposed owner at its next renewal", async () => {
      const schema = await freshSchema();
      const lostA: LostLease[] = [];
      const a = open(schema, { onLost: (lost) => lostA.push(lost) });
      const b = open(schema, {}, backend.other);
      await a.acquire("ses_t");
      await a.acquire("ses_e");
      await journalOf(schema).append([entry("ses_t", "a1")], { expectedPosition: 0n });

      await lapse(schema, "ses_t");
      const taken = await b.acquire("ses_t");
      expect(taken).toMatchObject(granted(2n, 1n, a.owner));
      await lapse(schema, "ses_e");

      const lost = await a.renew();
      const expected = [
        { stream: "ses_e", fence: 1n, reason: "expired" },
        { stream: "ses_t", fence: 1n, reason: "taken", ownedBy: b.owner },
      ];
      const byStream = (x: LostLease, y: LostLease) => x.stream.localeCompare(y.stream);
      expect([...lost].sort(byStream)).toEqual(expected);
      expect([...lostA].sort(byStream)).toEqual(expected);
      expect(a.held("ses_t")).toBeUndefined();
      expect(a.stats()).toMatchObject({ held: 0, lost: 2 });
      // The expired one is free for anyone; the deposed owner may re-acquire it.
      expect(await a.acquire("ses_e")).toMatchObject({ acquired: true, fence: 2n });
      expect(b.held("ses_t")?.fence).toBe(2n);
    });

    it("reports a lease lost when its owner finds it taken on re-acquire", async () => {
      const schema = await freshSchema();
      const lostA: LostLease[] = [];
      const a = open(schema, { onLost: (lost) => lostA.push(lost) });
      const b = open(schema, {}, backend.other);
      await a.acquire("ses_r");
      await lapse(schema, "ses_r");
      expect((await b.acquire("ses_r")).acquired).toBe(true);
      expect(await a.acquire("ses_r")).toMatchObject({ acquired: false, ownedBy: b.owner });
      expect(lostA).toEqual([{ stream: "ses_r", fence: 1n, reason: "taken", ownedBy: b.owner }]);
      expect(a.held("ses_r")).toBeUndefined();
    });

    it("drops leases past their deadline when the database cannot be reached", async () => {
      const schema = await freshSchema();
      const gone = await backend.target.open();
      const lostA: LostLease[] = [];
      const a = open(
        schema,
        { ttlMs: 1_000, renewEveryMs: 100, onError: () => {}, onLost: (lost) => lostA.push(lost) },
        gone,
      );
      await a.acquire("ses_u");
      await gone.close();
      // The timer keeps trying and failing; once the local deadline passed,
      // the lease is reported (a round that ran before the close and found
      // it expired would report the same).
      await eventually(() => lostA.length > 0, { timeoutMs: 30_000, what: "lease reported lost" });
      expect(lostA).toEqual([{ stream: "ses_u", fence: 1n, reason: "expired" }]);
      expect(a.held("ses_u")).toBeUndefined();
    });

    it("refuses the deposed owner's append once the new owner appended", async () => {
      const schema = await freshSchema();
      const journal = journalOf(schema);
      const a = open(schema);
      const b = open(schema, {}, backend.other);
      const history = () =>
        readJournal(backend.other.kysely, schema, { stream: "ses_f", limit: 100 });
      const bodies = async () => (await history()).map((r) => new TextDecoder().decode(r.body));
      /** "written", or the reason the journal refused the append. */
      const appendAt = (body: string, expectedPosition: bigint) =>
        journal.append([entry("ses_f", body)], { expectedPosition }).then(
          () => "written",
          (error) => reasonOf(error),
        );
      const mine = await a.acquire("ses_f");
      if (!mine.acquired) throw new Error("a must acquire");
      let aHead = mine.expectedPosition;
      const appended = await journal.append([entry("ses_f", "a1")], { expectedPosition: aHead });
      aHead = appended.positions.at(-1) as bigint;

      await lapse(schema, "ses_f");
      const theirs = await b.acquire("ses_f");
      if (!theirs.acquired) throw new Error("b must take over");
      expect(theirs.expectedPosition).toBe(aHead);
      // The new owner rebuilds from the journal up to its head, then appends.
      expect((await history()).map((r) => r.position)).toEqual([aHead]);
      await journal.append([entry("ses_f", "b1")], { expectedPosition: theirs.expectedPosition });

      // A does not know yet; its append with its old expectation is refused.
      expect(await appendAt("a2", aHead)).toBe("conflict");
      expect(await bodies()).toEqual(["a1", "b1"]);

      // The other order: the deposed owner slips in first; then the new
      // owner's first append is the one refused, and still one history.
      await lapse(schema, "ses_f");
      const c = open(schema);
      const third = await c.acquire("ses_f");
      if (!third.acquired) throw new Error("c must take over");
      await journal.append([entry("ses_f", "b2")], { expectedPosition: third.expectedPosition });
      expect(await appendAt("c1", third.expectedPosition)).toBe("conflict");
      expect(await bodies()).toEqual(["a1", "b1", "b2"]);
    });

    it("is bounded and raises typed errors", async () => {
      const schema = await freshSchema();
      const a = open(schema, { maxLeases: 2 });
      await a.acquire("s1");
      await a.acquire("s2");
      await expect(a.acquire("s3")).rejects.toSatisfy((e) => reasonOf(e) === "rate_limited");
      // Re-acquiring a held one is not a new lease.
      expect(await a.acquire("s2")).toMatchObject({ acquired: true, fence: 2n });
      await a.release("s1");
      expect((await a.acquire("s3")).acquired).toBe(true);
      await expect(a.acquire("")).rejects.toSatisfy((e) => reasonOf(e) === "invalid_request");
      expect(() =>
        createLeases({ database: backend.database, schema, ttlMs: 100, renewEveryMs: 100 }),
      ).toThrow(/renewEveryMs/);
      await a.close();
      await expect(a.acquire("s4")).rejects.toSatisfy((e) => reasonOf(e) === "service_unavailable");
      // Closing released everything held: others take it at once.
      const b = open(schema, {}, backend.other);
      expect(await b.acquire("s2")).toMatchObject({ acquired: true, tookOver: true });
    });

    it("hands a killed owner's leases over after the TTL", async (ctx) => {
      if (backend.target.childConfig === undefined) return ctx.skip();
      const schema = await freshSchema();
      const streams = ["k1", "k2", "k3"];
      await journalOf(schema).append([entry("k2", "x")], { expectedPosition: 0n });
      const childPath = fileURLToPath(new URL("../testing/lease-crash-child.ts", import.meta.url));
      const packageDir = fileURLToPath(new URL("../..", import.meta.url));
      const config: LeaseChildConfig = {
        database: backend.target.childConfig,
        schema,
        streams,
        ttlMs: 2_000,
        renewEveryMs: 400,
      };
      const child = spawn(process.execPath, ["--import", "tsx", childPath], {
        cwd: packageDir,
        env: { ...process.env, TRELLIS_LEASE_CHILD: JSON.stringify(config) },
        stdio: ["ignore", "pipe", "inherit"],
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.on("exit", (_code, signal) => resolve(signal)),
      );
      try {
        const line = await new Promise<LeaseChildLine>((resolve, reject) => {
          let buffer = "";
          child.stdout.setEncoding("utf8");
          child.stdout.on("data", (chunk: string) => {
            buffer += chunk;
            const end = buffer.indexOf("\n");
            if (end >= 0) resolve(JSON.parse(buffer.slice(0, end)) as LeaseChildLine);
          });
          child.on("error", reject);
          child.on("exit", () => reject(new Error("lease child exited before acquiring")));
        });
        expect(line.fences).toEqual(["1", "1", "1"]);
        const b = open(schema, {}, backend.other);
        // Held and renewed by a live child: refused.
        expect(await b.acquire("k1")).toMatchObject({ acquired: false, ownedBy: line.owner });

        child.kill("SIGKILL");
        expect(await exited).toBe("SIGKILL");
        // Nobody renews now; once the TTL passed on the database clock, b takes over.
        for (const stream of streams) {
          const result = await eventually(
            async () => {
              const r = await b.acquire(stream);
              return r.acquired ? r : undefined;
            },
            { timeoutMs: 60_000, intervalMs: 200, what: `take-over of ${stream}` },
          );
          expect(result).toMatchObject(granted(2n, stream === "k2" ? 1n : 0n, line.owner));
        }
      } finally {
        child.kill("SIGKILL");
      }
    }, 120_000);
  });
}
