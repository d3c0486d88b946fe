/**
 * The projector contract: what `createProjector` promises (each entry
 * applied once across failures, restarts and two instances, hand-over
 * without read-back, read-your-writes, wake-ups, batching by delay and
 * backlog, dead letters, lag as status, gauge and health), run by every
 * backend with a two-line spec:
 *
 * @example
 *   import { describeProjectorContract } from "../src/journal/projector.contract.js";
 *   import { pgliteTarget } from "@trellis/storage/contract";
 *   describeProjectorContract("pglite", pgliteTarget);
 *
 * Each test works in a schema of its own, so positions start at 1.
 */
import { isTrellisError } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { sql, type Transaction } from "kysely";
import { describe, expect, it } from "vitest";
import type { StorageContractTarget } from "../storage.contract.js";
import { memoryMeter } from "../testing/memory-meter.js";
import { decode, entry, journalFixture } from "./journal-fixture.contract.js";
import type { JournalRecord } from "./journal-read.js";
import {
  type ProjectorDeadLetter,
  projectorDeadLetterMetric,
  projectorLagMetric,
} from "./projector.js";
import { projectorHealth } from "./projector-health.js";

/** Registers the projector contract suite for one backend. */
export function describeProjectorContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
): void {
  describe(`projector contract: ${name}`, () => {
    const { backend, freshSchema, open, all, projection, project, range } = journalFixture(factory);
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

    it("applies a batch's writes as one statement with its claim, once, with two instances", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { applied, writes } = await projection(schema);
      let transactions = 0;
      const inTransaction = async () => {
        transactions++;
      };
      const p1 = await project(schema, { batchSize: 3, journal, writes, project: inTransaction });
      const p2 = await project(schema, {
        batchSize: 3,
        writes,
        project: inTransaction,
        database: backend.other,
      });
      await Promise.all(Array.from({ length: 40 }, (_, i) => journal.append([entry(`s${i}`)])));
      await p1.waitFor(40n);
      await p2.waitFor(40n);
      // Each entry once (a statement that lost its claim wrote nothing), none by `project`.
      expect(await applied()).toEqual(range(40));
      expect(transactions).toBe(0);
      expect(p1.status().transactionBatches + p2.status().transactionBatches).toBe(0);
      expect(p1.status().statementBatches + p2.status().statementBatches).toBeGreaterThan(0);
    });

    it("runs a batch's first stage of writes before the rest, in its one statement", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      // One running row per stream: a partial unique index, checked row by row.
      await sql`create table ${sql.id(schema, "runs")} (id text primary key, stream text not null, running boolean not null)`.execute(
        backend.database.kysely,
      );
      await sql`create unique index on ${sql.id(schema, "runs")} (stream) where running`.execute(
        backend.database.kysely,
      );
      await sql`insert into ${sql.id(schema, "runs")} values ('r0', 's1', true), ('r9', 's2', true)`.execute(
        backend.database.kysely,
      );
      let transactions = 0;
      const projector = await project(schema, {
        journal,
        // Each entry starts a run of its stream: the stream's running one stops first.
        writes: (batch) => ({
          first: [
            (qc) =>
              qc
                .updateTable("runs")
                .set({ running: false })
                .where("running", "=", true)
                .where(
                  "stream",
                  "in",
                  batch.map((r) => r.stream),
                )
                .returning(sql<number>`1`.as("stopped")),
          ],
          rest: [
            (qc) =>
              qc
                .insertInto("runs")
                .values(batch.map((r) => ({ id: decode(r), stream: r.stream, running: true }))),
          ],
        }),
        project: async () => {
          transactions++;
        },
      });
      await journal.append([entry("s1", "test.entry", "r1"), entry("s2", "test.entry", "r10")]);
      await projector.waitFor(2n);
      const rows = await sql<{ id: string; running: boolean }>`
        select id, running from ${sql.id(schema, "runs")} order by id`.execute(
        backend.other.kysely,
      );
      expect(rows.rows).toEqual([
        { id: "r0", running: false },
        { id: "r1", running: true },
        { id: "r10", running: true },
        { id: "r9", running: false },
      ]);
      expect(transactions).toBe(0);
      expect(projector.status()).toMatchObject({ statementBatches: 1, transactionBatches: 0 });
    });

    it("goes on from another instance's position when its one-statement claim is lost", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { applied, writes } = await projection(schema);
      const errors: string[] = [];
      let transactions = 0;
      // Polls only: the entries below are in the table before it looks.
      const projector = await project(schema, {
        pollIntervalMs: 60_000,
        writes,
        project: async () => {
          transactions++;
        },
        onError: (_error, context) => errors.push(context),
      });
      await journal.append([entry("s1"), entry("s2"), entry("s3")]);
      // Another instance applied 1 and 2 and moved the position past them.
      await sql`insert into ${sql.id(schema, "applied")} (position, stream) values (1, 's1'), (2, 's2')`.execute(
        backend.other.kysely,
      );
      await sql`update ${sql.id(schema, "journal_projection")} set position = 2 where name = 'test'`.execute(
        backend.other.kysely,
      );
      projector.wake();
      await projector.waitFor(3n);
      expect(await applied()).toEqual([1n, 2n, 3n]);
      expect(transactions).toBe(0);
      expect(errors).toEqual([]);
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
      await project(schema, {
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
    });

    /** A projector delaying a minute (no polling), with its journal and the positions of each batch it applied. */
    const delayedProjector = async (options: { delayUntilBacklog?: number } = {}) => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied } = await projection(schema);
      const batches: bigint[][] = [];
      const projector = await project(schema, {
        journal,
        delayMs: 60_000,
        pollIntervalMs: 60_000,
        ...options,
        project: async (batch, trx) => {
          batches.push(batch.map((e) => e.position));
          await apply(batch, trx);
        },
      });
      return { journal, projector, batches, applied };
    };

    it("gathers again after a waiter was served (delayMs)", async () => {
      // Only a waiter makes it apply within the test: the delay is a minute.
      const { journal, projector, batches, applied } = await delayedProjector();
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
      // Nobody waits and the delay is a minute: only the backlog's size applies it.
      const { journal, batches, applied } = await delayedProjector();
      await journal.append(Array.from({ length: 32 }, (_, i) => entry(`s${i}`)));
      await eventually(async () => (await applied()).length === 32, { timeoutMs: 10_000 });
      expect(batches.map((b) => b.length)).toEqual([32]);
    });

    it("refuses a delayUntilBacklog that is not a whole number ≥ 1, typed", async () => {
      const schema = await freshSchema();
      for (const delayUntilBacklog of [0, -1, 1.5, Number.NaN]) {
        const refused = await project(schema, { delayUntilBacklog, project: async () => {} }).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(isTrellisError(refused) && refused.reason).toBe("invalid_request");
      }
    });

    it("ends a delay once the backlog reaches delayUntilBacklog, one batch", async () => {
      const { journal, projector, batches, applied } = await delayedProjector({
        delayUntilBacklog: 3,
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
      const metrics = memoryMeter();
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
        meter: metrics.meter,
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
      expect(
        await metrics.total(projectorDeadLetterMetric, { "trellis.projector": "poisoned" }),
      ).toBe(2);
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
      await metrics.shutdown();
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

    it("applies by `project` a batch `writes` declines or its statement fails for", async () => {
      const schema = await freshSchema();
      const journal = open(schema);
      const { apply, applied, deadLetters } = await textProjection(schema);
      const transactions: bigint[][] = [];
      const projector = await project(schema, {
        journal,
        // Declined: a batch with a `tx` entry.
        writes: (batch) =>
          batch.some((r) => r.stream === "tx")
            ? undefined
            : [
                (qc) =>
                  qc
                    .insertInto("texts")
                    .values(batch.map((r) => ({ position: r.position, body: decode(r) }))),
              ],
        project: async (batch, trx) => {
          transactions.push(batch.map((r) => r.position));
          await apply(batch, trx);
        },
      });
      await journal.append([entry("s1", "test.entry", "a"), entry("s1", "test.entry", "b")]);
      await projector.waitFor(2n);
      await journal.append([entry("tx", "test.entry", "c")]);
      await projector.waitFor(3n);
      // One statement refused (a check): the transaction says which entry, it is dead-lettered.
      await journal.append(["d", "refuse:me", "f"].map((body) => entry("s1", "test.entry", body)));
      await projector.waitFor(6n);
      expect(await applied()).toEqual([1n, 2n, 3n, 4n, 6n]);
      expect(await deadLetters()).toEqual([
        { position: 5n, stream: "s1", kind: "test.entry", reason: "23514" },
      ]);
      expect(transactions[0]).toEqual([3n]);
      expect(transactions[1]).toEqual([4n, 5n, 6n]);
      // [1, 2] and the halves of [4, 5, 6] the database takes ([4], [6]) are statements.
      expect(projector.status()).toMatchObject({ statementBatches: 3, transactionBatches: 1 });
      expect(projector.status()).toMatchObject({ position: 6n, deadLetters: 1, failures: 0 });
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
      const metrics = memoryMeter();
      let open_ = false;
      const projector = await project(schema, {
        name: "lagging",
        journal,
        batchSize: 2,
        meter: metrics.meter,
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
        const points = await metrics.points(projectorLagMetric);
        const point = points.find((p) => p.attributes["trellis.projector"] === "lagging");
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
      await metrics.shutdown();
    });
  });
}
