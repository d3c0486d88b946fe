/**
 * The journal contract: what `createJournal` promises (appends, group
 * commit, order, idempotency keys, expected positions, failures), run by
 * every backend (PGlite in memory, PostgreSQL) with a two-line spec:
 *
 * @example
 *   import { describeJournalContract } from "../src/journal/journal.contract.js";
 *   import { pgliteTarget } from "@trellis/storage/contract";
 *   describeJournalContract("pglite", pgliteTarget);
 *
 * What a projector promises is `projector.contract.ts`. Each test works in
 * a schema of its own, so counts and positions start at 1.
 */
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import { isTrellisError } from "@trellis/runtime";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { appendToOutbox, readOutbox } from "../outbox/outbox.js";
import { outboxMigrations } from "../outbox/outbox-schema.js";
import type { StorageContractTarget } from "../storage.contract.js";
import { decode, entry, journalFixture } from "./journal-fixture.contract.js";
import { readJournal } from "./journal-read.js";
import { journalMigrations } from "./journal-schema.js";

/** An event of task `task`, sequenced by its writer (sequence 1 unless told, previous id). */
const taskEvent = (
  kind: string,
  task: string,
  at: { id?: string; sequence?: bigint; previous?: string } = {},
): Event =>
  create(EventSchema, {
    kind,
    workspaceId: "ws",
    sessionId: "ses",
    taskId: task,
    resource: { object: "task", id: task },
    id: at.id ?? "",
    sequence: at.sequence ?? 1n,
    previousEventId: at.previous ?? "",
  });

/** Registers the journal contract suite for one backend. */
export function describeJournalContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
): void {
  describe(`journal contract: ${name}`, () => {
    const { backend, freshSchema, open, all, transactions, range } = journalFixture(factory);
    /** From now on `<schema>.<table>` refuses rows of kind `poison` (a trigger raising). */
    const refusePoison = async (schema: string, table: string) => {
      await sql`
        create function ${sql.id(schema, `refuse_${table}`)}() returns trigger language plpgsql as $$
        begin
          if new.kind = 'poison' then raise exception 'refused'; end if;
          return new;
        end $$`.execute(backend.database.kysely);
      await sql`create trigger refuse before insert on ${sql.id(schema, table)}
        for each row execute function ${sql.id(schema, `refuse_${table}`)}()`.execute(
        backend.database.kysely,
      );
    };

    it("resolves an append only after its batch committed, then it is readable anywhere", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      // Another transaction holds the journal's lock (Postgres) / the instance (PGlite).
      let release: () => void = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      let holding: () => void = () => {};
      const held = new Promise<void>((r) => {
        holding = r;
      });
      const blocker = backend.other.kysely.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtextextended(${`trellis.journal.${schema}`}, 0))`.execute(
          trx,
        );
        holding();
        await gate;
      });
      await held;
      let resolved = false;
      const appended = journal.append([entry("s1"), entry("s1", "second")]).then((r) => {
        resolved = true;
        return r;
      });
      await new Promise((r) => setTimeout(r, 200));
      expect(resolved).toBe(false);
      release();
      await blocker;
      const result = await appended;
      expect(result).toEqual({ positions: [1n, 2n], duplicate: false });
      // A different connection sees both entries the moment append resolved.
      const rows = await all(schema);
      expect(rows.map((r) => [r.position, r.stream, r.kind])).toEqual([
        [1n, "s1", "test.entry"],
        [2n, "s1", "second"],
      ]);
      expect(rows.map(decode)).toEqual(["s1:test.entry", "s1:second"]);
      expect(journal.head()).toBe(2n);
    });

    it("group-commits concurrent appends into few transactions", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const results = await Promise.all(
        Array.from({ length: 32 }, (_, i) => journal.append([entry(`s${i}`)])),
      );
      expect(results.flatMap((r) => r.positions).sort((a, b) => Number(a - b))).toEqual(range(32));
      expect(await transactions(schema)).toBeLessThanOrEqual(2);
      expect(journal.stats()).toMatchObject({ appends: 32, entries: 32, queued: 0 });
      expect(journal.stats().batches).toBeLessThanOrEqual(2);

      // Bounded: at most maxBatchEntries per transaction, appends never split.
      const small = await freshSchema();
      const bounded = open(small, { maxBatchEntries: 4 });
      await Promise.all(
        Array.from({ length: 12 }, (_, i) => bounded.append([entry(`s${i}`), entry(`s${i}`)])),
      );
      const perTransaction = await sql<{ n: bigint }>`
        select count(*) as n from ${sql.id(small, "journal")} group by xmin::text`.execute(
        backend.other.kysely,
      );
      expect(perTransaction.rows.map((r) => Number(r.n))).toEqual([2, 2, 2, 2, 2, 2].map(() => 4));
    });

    it("writes an idempotency key once, also when it repeats within one batch and across writers", async () => {
      const schema = await freshSchema();
      const first = open(schema);
      const second = open(schema, {}, backend.other);
      const same = (i: number) => [entry("s1", `k${i}`), entry("s1", `k${i}b`)];
      const results = await Promise.all([
        ...Array.from({ length: 5 }, (_, i) =>
          first.append(same(i), { idempotencyKey: "submit-1" }),
        ),
        ...Array.from({ length: 5 }, (_, i) =>
          second.append(same(i + 5), { idempotencyKey: "submit-1" }),
        ),
        first.append([entry("s2")]),
      ]);
      const keyed = results.slice(0, 10);
      expect(keyed.filter((r) => !r.duplicate)).toHaveLength(1);
      const original = keyed.find((r) => !r.duplicate)?.positions;
      for (const r of keyed) expect(r.positions).toEqual(original);
      // Later, in a batch of its own: still the original positions.
      const later = await second.append([entry("s1", "late")], { idempotencyKey: "submit-1" });
      expect(later).toEqual({ positions: original, duplicate: true });
      const rows = await all(schema);
      expect(rows).toHaveLength(3);
      expect(rows.filter((r) => r.stream === "s1")).toHaveLength(2);
    });

    it("keeps each stream in append order with gapless positions visible in order", async () => {
      const schema = await freshSchema();
      const a = open(schema);
      const b = open(schema, {}, backend.other);
      // A reader paging by position while two writers append must never see a gap.
      let reading = true;
      const gaps: string[] = [];
      const reader = (async () => {
        while (reading) {
          const rows = await readJournal(backend.other.kysely, schema, { limit: 100_000 });
          rows.forEach((r, i) => {
            if (r.position !== BigInt(i + 1)) gaps.push(`${i + 1} → ${r.position}`);
          });
          await new Promise((r) => setTimeout(r, 2));
        }
      })();
      const calls: Promise<unknown>[] = [];
      for (let i = 0; i < 60; i++) {
        const writer = i % 2 === 0 ? a : b;
        // Per stream, each writer issues its own calls in order.
        calls.push(writer.append([entry(`a${i % 2}`, `n${i}`)]));
        calls.push(writer.append([entry(`b${i % 2}`, `n${i}`), entry(`b${i % 2}`, `n${i}x`)]));
        if (i % 7 === 0) await new Promise((r) => setTimeout(r, 1));
      }
      await Promise.all(calls);
      reading = false;
      await reader;
      expect(gaps).toEqual([]);
      const rows = await all(schema);
      expect(rows.map((r) => r.position)).toEqual(range(180));
      for (const stream of ["a0", "a1"]) {
        const kinds = rows.filter((r) => r.stream === stream).map((r) => Number(r.kind.slice(1)));
        expect(kinds).toEqual([...kinds].sort((x, y) => x - y));
      }
      const b0 = rows.filter((r) => r.stream === "b0").map((r) => r.kind);
      expect(b0.slice(0, 4)).toEqual(["n0", "n0x", "n2", "n2x"]);
    });

    it("refuses an append whose stream moved (expectedPosition), alone in its batch", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const owner = open(schema, {}, backend.other);
      expect(await journal.append([entry("s")], { expectedPosition: 0n })).toEqual({
        positions: [1n],
        duplicate: false,
      });
      await journal.append([entry("x")]);
      // A deposed owner still believes the stream is empty.
      await expect(owner.append([entry("s")], { expectedPosition: 0n })).rejects.toMatchObject({
        reason: "conflict",
        metadata: { stream: "s", expected: "0", position: "1" },
      });
      // In one batch: the first expectation wins, the second finds the stream
      // moved; the other appends of the batch are written.
      const outcomes = await Promise.allSettled([
        journal.append([entry("s", "a"), entry("s", "b")], { expectedPosition: 1n }),
        journal.append([entry("y")]),
        journal.append([entry("s", "c")], { expectedPosition: 1n }),
        journal.append([entry("z")]),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual([
        "fulfilled",
        "fulfilled",
        "rejected",
        "fulfilled",
      ]);
      expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({ reason: "conflict" });
      const rows = await all(schema);
      expect(rows.map((r) => `${r.stream}:${r.kind}`)).toEqual([
        "s:test.entry",
        "x:test.entry",
        "s:a",
        "s:b",
        "y:test.entry",
        "z:test.entry",
      ]);
      expect(journal.stats()).toMatchObject({ conflicts: 1, failedBatches: 0 });
      // A retry after a lost answer: its key says it was written, whatever the stream did since.
      const keyed = await journal.append([entry("s", "k")], {
        expectedPosition: 4n,
        idempotencyKey: "step-9",
      });
      expect(
        await journal.append([entry("s", "k")], { expectedPosition: 4n, idempotencyKey: "step-9" }),
      ).toEqual({ positions: keyed.positions, duplicate: true });
      await expect(
        journal.append([entry("s"), entry("t")], { expectedPosition: 7n }),
      ).rejects.toMatchObject({ reason: "invalid_request", param: "expectedPosition" });
    });

    it("lets exactly one of two racing writers append at an expected position", async () => {
      const schema = await freshSchema();
      const a = open(schema);
      const b = open(schema, {}, backend.other);
      // Each round both writers expect the same head; another stream moves the
      // journal's head meanwhile. One wins, the other is refused, every round.
      let head = 0n;
      for (let round = 0; round < 12; round++) {
        const outcomes = await Promise.allSettled([
          a.append([entry("s", `a${round}`)], { expectedPosition: head }),
          b.append([entry("s", `b${round}`)], { expectedPosition: head }),
          b.append([entry(`o${round}`)]),
        ]);
        const won = outcomes.slice(0, 2).filter((o) => o.status === "fulfilled");
        expect(won).toHaveLength(1);
        const lost = outcomes.slice(0, 2).find((o) => o.status === "rejected");
        expect((lost as PromiseRejectedResult).reason).toMatchObject({ reason: "conflict" });
        head = (won[0] as PromiseFulfilledResult<{ positions: bigint[] }>).value
          .positions[0] as bigint;
      }
      const rows = await all(schema);
      expect(rows.map((r) => r.position)).toEqual(range(24));
      expect(rows.filter((r) => r.stream === "s")).toHaveLength(12);
    });

    it("appends by the one-statement function, and without it in an older schema", async () => {
      const schema = await freshSchema();
      const fn = await sql<{ n: number }>`
        select count(*)::int as n from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = ${schema} and p.proname = 'journal_append'`.execute(backend.other.kysely);
      expect(fn.rows[0]?.n).toBe(1);
      // A schema migrated before the function existed: the journal falls back.
      await sql`drop function ${sql.id(schema, "journal_append")}`.execute(backend.other.kysely);
      const journal = open(schema);
      const first = await journal.append([entry("s", "a"), entry("s", "b")], {
        expectedPosition: 0n,
        idempotencyKey: "k1",
      });
      expect(first).toEqual({ positions: [1n, 2n], duplicate: false });
      expect(await journal.append([entry("s", "a")], { idempotencyKey: "k1" })).toEqual({
        positions: [1n, 2n],
        duplicate: true,
      });
      await expect(
        journal.append([entry("s", "c")], { expectedPosition: 1n }),
      ).rejects.toMatchObject({ reason: "conflict", metadata: { position: "2" } });
      expect(await journal.append([entry("s", "c")], { expectedPosition: 2n })).toEqual({
        positions: [3n],
        duplicate: false,
      });
      expect(journal.stats()).toMatchObject({ failedBatches: 0, conflicts: 1, duplicates: 1 });
    });

    it("fails every append of a failed batch, writes none of it, and recovers", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      await journal.append([entry("s0")]);
      // The database refuses one entry's row (as a full disk or a bug would).
      await refusePoison(schema, "journal");
      const outcomes = await Promise.allSettled([
        journal.append([entry("s1")]),
        journal.append([entry("s2", "poison")]),
        journal.append([entry("s3")], { idempotencyKey: "k" }),
      ]);
      for (const outcome of outcomes) {
        expect(outcome.status).toBe("rejected");
        const reason = (outcome as PromiseRejectedResult).reason;
        expect(isTrellisError(reason) && reason.reason).toBe("service_unavailable");
      }
      expect((await all(schema)).map((r) => r.stream)).toEqual(["s0"]);
      expect(journal.stats().failedBatches).toBe(1);
      // The next batch works and continues without a gap; the key is free.
      const next = await journal.append([entry("s3")], { idempotencyKey: "k" });
      expect(next).toEqual({ positions: [2n], duplicate: false });
    });

    it("writes an append's events to its outbox with the entries, and only then", async () => {
      const schema = await backend.freshSchema("jr", (s) => ({
        ...outboxMigrations(s),
        ...journalMigrations(s),
      }));
      const kicked: LoggedEvent[] = [];
      const journal = open(schema, {
        outbox: { schema, kick: (rows) => kicked.push(...rows) },
      });
      // One batch: a keyed append, its repeat, a stale expectation, another stream.
      const outcomes = await Promise.allSettled([
        journal.append([entry("s1")], {
          idempotencyKey: "k",
          events: [
            taskEvent("task.submitted", "t1", { id: "evt_1" }),
            taskEvent("task.started", "t1", { id: "evt_2", sequence: 2n, previous: "evt_1" }),
          ],
        }),
        journal.append([entry("s1")], {
          idempotencyKey: "k",
          events: [taskEvent("task.submitted", "t8")],
        }),
        journal.append([entry("s2")], {
          expectedPosition: 5n,
          events: [taskEvent("task.submitted", "t9")],
        }),
        journal.append([entry("s3")], {
          events: [
            taskEvent("task.completed", "t1", { id: "evt_3", sequence: 3n, previous: "evt_2" }),
          ],
        }),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual([
        "fulfilled",
        "fulfilled",
        "rejected",
        "fulfilled",
      ]);
      expect(journal.stats().batches).toBe(1);
      // Durable once the append resolved; nothing for the duplicate or the refused append.
      const rows = await readOutbox(backend.other, schema, { limit: 100 });
      expect(rows.map((r) => [r.event.id, r.event.resource?.id, r.event.sequence])).toEqual([
        ["evt_1", "t1", 1n],
        ["evt_2", "t1", 2n],
        ["evt_3", "t1", 3n],
      ]);
      // Handed to the relay as written (position and event), after the commit.
      expect(kicked.map((k) => [k.position, k.event.id])).toEqual(
        rows.map((r) => [r.position, r.event.id]),
      );
      expect((await all(schema)).map((r) => r.stream)).toEqual(["s1", "s3"]);
      // The counter row follows: a writer sequenced by the outbox continues it.
      await backend.database.kysely
        .transaction()
        .execute((trx) =>
          appendToOutbox(trx, schema, [
            create(EventSchema, { kind: "task.canceled", resource: { object: "task", id: "t1" } }),
          ]),
        );
      const after = await readOutbox(backend.other, schema, { limit: 100 });
      expect(after.at(-1)?.event).toMatchObject({ sequence: 4n, previousEventId: "evt_3" });
      // A sequence taken meanwhile by that other writer fails the batch, whole.
      const taken = await Promise.allSettled([
        journal.append([entry("s6")], { events: [taskEvent("task.submitted", "t6")] }),
        journal.append([entry("s1")], {
          events: [taskEvent("task.completed", "t1", { sequence: 4n, previous: "evt_3" })],
        }),
      ]);
      expect(taken.map((o) => o.status)).toEqual(["rejected", "rejected"]);
      const reason = (taken[0] as PromiseRejectedResult).reason;
      expect(isTrellisError(reason) && reason.reason).toBe("service_unavailable");

      // The outbox refuses a row: the whole batch fails, its entries with it.
      await refusePoison(schema, "outbox");
      const failed = await Promise.allSettled([
        journal.append([entry("s4")], { events: [taskEvent("task.submitted", "t4")] }),
        journal.append([entry("s5")], { events: [taskEvent("poison", "t5")] }),
      ]);
      expect(failed.map((o) => o.status)).toEqual(["rejected", "rejected"]);
      expect((await all(schema)).map((r) => r.stream)).toEqual(["s1", "s3"]);
      expect(await readOutbox(backend.other, schema, { limit: 100 })).toHaveLength(4);
      expect(kicked).toHaveLength(3);
      // The next batch writes both again.
      await journal.append([entry("s4")], { events: [taskEvent("task.submitted", "t4")] });
      expect((await all(schema)).map((r) => r.stream)).toEqual(["s1", "s3", "s4"]);
      expect(kicked.map((k) => k.event.resource?.id)).toEqual(["t1", "t1", "t1", "t4"]);
    });

    it("refuses bad events before they are queued, each alone", async () => {
      const schema = await backend.freshSchema("jr", (s) => ({
        ...outboxMigrations(s),
        ...journalMigrations(s),
      }));
      const reason = (promise: Promise<unknown>) =>
        promise.then(
          () => "resolved",
          (e: unknown) => (isTrellisError(e) ? `${e.reason} ${e.param ?? ""}`.trim() : String(e)),
        );
      const without = open(schema);
      expect(await reason(without.append([entry("s")], { events: [taskEvent("k", "t")] }))).toBe(
        "invalid_request events",
      );
      const journal = open(schema, { outbox: { schema, kick: () => undefined } });
      const big = taskEvent("k", "t");
      big.traceId = "y".repeat(1_000_000);
      const bad: Event[][] = [
        [create(EventSchema, { kind: "no.resource", sequence: 1n })],
        [taskEvent("k", "t\0")],
        [taskEvent("k", "t", { id: "evt_same" }), taskEvent("k", "u", { id: "evt_same" })],
        // Not chained: a first sequence past 1 without a previous id, 1 with
        // one, a gap, a previous id that is not the one before.
        [taskEvent("k", "t", { sequence: 3n })],
        [taskEvent("k", "t", { previous: "evt_0" })],
        [taskEvent("k", "t", { id: "a" }), taskEvent("k", "t", { sequence: 3n, previous: "a" })],
        [taskEvent("k", "t", { id: "a" }), taskEvent("k", "t", { sequence: 2n, previous: "b" })],
        [create(EventSchema, { kind: "unsequenced", resource: { object: "task", id: "t" } })],
      ];
      const results = await Promise.all([
        ...bad.map((events) => reason(journal.append([entry("s")], { events }))),
        reason(journal.append([entry("s")], { events: [big] })),
        reason(journal.append([entry("s", "fine")], { events: [taskEvent("ok", "t")] })),
      ]);
      expect(results).toEqual([
        ...bad.map(() => "invalid_request events"),
        "payload_too_large",
        "resolved",
      ]);
      expect((await all(schema)).map((r) => r.kind)).toEqual(["fine"]);
      const stored = await readOutbox(backend.other, schema, { limit: 10 });
      expect(stored.map((r) => r.event.kind)).toEqual(["ok"]);
    });

    it("refuses bad, oversized and excess appends with typed errors", async () => {
      const schema = await freshSchema();
      const journal = open(schema, { maxEntryBytes: 8, maxBatchEntries: 3, maxQueuedEntries: 4 });
      const reason = (promise: Promise<unknown>) =>
        promise.then(
          () => "resolved",
          (e: unknown) => (isTrellisError(e) ? `${e.reason} ${e.param ?? ""}`.trim() : String(e)),
        );
      expect(await reason(journal.append([]))).toBe("invalid_request entries");
      expect(await reason(journal.append([entry("")]))).toBe("invalid_request entries[0].stream");
      expect(await reason(journal.append([entry("s\0")]))).toBe(
        "invalid_request entries[0].stream",
      );
      expect(await reason(journal.append([{ stream: "s", kind: "k", body: "x" as never }]))).toBe(
        "invalid_request entries[0].body",
      );
      expect(await reason(journal.append([entry("s", "k", "123456789")]))).toBe(
        "payload_too_large entries[0].body",
      );
      expect(
        await reason(journal.append(["s", "s", "s", "s"].map((x) => entry(x, "k", "x")))),
      ).toBe("payload_too_large entries");
      // Backpressure: the queue holds 4 entries; more are refused, not queued.
      const small = (stream: string) => entry(stream, "k", "x");
      const queued = [journal.append([small("a"), small("a"), small("a")])];
      expect(await reason(journal.append([small("b"), small("b")]))).toBe("rate_limited");
      queued.push(journal.append([small("c")]));
      await Promise.all(queued);
      expect((await all(schema)).map((r) => r.stream)).toEqual(["a", "a", "a", "c"]);
      await journal.close();
      expect(await reason(journal.append([small("d")]))).toBe("service_unavailable");
    });
  });
}
