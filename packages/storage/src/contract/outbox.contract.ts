/**
 * Storage contract, part 2: the outbox tables — the unit of work
 * (createOutboxWriter), appendToOutbox, readOutbox and pruneOutbox.
 */
import { clone, create, equals, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { type Event, EventPayloadSchema, EventSchema } from "@trellis/contracts/core";
import { type LoggedEvent, MAX_EVENT_BYTES } from "@trellis/eventlog";
import { isTrellisError } from "@trellis/runtime";
import { uniqueName } from "@trellis/testkit";
import { type Kysely, sql, type Transaction } from "kysely";
import { describe, expect, it } from "vitest";
import {
  appendToOutbox,
  appendToOutboxLogged,
  type OutboxEntry,
  outboxTables,
  pruneOutbox,
  readOutbox,
  sequenceOutboxEvents,
} from "../outbox/outbox.js";
import { createOutboxWriter } from "../outbox/outbox-writer.js";
import type { StorageSuite } from "./suite.js";
import { event, expectChained, insertFolded, inTransaction, readAll } from "./support.js";

export function describeOutboxContract(suite: StorageSuite): void {
  const { name, outboxSchema } = suite;

  describe("outbox: unit of work (createOutboxWriter)", () => {
    it("appends at commit, folds into the caller's statement, hands over exactly the committed rows", async () => {
      const schema = await outboxSchema();
      const handed: (readonly LoggedEvent[] | undefined)[] = [];
      const writer = createOutboxWriter({ schema, relay: { kick: (rows) => handed.push(rows) } });
      await writer.transaction(suite.database.kysely, async (unit) => {
        unit.add([event("ws_1", "task_u"), event("ws_1", "task_v")]);
        const fold = await unit.fold();
        if (!fold) throw new Error("nothing folded");
        await insertFolded(unit.trx, fold);
        unit.add([event("ws_1", "task_u")]);
      });
      // A rollback appends nothing and hands nothing over.
      await expect(
        writer.transaction(suite.database.kysely, async (unit) => {
          unit.add([event("ws_1", "task_w")]);
          throw new Error("roll back");
        }),
      ).rejects.toThrow("roll back");
      const stored = await readAll(suite.database, schema);
      expect(stored.map((s) => s.event.sequence)).toEqual([1n, 1n, 2n]);
      expect(handed).toHaveLength(1);
      expect(handed[0]?.map((e) => [e.position, e.event.id])).toEqual(
        stored.map((s) => [s.position, s.event.id]),
      );
      handed[0]?.forEach((e, i) => {
        expect(equals(EventSchema, e.event, stored[i]?.event as Event)).toBe(true);
      });
    });
  });

  describe("outbox: fresh resources in one statement (OutboxWriter.fresh)", () => {
    it("sequences without asking, inserts in the caller's statement, refuses a resource with events", async () => {
      const schema = await outboxSchema();
      const handed: (readonly LoggedEvent[] | undefined)[] = [];
      const writer = createOutboxWriter({ schema, relay: { kick: (rows) => handed.push(rows) } });
      const run = async (events: Event[], when?: boolean) => {
        const fold = writer.fresh(events);
        const result = await sql<{ positions: unknown }>`
          with ${fold.ctes("mine", when === undefined ? undefined : sql`${when}::boolean`)}
          select ${sql.raw(fold.positions("mine"))} as positions`.execute(suite.database.kysely);
        return { fold, positions: result.rows[0]?.positions };
      };
      const input = [event("ws_1", "rcpt_a"), event("ws_1", "rcpt_b"), event("ws_1", "rcpt_a")];
      const { fold, positions } = await run(input);
      expect(fold.size).toBe(3);
      fold.committed(positions);
      const stored = await readAll(suite.database, schema);
      expect(stored.map((s) => [s.event.resource?.id, s.event.sequence])).toEqual([
        ["rcpt_a", 1n],
        ["rcpt_b", 1n],
        ["rcpt_a", 2n],
      ]);
      expect(stored[2]?.event.previousEventId).toBe(stored[0]?.event.id);
      expect(input[0]?.sequence).toBe(0n); // copied, not adopted
      expect(handed[0]?.map((e) => [e.position, e.event.id])).toEqual(
        stored.map((s) => [s.position, s.event.id]),
      );
      // The counters continue where the statement left them.
      const [next] = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "rcpt_a")]),
      );
      expect(next?.sequence).toBe(3n);
      expect(next?.previousEventId).toBe(stored[2]?.event.id);
      // Gated off: nothing written.
      await run([event("ws_1", "rcpt_c")], false);
      expect(await readAll(suite.database, schema)).toHaveLength(4);
      // Not fresh after all: the statement fails, nothing written.
      const error = await run([event("ws_1", "rcpt_d"), event("ws_1", "rcpt_b")]).catch(
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: "23505" });
      expect(await readAll(suite.database, schema)).toHaveLength(4);
    });
  });

  describe("outbox: appendToOutbox", () => {
    it("assigns per-resource sequence and previous_event_id, fills id and created_at", async () => {
      const schema = await outboxSchema();
      const input = [
        event("ws_1", "task_a"),
        event("ws_1", "task_b"),
        event("ws_1", "task_a", { id: "evt_given" }),
      ];
      const first = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, input),
      );
      expect(first.map((e) => e.sequence)).toEqual([1n, 1n, 2n]);
      expect(first.map((e) => e.previousEventId)).toEqual(["", "", first[0]?.id]);
      expect(first[0]?.id).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(first[2]?.id).toBe("evt_given");
      expect(first.every((e) => e.createdAt !== undefined)).toBe(true);
      // The caller's objects are left alone.
      expect(input[0]?.sequence).toBe(0n);
      expect(input[0]?.id).toBe("");

      const [next] = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_a")]),
      );
      expect(next?.sequence).toBe(3n);
      expect(next?.previousEventId).toBe("evt_given");

      const stored = await readAll(suite.database, schema);
      expect(stored.map((s) => s.event.id)).toEqual([...first, next].map((e) => e?.id));
      stored.forEach((s, i) => {
        expect(equals(EventSchema, s.event, [...first, next][i] as Event)).toBe(true);
        expect(s.publishedAt).toBeNull();
      });
      expect(await inTransaction(suite.database, (trx) => appendToOutbox(trx, schema, []))).toEqual(
        [],
      );
    });

    it("sequenceOutboxEvents: the caller inserts the rows in its own statement", async () => {
      const schema = await outboxSchema();
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_s")]),
      );
      const sequenced = await inTransaction(suite.database, async (trx) => {
        const { events, rows } = await sequenceOutboxEvents(trx, schema, [
          event("ws_1", "task_s"),
          event("ws_1", "task_t"),
        ]);
        expect(rows.map((r) => [r.resource_id, r.sequence])).toEqual([
          ["task_s", 2n],
          ["task_t", 1n],
        ]);
        // One statement of the caller's: here a data-modifying CTE.
        await trx
          .with("new_outbox", (q) =>
            outboxTables(q as Kysely<unknown>, schema)
              .insertInto("outbox")
              .values(rows)
              .returning("position"),
          )
          .selectFrom("new_outbox")
          .selectAll()
          .execute();
        return events;
      });
      // A rolled-back sequencing uses up nothing.
      await expect(
        inTransaction(suite.database, async (trx) => {
          await sequenceOutboxEvents(trx, schema, [event("ws_1", "task_s")]);
          throw new Error("rolled back");
        }),
      ).rejects.toThrow("rolled back");
      const [after] = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_s")]),
      );
      expect(after?.sequence).toBe(3n);
      const stored = await readAll(suite.database, schema);
      expect(stored.map((s) => s.event.id).slice(1, 3)).toEqual(sequenced.map((e) => e.id));
      expect(stored.map((s) => [s.event.resource?.id, s.event.sequence])).toEqual([
        ["task_s", 1n],
        ["task_s", 2n],
        ["task_t", 1n],
        ["task_s", 3n],
      ]);
      expectChained(stored.filter((s) => s.event.resource?.id === "task_s").map((s) => s.event));
      await expect(
        suite.database.kysely
          .connection()
          .execute((c) => sequenceOutboxEvents(c as unknown as Transaction<unknown>, schema, [])),
      ).rejects.toMatchObject({ reason: "invalid_request" });
    });

    it("appendToOutboxLogged: events given encoded store that encoding plus their sequence", async () => {
      const schema = await outboxSchema();
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_e")]),
      );
      const given = [
        event("ws_1", "task_e", { id: "evt_enc_1" }),
        event("ws_1", "task_e", { id: "evt_enc_2" }),
        // No id: completed here, so its encoding is not used (nor wrong).
        event("ws_1", "task_f"),
      ];
      for (const e of given) e.createdAt = timestampNow();
      // Deliberately different from the event: proves which one was stored.
      const stale = clone(EventSchema, given[1] as Event);
      stale.kind = "test.encoded";
      const encoded = new Map(
        given.map((e, i) => [e, toBinary(EventSchema, i === 1 ? stale : e)] as const),
      );
      const logged = await inTransaction(suite.database, (trx) =>
        appendToOutboxLogged(trx, schema, given, { adopt: true, encoded }),
      );
      expect(logged.map((l) => l.event.sequence)).toEqual([2n, 3n, 1n]);
      const [first, ...stored] = await readAll(suite.database, schema);
      expect(stored.map((s) => s.event.kind)).toEqual([
        "test.happened",
        "test.encoded",
        "test.happened",
      ]);
      // Parsed back, the rows are the sequenced events (ids, chain, times).
      expect(equals(EventSchema, stored[0]?.event as Event, given[0] as Event)).toBe(true);
      expect(stored[1]?.event).toMatchObject({
        id: "evt_enc_2",
        sequence: 3n,
        previousEventId: "evt_enc_1",
      });
      expect(equals(EventSchema, stored[2]?.event as Event, given[2] as Event)).toBe(true);
      expect(stored[0]?.event.previousEventId).toBe(first?.event.id);
    });

    it("stays gap-free per resource under concurrent transactions (20 tx × 10 events)", async () => {
      const schema = await outboxSchema();
      const started = performance.now();
      await Promise.all(
        Array.from({ length: 20 }, () =>
          inTransaction(suite.database, (trx) =>
            appendToOutbox(
              trx,
              schema,
              Array.from({ length: 10 }, () => event("ws_1", "task_hot")),
            ),
          ),
        ),
      );
      const ms = performance.now() - started;
      const stored = await readAll(suite.database, schema);
      expect(stored.map((s) => s.event.sequence)).toEqual(
        Array.from({ length: 200 }, (_, i) => BigInt(i + 1)),
      );
      expectChained(stored.map((s) => s.event));
      console.info(
        `[storage contract ${name}] 200 events in 20 concurrent tx on one resource: ${ms.toFixed(0)} ms`,
      );
    });

    it("appends batches larger than one statement can carry", async () => {
      const schema = await outboxSchema();
      // 2 500 events over 1 250 resources: several statements of each kind.
      const events = Array.from({ length: 2500 }, (_, i) => event("ws_1", `task_${i % 1250}`));
      const appended = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, events),
      );
      expect(appended.map((e) => e.sequence)).toEqual(events.map((_, i) => (i < 1250 ? 1n : 2n)));
      expect(appended[1250]?.previousEventId).toBe(appended[0]?.id);
      expect(await readAll(suite.database, schema)).toHaveLength(2500);
    });

    it("leaves no event and uses up no sequence when the transaction rolls back", async () => {
      const schema = await outboxSchema();
      await suite.database.kysely
        .transaction()
        .execute(async (trx) => {
          await appendToOutbox(trx, schema, [event("ws_1", "task_r"), event("ws_1", "task_r")]);
          throw new Error("roll back");
        })
        .catch(() => {});
      expect(await readAll(suite.database, schema)).toEqual([]);
      const [e] = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_r")]),
      );
      expect(e?.sequence).toBe(1n);
      expect(e?.previousEventId).toBe("");
    });

    it("refuses an event larger than the event log takes, writing nothing", async () => {
      const schema = await outboxSchema();
      const workspaceId = uniqueName("ws");
      const huge = event(workspaceId, "task_big");
      huge.payload = create(EventPayloadSchema, {
        kind: { case: "data", value: { text: "x".repeat(MAX_EVENT_BYTES) } },
      });
      const error = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_big"), huge]),
      ).catch((e: unknown) => e);
      expect(isTrellisError(error) && error.reason, String(error)).toBe("payload_too_large");
      expect(await readAll(suite.database, schema)).toEqual([]);
    });

    it("rejects events it cannot place, and calls outside a transaction", async () => {
      const schema = await outboxSchema();
      const attempts: Event[][] = [
        [create(EventSchema, { kind: "no.resource", workspaceId: "ws_1" })],
        [event("ws_1", "task_x", { sequence: 5n })],
        [event("ws_1", "task_x", { previousEventId: "evt_0" })],
        [
          event("ws_1", "task_x", { id: "evt_twice" }),
          event("ws_1", "task_y", { id: "evt_twice" }),
        ],
      ];
      for (const events of attempts) {
        const error = await inTransaction(suite.database, (trx) =>
          appendToOutbox(trx, schema, events),
        ).catch((e: unknown) => e);
        expect(error).toMatchObject({ reason: "invalid_request", param: "events" });
      }
      const outside = await appendToOutbox(
        suite.database.kysely as unknown as Transaction<unknown>,
        schema,
        [event("ws_1", "task_x")],
      ).catch((e: unknown) => e);
      expect(outside).toMatchObject({ reason: "invalid_request", param: "trx" });
      // An id stored before fails the insert, so the whole transaction.
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_x", { id: "evt_once" })]),
      );
      await expect(
        inTransaction(suite.database, (trx) =>
          appendToOutbox(trx, schema, [event("ws_1", "task_z", { id: "evt_once" })]),
        ),
      ).rejects.toThrow();
      expect((await readAll(suite.database, schema)).map((s) => s.event.id)).toEqual(["evt_once"]);
    });
  });

  describe("outbox: readOutbox and pruneOutbox", () => {
    it("pages through the outbox in position order", async () => {
      const schema = await outboxSchema();
      for (let i = 0; i < 5; i++) {
        await inTransaction(suite.database, (trx) =>
          appendToOutbox(
            trx,
            schema,
            Array.from({ length: 5 }, (_, j) => event("ws_1", `task_${j % 3}`)),
          ),
        );
      }
      const pages: OutboxEntry[][] = [];
      let after: bigint | undefined;
      for (;;) {
        const page = await readOutbox(suite.database, schema, {
          limit: 10,
          ...(after === undefined ? {} : { afterPosition: after }),
        });
        if (page.length === 0) break;
        pages.push(page);
        after = page[page.length - 1]?.position;
      }
      expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
      const positions = pages.flat().map((e) => e.position);
      expect([...positions].sort((a, b) => (a < b ? -1 : 1))).toEqual(positions);
      expect(new Set(positions).size).toBe(25);
      expect(
        await readOutbox(suite.database, schema, { limit: 100, unpublishedOnly: true }),
      ).toHaveLength(25);
    });

    it("prunes only published rows older than the cut-off; sequences continue", async () => {
      const schema = await outboxSchema();
      const events = await inTransaction(suite.database, (trx) =>
        appendToOutbox(
          trx,
          schema,
          Array.from({ length: 5 }, () => event("ws_1", "task_p")),
        ),
      );
      const tables = outboxTables(suite.database.kysely, schema);
      // Three published two hours ago, one just now, one still pending.
      await tables
        .updateTable("outbox")
        .set({ published_at: sql<Date>`now() - interval '2 hours'` })
        .where("sequence", "<=", 3n)
        .execute();
      await tables
        .updateTable("outbox")
        .set({ published_at: sql<Date>`now()` })
        .where("sequence", "=", 4n)
        .execute();
      const deleted = await pruneOutbox(suite.database, schema, {
        olderThanMs: 60 * 60 * 1000,
        batchSize: 2,
      });
      expect(deleted).toBe(3);
      expect((await readAll(suite.database, schema)).map((s) => s.event.sequence)).toEqual([
        4n,
        5n,
      ]);
      const [next] = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event("ws_1", "task_p")]),
      );
      expect(next?.sequence).toBe(6n);
      expect(next?.previousEventId).toBe(events[4]?.id);
    });
  });
}
