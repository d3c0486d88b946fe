/**
 * The journal contract: what `createJournal` and `createProjector` promise,
 * run by every backend (PGlite in memory, PostgreSQL) with a two-line spec:
 *
 * @example
 *   import { describeJournalContract } from "../src/journal/journal.contract.js";
 *   import { pgliteTarget } from "@trellis/storage/contract";
 *   describeJournalContract("pglite", pgliteTarget);
 *
 * Each test works in a schema of its own, so counts and positions start at 1.
 */
import {
  AggregationTemporality,
  type GaugeMetricData,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type SumMetricData,
} from "@opentelemetry/sdk-metrics";
import { isTrellisError } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { sql, type Transaction } from "kysely";
import { describe, expect, it } from "vitest";
import { openContractBackend } from "../contract/support.js";
import type { StorageContractTarget } from "../storage.contract.js";
import { createJournal, type Journal, type JournalEntry, type JournalOptions } from "./journal.js";
import { type JournalRecord, readJournal } from "./journal-read.js";
import { journalMigrations } from "./journal-schema.js";
import {
  createProjector,
  type Projector,
  type ProjectorDeadLetter,
  projectorDeadLetterMetric,
  projectorLagMetric,
} from "./projector.js";
import { projectorHealth } from "./projector-health.js";

const text = new TextEncoder();
const entry = (stream: string, kind = "test.entry", body = `${stream}:${kind}`): JournalEntry => ({
  stream,
  kind,
  body: text.encode(body),
});
const decode = (record: JournalRecord): string => new TextDecoder().decode(record.body);

/** Registers the journal contract suite for one backend. */
export function describeJournalContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
): void {
  describe(`journal contract: ${name}`, () => {
    const journals: Journal[] = [];
    const projectors: Projector[] = [];
    const backend = openContractBackend(factory, {
      other: true,
      async release() {
        await Promise.all(projectors.map((p) => p.stop()));
        await Promise.all(journals.map((j) => j.close()));
      },
    });
    const freshSchema = () => backend.freshSchema("jr", journalMigrations);
    const open = (schema: string, options: Partial<JournalOptions> = {}, on = backend.database) => {
      const journal = createJournal(on, { schema, ...options });
      journals.push(journal);
      return journal;
    };
    const all = (schema: string, on = backend.other) =>
      readJournal(on.kysely, schema, { limit: 100_000 });
    /** How many transactions wrote the journal's rows (their distinct `xmin`). */
    const transactions = async (schema: string): Promise<number> => {
      const result = await sql<{ n: bigint }>`
        select count(distinct xmin::text) as n from ${sql.id(schema, "journal")}`.execute(
        backend.other.kysely,
      );
      return Number(result.rows[0]?.n ?? 0n);
    };
    /** A projection table and a `project` that records each entry in it. */
    const projection = async (schema: string) => {
      await sql`create table ${sql.id(schema, "applied")} (position bigint not null, stream text not null)`.execute(
        backend.database.kysely,
      );
      const apply = async (batch: readonly JournalRecord[], trx: Transaction<unknown>) => {
        await sql`insert into ${sql.id(schema, "applied")} (position, stream) values ${sql.join(
          batch.map((r) => sql`(${r.position}, ${r.stream})`),
        )}`.execute(trx);
      };
      const applied = async (): Promise<bigint[]> => {
        const rows = await sql<{ position: bigint }>`
          select position from ${sql.id(schema, "applied")} order by position`.execute(
          backend.other.kysely,
        );
        return rows.rows.map((r) => BigInt(r.position));
      };
      return { apply, applied };
    };
    const project = async (
      schema: string,
      options: Partial<Parameters<typeof createProjector>[0]> & {
        project: Parameters<typeof createProjector>[0]["project"];
      },
    ) => {
      const projector = await createProjector({
        database: backend.database,
        schema,
        name: "test",
        pollIntervalMs: 50,
        retryMs: 10,
        maxRetryMs: 50,
        onError: () => {},
        ...options,
      });
      projectors.push(projector);
      return projector;
    };
    const range = (n: number) => Array.from({ length: n }, (_, i) => BigInt(i + 1));

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
      await sql`
        create function ${sql.id(schema, "refuse")}() returns trigger language plpgsql as $$
        begin
          if new.kind = 'poison' then raise exception 'refused'; end if;
          return new;
        end $$`.execute(backend.database.kysely);
      await sql`create trigger refuse before insert on ${sql.id(schema, "journal")}
        for each row execute function ${sql.id(schema, "refuse")}()`.execute(
        backend.database.kysely,
      );
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

    it("projects every entry exactly once across a failure mid-batch and a restart", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      for (let i = 0; i < 5; i++) await journal.append([entry(`s${i}`), entry(`s${i}`)]);
      // The first projector dies in the middle of its batches: it wrote rows, then threw.
      let calls = 0;
      const dying = await project(schema, {
        batchSize: 4,
        project: async (batch, trx) => {
          calls++;
          await apply(batch, trx);
          if (calls >= 2) throw new Error("killed mid-batch");
        },
      });
      await eventually(() => expect(dying.status().failures).toBeGreaterThan(1));
      expect(dying.status()).toMatchObject({ position: 4n, lastError: "killed mid-batch" });
      await dying.stop();
      expect(await applied()).toEqual(range(4));
      // A new projector of the same name continues from the durable position.
      await journal.append([entry("late")]);
      const next = await project(schema, { batchSize: 4, journal, project: apply });
      await next.waitFor(11n);
      expect(await applied()).toEqual(range(11));
      expect(next.status()).toMatchObject({ position: 11n, head: 11n, lag: 0n, failures: 0 });
    });

    it("applies each entry once when two instances of one projector run together", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const p1 = await project(schema, { batchSize: 3, journal, project: apply });
      const p2 = await project(schema, { batchSize: 3, project: apply, database: backend.other });
      await Promise.all(Array.from({ length: 40 }, (_, i) => journal.append([entry(`s${i}`)])));
      await p1.waitFor(40n);
      await p2.waitFor(40n);
      expect(await applied()).toEqual(range(40));
    });

    it("applies what its journal hands over without reading it back, and reads gaps", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const elsewhere = open(schema, {}, backend.other);
      const { apply, applied } = await projection(schema);
      // Written before the projector started: only the table has them.
      await journal.append([entry("before"), entry("before")]);
      const seen: { position: bigint; stream: string; kind: string; body: number[] }[] = [];
      const projector = await project(schema, {
        journal,
        pollIntervalMs: 60_000,
        project: async (batch, trx) => {
          for (const r of batch)
            seen.push({ position: r.position, stream: r.stream, kind: r.kind, body: [...r.body] });
          await apply(batch, trx);
        },
      });
      await projector.waitFor(2n);
      expect(projector.status()).toMatchObject({ readEntries: 2, handedEntries: 0 });
      // Appended by this process's journal: applied as handed over.
      for (let i = 0; i < 3; i++) {
        const { positions } = await journal.append([entry(`s${i}`), entry(`s${i}`)]);
        await projector.waitFor(positions[1] as bigint);
      }
      expect(projector.status()).toMatchObject({ readEntries: 2, handedEntries: 6 });
      // Another writer's entry makes a gap: it and what follows are read, then handing resumes.
      await elsewhere.append([entry("other")]);
      const after = await journal.append([entry("after")]);
      await projector.waitFor(after.positions[0] as bigint);
      const last = await journal.append([entry("last")]);
      await projector.waitFor(last.positions[0] as bigint);
      expect(await applied()).toEqual(range(11));
      const status = projector.status();
      expect(status.readEntries + status.handedEntries).toBe(11);
      expect(status.readEntries).toBeGreaterThanOrEqual(3);
      expect(status.handedEntries).toBeGreaterThanOrEqual(7);
      // What was handed over is what the table holds.
      const rows = await all(schema);
      expect(seen).toEqual(
        rows.map((r) => ({
          position: r.position,
          stream: r.stream,
          kind: r.kind,
          body: [...r.body],
        })),
      );
    });

    it("waitFor gives read-your-writes, times out typed, and rejects once stopped", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const projector = await project(schema, { journal, project: apply, pollIntervalMs: 60_000 });
      const { positions } = await journal.append([entry("s1"), entry("s1")]);
      await projector.waitFor(positions[1] as bigint);
      expect(await applied()).toEqual([1n, 2n]);
      await expect(projector.waitFor(1n)).resolves.toBeUndefined();

      // A position nobody writes: deadline_exceeded after the timeout.
      const started = performance.now();
      await expect(projector.waitFor(99n, { timeoutMs: 150 })).rejects.toMatchObject({
        reason: "deadline_exceeded",
      });
      expect(performance.now() - started).toBeGreaterThanOrEqual(140);
      const pending = projector.waitFor(99n, { timeoutMs: 10_000 });
      await projector.stop();
      await expect(pending).rejects.toMatchObject({ reason: "service_unavailable" });
      await expect(projector.waitFor(98n)).rejects.toMatchObject({ reason: "service_unavailable" });
      expect(() => projectorHealth(projector).check(new AbortController().signal)).toThrow(
        /is stopped/,
      );
    });

    it("wakes a projector in another process by NOTIFY", async () => {
      const schema = await freshSchema();
      const journal = open(schema, { notify: true }, backend.other);
      const { apply, applied } = await projection(schema);
      // No in-process journal and no polling to speak of: only the NOTIFY wakes it.
      const projector = await project(schema, {
        listen: true,
        pollIntervalMs: 60_000,
        project: apply,
      });
      await new Promise((r) => setTimeout(r, 100));
      await journal.append([entry("s1"), entry("s2")]);
      await eventually(() => projector.position() === 2n, { timeoutMs: 5000 });
      expect(await applied()).toEqual([1n, 2n]);
    });

    it("gathers appends into one batch with delayMs", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      let calls = 0;
      const projector = await project(schema, {
        journal,
        delayMs: 1000,
        pollIntervalMs: 60_000,
        project: async (batch, trx) => {
          calls++;
          await apply(batch, trx);
        },
      });
      for (let i = 0; i < 5; i++) await journal.append([entry(`s${i}`)]);
      await eventually(async () => (await applied()).length === 5, { timeoutMs: 5000 });
      expect(calls).toBeLessThanOrEqual(2);
      await projector.stop();
    });

    it("gathers again after a waiter was served (delayMs)", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const batches: bigint[][] = [];
      // Only a waiter makes it apply within the test: the delay is a minute.
      const projector = await project(schema, {
        journal,
        delayMs: 60_000,
        pollIntervalMs: 60_000,
        project: async (batch, trx) => {
          batches.push(batch.map((e) => e.position));
          await apply(batch, trx);
        },
      });
      // A waiter does not sit out the delay: a minute would outlast the test.
      const first = await journal.append([entry("a")]);
      await projector.waitFor(first.positions[0] as bigint);
      await journal.append([entry("b")]);
      const last = await journal.append([entry("c")]);
      // Nobody waits for b and c: they wait out the delay, together.
      await new Promise((r) => setTimeout(r, 200));
      expect(projector.position()).toBe(1n);
      await projector.waitFor(last.positions[0] as bigint);
      expect(batches).toEqual([[1n], [2n, 3n]]);
      expect(await applied()).toEqual([1n, 2n, 3n]);
    });

    it("applies a large backlog without waiting the delay (delayUntilBacklog, default 32)", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const batches: number[] = [];
      // Nobody waits and the delay is a minute: only the backlog's size applies it.
      await project(schema, {
        journal,
        delayMs: 60_000,
        pollIntervalMs: 60_000,
        project: async (batch, trx) => {
          batches.push(batch.length);
          await apply(batch, trx);
        },
      });
      await journal.append(Array.from({ length: 32 }, (_, i) => entry(`s${i}`)));
      await eventually(async () => (await applied()).length === 32, { timeoutMs: 10_000 });
      expect(batches).toEqual([32]);
    });

    it("ends a delay once the backlog reaches delayUntilBacklog, one batch", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const batches: bigint[][] = [];
      const projector = await project(schema, {
        journal,
        delayMs: 60_000,
        delayUntilBacklog: 3,
        pollIntervalMs: 60_000,
        project: async (batch, trx) => {
          batches.push(batch.map((e) => e.position));
          await apply(batch, trx);
        },
      });
      await journal.append([entry("a")]);
      await journal.append([entry("b")]);
      // Two entries are a small backlog: they wait.
      await new Promise((r) => setTimeout(r, 200));
      expect(projector.position()).toBe(0n);
      await journal.append([entry("c")]);
      await eventually(async () => (await applied()).length === 3, { timeoutMs: 10_000 });
      expect(batches).toEqual([[1n, 2n, 3n]]);
    });

    /** A projection of bodies as text: the database refuses a NUL, and a check refuses `refuse:me`. */
    const textProjection = async (schema: string) => {
      await sql`create table ${sql.id(schema, "texts")} (position bigint primary key, body text not null check (body <> 'refuse:me'))`.execute(
        backend.database.kysely,
      );
      const apply = async (batch: readonly JournalRecord[], trx: Transaction<unknown>) => {
        await sql`insert into ${sql.id(schema, "texts")} (position, body) values ${sql.join(
          batch.map((r) => sql`(${r.position}, ${decode(r)})`),
        )}`.execute(trx);
      };
      const applied = async (): Promise<bigint[]> => {
        const rows = await sql<{ position: bigint }>`
          select position from ${sql.id(schema, "texts")} order by position`.execute(
          backend.other.kysely,
        );
        return rows.rows.map((r) => BigInt(r.position));
      };
      const deadLetters = async () => {
        const rows = await sql<{ position: bigint; stream: string; kind: string; reason: string }>`
          select position, stream, kind, reason from ${sql.id(schema, "journal_dead_letter")}
          order by position`.execute(backend.other.kysely);
        return rows.rows.map((r) => ({ ...r, position: BigInt(r.position) }));
      };
      return { apply, applied, deadLetters };
    };

    it("dead-letters the entries the database refuses in a batch, applies the rest, moves on", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied, deadLetters } = await textProjection(schema);
      const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
      const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
      const provider = new MeterProvider({ readers: [reader] });
      const reported: ProjectorDeadLetter[] = [];
      const substitutes: bigint[] = [];
      const batches: number[] = [];
      // Twelve entries in one append (one batch): a NUL at 3 (SQLSTATE 22021
      // or PGlite's same refusal), a check violation at 8 (23514).
      const bodies = range(12).map((p) =>
        p === 3n ? "bad\u0000text" : p === 8n ? "refuse:me" : `ok ${p}`,
      );
      const projector = await project(schema, {
        name: "poisoned",
        batchSize: 100,
        journal,
        meter: provider.getMeter("test"),
        project: async (batch, trx) => {
          batches.push(batch.length);
          await apply(batch, trx);
        },
        onPoison: async (record, _error, trx) => {
          substitutes.push(record.position);
          await sql`insert into ${sql.id(schema, "texts")} (position, body) values (${record.position}, ${"[unrecordable]"})`.execute(
            trx,
          );
        },
        onDeadLetterEntry: (dead) => reported.push(dead),
      });
      await journal.append(bodies.map((body) => entry("s1", "test.entry", body)));
      await projector.waitFor(12n);
      // Every entry applied once, in order; the refused ones by their substitute.
      expect(await applied()).toEqual(range(12));
      const rows = await sql<{ position: bigint; body: string }>`
        select position, body from ${sql.id(schema, "texts")} where body = '[unrecordable]' order by position`.execute(
        backend.other.kysely,
      );
      expect(rows.rows.map((r) => BigInt(r.position))).toEqual([3n, 8n]);
      expect(substitutes).toEqual([3n, 8n]);
      expect(await deadLetters()).toEqual([
        { position: 3n, stream: "s1", kind: "test.entry", reason: "22021" },
        { position: 8n, stream: "s1", kind: "test.entry", reason: "23514" },
      ]);
      expect(reported.map((d) => [d.position, d.reason])).toEqual([
        [3n, "22021"],
        [8n, "23514"],
      ]);
      // The whole batch first, then halves down to the refused entries: bounded.
      expect(batches[0]).toBe(12);
      expect(batches.length).toBeLessThanOrEqual(2 * 2 * Math.ceil(Math.log2(12)) + 1);
      expect(projector.status()).toMatchObject({
        position: 12n,
        lag: 0n,
        failures: 0,
        deadLetters: 2,
        lastDeadLetter: { position: 8n, reason: "23514" },
      });
      // Counted, and shown by the health check (trellis health) with its cause.
      await provider.forceFlush();
      const counter = exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics[0]?.metrics.find((m) => m.descriptor.name === projectorDeadLetterMetric) as
        | SumMetricData
        | undefined;
      const counted = (counter?.dataPoints ?? [])
        .filter((p) => p.attributes["trellis.projector"] === "poisoned")
        .reduce((sum, p) => sum + (p.value as number), 0);
      expect(counted).toBe(2);
      expect(() =>
        projectorHealth(projector, { deadLetterAlertMs: 60_000 }).check(
          new AbortController().signal,
        ),
      ).toThrow(/dead-lettering \(2 since start; last test.entry at position 8: SQLSTATE 23514/);
      expect(projectorHealth(projector).check(new AbortController().signal)).toMatchObject({
        deadLetters: 2,
      });
      // Later entries are projected as usual.
      await journal.append([entry("s2", "test.entry", "later")]);
      await projector.waitFor(13n);
      expect(await applied()).toEqual(range(13));
      await provider.shutdown();
    });

    it("dead-letters without a substitute the database refuses too, also when read back", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied, deadLetters } = await textProjection(schema);
      await journal.append(
        ["a", "b", "refuse:me", "d", "e"].map((body) => entry("s1", "test.entry", body)),
      );
      // No journal: the batch is read from the table.
      const projector = await project(schema, {
        batchSize: 4,
        project: apply,
        onPoison: async (record, _error, trx) => {
          await sql`insert into ${sql.id(schema, "texts")} (position, body) values (${record.position}, ${"refuse:me"})`.execute(
            trx,
          );
        },
      });
      await projector.waitFor(5n);
      expect(await applied()).toEqual([1n, 2n, 4n, 5n]);
      expect(await deadLetters()).toEqual([
        { position: 3n, stream: "s1", kind: "test.entry", reason: "23514" },
      ]);
      expect(projector.status()).toMatchObject({ position: 5n, deadLetters: 1, readEntries: 5 });
    });

    it("retries a transient failure from its position and dead-letters nothing", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied, deadLetters } = await textProjection(schema);
      let lost = 3;
      const projector = await project(schema, {
        journal,
        project: async (batch, trx) => {
          await apply(batch, trx);
          // What a dropped connection raises (SQLSTATE class 08), after writing.
          if (lost-- > 0) throw Object.assign(new Error("connection lost"), { code: "08006" });
        },
      });
      await journal.append(range(6).map((p) => entry("s1", "test.entry", `ok ${p}`)));
      await eventually(() => expect(projector.status().failures).toBeGreaterThanOrEqual(2));
      await projector.waitFor(6n);
      expect(await applied()).toEqual(range(6));
      expect(await deadLetters()).toEqual([]);
      expect(projector.status()).toMatchObject({ position: 6n, failures: 0, deadLetters: 0 });
    });

    it("reports its lag in status and as an OpenTelemetry gauge", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply } = await projection(schema);
      const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
      const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
      const provider = new MeterProvider({ readers: [reader] });
      let open_ = false;
      const projector = await project(schema, {
        name: "lagging",
        journal,
        batchSize: 2,
        meter: provider.getMeter("test"),
        project: async (batch, trx) => {
          if (!open_) throw new Error("not yet");
          await apply(batch, trx);
        },
      });
      await journal.append(Array.from({ length: 7 }, () => entry("s1")));
      await eventually(() => {
        expect(projector.status().lag).toBe(7n);
        expect(projector.status().failures).toBeGreaterThanOrEqual(2);
        return true;
      });
      const lag = async (): Promise<number | undefined> => {
        await provider.forceFlush();
        const metric = exporter
          .getMetrics()
          .at(-1)
          ?.scopeMetrics[0]?.metrics.find((m) => m.descriptor.name === projectorLagMetric) as
          | GaugeMetricData
          | undefined;
        const point = metric?.dataPoints.find(
          (p) => p.attributes["trellis.projector"] === "lagging",
        );
        return point?.value as number | undefined;
      };
      expect(await lag()).toBe(7);
      // What the service's health check (trellis health) reports meanwhile.
      const health = projectorHealth(projector, { maxLag: 5n, maxFailures: 1_000_000 });
      expect(() => health.check(new AbortController().signal)).toThrow(/lagging 7 entries/);
      const failing = projectorHealth(projector, { maxFailures: 1 });
      expect(() => failing.check(new AbortController().signal)).toThrow(/failing .*not yet/);
      open_ = true;
      await projector.waitFor(7n);
      expect(projector.status()).toMatchObject({ lag: 0n, position: 7n, failures: 0 });
      expect(await lag()).toBe(0);
      expect(health.check(new AbortController().signal)).toMatchObject({ lag: 0n });
      await provider.shutdown();
    });
  });
}
