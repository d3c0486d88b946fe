/**
 * Storage contract, part 3: the outbox relay — publishing, order, retries,
 * dead letters, NOTIFY and rebuilding the log from the outbox.
 */
import type { AppendResult, EventLog } from "@trellis/eventlog";
import { TrellisError } from "@trellis/runtime";
import { eventually, uniqueName } from "@trellis/testkit";
import { type RootOperationNode, sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { Database } from "../database.js";
import { DEAD_LETTER_KIND, type DeadLetter } from "../outbox/dead-letter.js";
import { appendToOutbox, readOutbox } from "../outbox/outbox.js";
import { createOutboxWriter } from "../outbox/outbox-writer.js";
import type { StorageSuite } from "./suite.js";
import {
  event,
  expectPerResourceOrder,
  inTransaction,
  publishedEvents,
  readAll,
  readLog,
  unpublished,
  writeConcurrently,
} from "./support.js";

export function describeRelayContract(suite: StorageSuite): void {
  const { name, newEventLog, outboxSchema, startRelay } = suite;

  describe("outbox: relay", () => {
    /** Without its trigger the outbox sends no NOTIFY: only a kick or the poll wakes the relay. */
    const dropNotifyTrigger = (schema: string) =>
      sql`drop trigger outbox_notify on ${sql.id(schema, "outbox")}`.execute(suite.database.kysely);
    /** Appends `count` events in one transaction, alternating between two tasks. */
    const appendAlternating = (schema: string, workspaceId: string, count: number) =>
      inTransaction(suite.database, (trx) =>
        appendToOutbox(
          trx,
          schema,
          Array.from({ length: count }, (_, i) => event(workspaceId, `task_${i % 2}`)),
        ),
      );

    it("publishes every event once, per resource in sequence order, while writers run", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const relay = startRelay(log, schema, { batchSize: 16 });
      const workspaceId = uniqueName("ws");
      await writeConcurrently(suite.database, schema, relay, workspaceId, 30, 4);
      const published = await publishedEvents(log, workspaceId, 150);
      expect(published).toHaveLength(150);
      expectPerResourceOrder(published);
      const stored = await readAll(suite.database, schema);
      expect(new Set(published.map((e) => e.id))).toEqual(new Set(stored.map((s) => s.event.id)));
      await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
        what: "rows marked published",
      });
      await relay.stop();
    });

    it("wakes up on commit (NOTIFY) without a kick or a poll", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const relay = startRelay(log, schema, { pollIntervalMs: 60_000 });
      await eventually(() => relay.active, { what: "relay active" });
      // Let its first round find nothing and go to sleep.
      await new Promise((r) => setTimeout(r, 300));
      const workspaceId = uniqueName("ws");
      const started = performance.now();
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_n")]),
      );
      await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
        timeoutMs: 3000,
        what: "event published after NOTIFY",
      });
      console.info(
        `[storage contract ${name}] commit → published via NOTIFY: ${(performance.now() - started).toFixed(1)} ms`,
      );
      await relay.stop();
    });

    it("NOTIFYs the highest position a statement inserted", async () => {
      const schema = await outboxSchema();
      const payloads: string[] = [];
      const unlisten = await suite.database.listen(`trellis_outbox_${schema}`, (payload) =>
        payloads.push(payload),
      );
      const workspaceId = uniqueName("ws");
      const appended = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_a"), event(workspaceId, "task_b")]),
      );
      await eventually(() => payloads.length === 1, { what: "notification" });
      const rows = await readOutbox(suite.database, schema, { limit: 100 });
      const positions = rows
        .filter((row) => appended.some((e) => e.id === row.event.id))
        .map((row) => row.position);
      expect(positions).toHaveLength(2);
      expect(payloads).toEqual([String(positions.reduce((a, b) => (a > b ? a : b)))]);
      await unlisten();
    });

    it("one round per commit when the writer kicks and the outbox NOTIFYs", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      // Count the relay's reads of unpublished rows: one per round.
      let rounds = 0;
      const counting = watchingQueries(suite.database, (node) => {
        if (node.kind === "SelectQueryNode") rounds++;
      });
      const relay = startRelay(log, schema, { pollIntervalMs: 60_000 }, counting);
      await eventually(() => relay.active && rounds >= 1, { what: "relay's first round" });
      const notified: string[] = [];
      const unlisten = await suite.database.listen(`trellis_outbox_${schema}`, (p) =>
        notified.push(p),
      );
      const writer = createOutboxWriter({ schema, relay });
      for (let commit = 1; commit <= 5; commit++) {
        const workspaceId = uniqueName("ws");
        const before = rounds;
        await writer.transaction(suite.database.kysely, async (unit) => {
          unit.add([event(workspaceId, "task_x"), event(workspaceId, "task_y")]);
        });
        await eventually(async () => (await readLog(log, workspaceId)).length === 2, {
          what: "events published",
        });
        await eventually(() => notified.length === commit, { what: "the commit's NOTIFY" });
        // The kick handed the committed rows over: they go out without a
        // read (session 14; before: one read per commit, and before session
        // 11 two). A NOTIFY that outruns the kick still costs one read.
        await new Promise((r) => setTimeout(r, 200));
        expect(rounds - before).toBeLessThanOrEqual(1);
      }
      await unlisten();
      await relay.stop();
    });

    it("publishes handed-over rows without reading them, marks them in bulk", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      let reads = 0;
      let writes = 0;
      const counting = watchingQueries(suite.database, (node) => {
        if (node.kind === "SelectQueryNode") reads++;
        else if (JSON.stringify(node).includes("published_at")) writes++;
      });
      // No NOTIFY: only the kick (with its rows) and the poll wake it.
      await dropNotifyTrigger(schema);
      const relay = startRelay(log, schema, { pollIntervalMs: 60_000 }, counting);
      await eventually(() => relay.active && reads >= 1, { what: "relay's first round" });
      const readsBefore = reads;
      const writesBefore = writes;
      const writer = createOutboxWriter({ schema, relay });
      const workspaceId = uniqueName("ws");
      for (let commit = 0; commit < 10; commit++) {
        await writer.transaction(suite.database.kysely, async (unit) => {
          unit.add([event(workspaceId, "task_h"), event(workspaceId, `task_${commit}`)]);
        });
      }
      await eventually(async () => (await readLog(log, workspaceId)).length === 20, {
        what: "events published",
      });
      expect(reads - readsBefore).toBe(0);
      await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
        timeoutMs: 3000,
        what: "rows marked published",
      });
      // Ten commits, marked in one or two statements (once a second).
      expect(writes - writesBefore).toBeLessThanOrEqual(2);
      expect(reads - readsBefore).toBe(0);
      expectPerResourceOrder(await readLog(log, workspaceId));
      await relay.stop();
    });

    it("reads the outbox when a handed row's resource has an earlier row nobody handed over", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      await dropNotifyTrigger(schema);
      const relay = startRelay(log, schema, { pollIntervalMs: 60_000 });
      await eventually(() => relay.active, { what: "relay active" });
      await new Promise((r) => setTimeout(r, 200));
      const workspaceId = uniqueName("ws");
      // Another replica's commit: no kick, and its NOTIFY has not arrived.
      const foreign = await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_r"), event(workspaceId, "task_r")]),
      );
      const writer = createOutboxWriter({ schema, relay });
      const own = await writer.transaction(suite.database.kysely, async (unit) => {
        const mine = [event(workspaceId, "task_r")];
        unit.add(mine, { adopt: true });
        return mine;
      });
      // The log refused the handed row (sequence 3 before 1 and 2): the
      // relay read the outbox and published all three in order.
      await eventually(async () => (await readLog(log, workspaceId)).length === 3, {
        timeoutMs: 3000,
        what: "all three published",
      });
      const published = await readLog(log, workspaceId);
      expect(published.map((e) => e.id)).toEqual([...foreign.map((e) => e.id), own[0]?.id]);
      expectPerResourceOrder(published);
      await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
        timeoutMs: 3000,
        what: "rows marked published",
      });
      await relay.stop();
    });

    it("wakes up on kick() when no notification arrives", async () => {
      const schema = await outboxSchema();
      // Without the trigger no NOTIFY is sent: only kick() or the poll can wake it.
      await dropNotifyTrigger(schema);
      const log = await newEventLog();
      const relay = startRelay(log, schema, { pollIntervalMs: 60_000 });
      await eventually(() => relay.active, { what: "relay active" });
      await new Promise((r) => setTimeout(r, 300));
      const workspaceId = uniqueName("ws");
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_k")]),
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(await readLog(log, workspaceId)).toHaveLength(0);
      relay.kick();
      await eventually(async () => (await readLog(log, workspaceId)).length === 1, {
        timeoutMs: 3000,
        what: "event published after kick",
      });
      await relay.stop();
    });

    it("re-publishes after a crash between publish and mark; the log stores it once", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const results: AppendResult[][] = [];
      let crashes = 0;
      const crashingOnce: Pick<EventLog, "append"> = {
        async append(events) {
          const result = await log.append(events);
          results.push(result);
          if (crashes++ === 0) throw new Error("crashed after publishing, before marking");
          return result;
        },
      };
      const errors: unknown[] = [];
      const workspaceId = uniqueName("ws");
      const appended = await appendAlternating(schema, workspaceId, 6);
      const relay = startRelay(crashingOnce, schema, { onError: (e) => errors.push(e) });
      await eventually(async () => (await unpublished(suite.database, schema)) === 0, {
        what: "rows marked published",
      });
      await relay.stop();
      expect(errors).toHaveLength(1);
      // The second attempt re-sent the same ids and the log recognised them.
      expect(results[1]?.map((r) => r.duplicate)).toEqual(appended.map(() => true));
      const published = await readLog(log, workspaceId);
      expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
      expectPerResourceOrder(published);
    });

    it("logRebuiltFromOutbox: publishes every event in order and marks them published", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const relay = startRelay(log, schema, {
        batchSize: 16,
        logRebuiltFromOutbox: true,
        listen: false,
      });
      const workspaceId = uniqueName("ws");
      await writeConcurrently(suite.database, schema, relay, workspaceId, 20, 3);
      const published = await publishedEvents(log, workspaceId, 100);
      expect(published).toHaveLength(100);
      expectPerResourceOrder(published);
      // Rows handed to the log are marked published by the time the relay stops.
      await relay.stop();
      expect(await unpublished(suite.database, schema)).toBe(0);
    });

    it("logRebuiltFromOutbox: an append that fails is retried with the same events first", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      let failures = 0;
      const failingOnce: Pick<EventLog, "append"> = {
        async append(events) {
          if (failures++ === 0) throw new Error("the log is down");
          return log.append(events);
        },
      };
      const errors: unknown[] = [];
      const workspaceId = uniqueName("ws");
      const appended = await appendAlternating(schema, workspaceId, 4);
      const relay = startRelay(failingOnce, schema, {
        logRebuiltFromOutbox: true,
        onError: (e) => errors.push(e),
      });
      await eventually(async () => (await readLog(log, workspaceId)).length === 4, {
        what: "published after the retry",
      });
      await relay.stop();
      expect(errors).toHaveLength(1);
      const published = await readLog(log, workspaceId);
      expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
      expectPerResourceOrder(published);
    });

    for (const logRebuiltFromOutbox of [false, true]) {
      it(`dead-letters an event the log refuses for good and goes on at once (logRebuiltFromOutbox: ${logRebuiltFromOutbox})`, async () => {
        const schema = await outboxSchema();
        const log = await newEventLog();
        // A log that refuses one kind for good, as JetStream refuses a
        // message over its max payload.
        const refusing: Pick<EventLog, "append"> = {
          async append(events) {
            if (events.some((e) => e.kind === "test.poison")) {
              throw new TrellisError({
                reason: "payload_too_large",
                message: "the event exceeds the log's largest message",
              });
            }
            return log.append(events);
          },
        };
        const errors: unknown[] = [];
        const dead: DeadLetter[] = [];
        // A retry would wait a minute: the events after the poison arriving
        // at all shows the relay never went into retry.
        const relay = startRelay(refusing, schema, {
          logRebuiltFromOutbox,
          retryDelayMs: 60_000,
          onError: (e) => errors.push(e),
          onDeadLetter: (d) => dead.push(d),
        });
        const workspaceId = uniqueName("ws");
        const poison = { ...event(workspaceId, "task_p"), kind: "test.poison" };
        const appended = await inTransaction(suite.database, (trx) =>
          appendToOutbox(trx, schema, [
            event(workspaceId, "task_p"),
            poison,
            event(workspaceId, "task_p"),
            event(workspaceId, "task_q"),
          ]),
        );
        relay.kick();
        const published = await eventually(
          async () => {
            const events = await readLog(log, workspaceId);
            return events.length === 4 ? events : undefined;
          },
          { what: "the events after the poison published", timeoutMs: 10_000 },
        );
        await relay.stop();
        expect(errors).toEqual([]);
        expect(published.map((e) => e.id)).toEqual(appended.map((e) => e.id));
        const standIn = published[1];
        expect(standIn?.kind).toBe(DEAD_LETTER_KIND);
        expect(standIn?.sequence).toBe(2n);
        expect(standIn?.payload?.kind.case).toBe("data");
        expect(standIn?.payload?.kind.value).toMatchObject({
          original_kind: "test.poison",
          reason: "payload_too_large",
        });
        expect(published[2]?.sequence).toBe(3n);
        expectPerResourceOrder(published);
        expect(dead).toHaveLength(1);
        expect(dead[0]).toMatchObject({ eventId: appended[1]?.id, kind: "test.poison" });
        expect(await unpublished(suite.database, schema)).toBe(0);
      });
    }

    it("keeps one active relay per schema; a standby takes over when it stops", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const other = await suite.target.open();
      const a = startRelay(log, schema);
      const b = startRelay(log, schema, {}, other);
      await eventually(() => a.active || b.active, { what: "a relay active" });
      for (let i = 0; i < 20; i++) {
        expect(Number(a.active) + Number(b.active)).toBe(1);
        await new Promise((r) => setTimeout(r, 10));
      }
      const [leader, standby] = a.active ? [a, b] : [b, a];
      await leader.stop();
      await eventually(() => standby.active, { what: "standby took over" });
      const workspaceId = uniqueName("ws");
      await inTransaction(suite.database, (trx) =>
        appendToOutbox(trx, schema, [event(workspaceId, "task_t"), event(workspaceId, "task_t")]),
      );
      await eventually(async () => (await readLog(log, workspaceId)).length === 2, {
        what: "published by the new leader",
      });
      await standby.stop();
    });

    it("resumes where it stopped: events committed while no relay ran go out in order", async () => {
      const schema = await outboxSchema();
      const log = await newEventLog();
      const workspaceId = uniqueName("ws");
      const batch = () =>
        inTransaction(suite.database, (trx) =>
          appendToOutbox(
            trx,
            schema,
            Array.from({ length: 10 }, (_, i) => event(workspaceId, `task_${i % 3}`)),
          ),
        );
      await batch();
      const first = startRelay(log, schema);
      await eventually(async () => (await readLog(log, workspaceId)).length === 10, {
        what: "first batch",
      });
      await first.stop();
      await batch();
      await batch();
      startRelay(log, schema);
      const published = await eventually(async () => {
        const events = await readLog(log, workspaceId);
        return events.length === 30 ? events : undefined;
      });
      expectPerResourceOrder(published);
    });
  });
}

/** `database`, showing `seen` every query sent through it (to count the relay's reads and writes). */
function watchingQueries(database: Database, seen: (node: RootOperationNode) => void): Database {
  return {
    kind: database.kind,
    kysely: database.kysely.withPlugin({
      transformQuery: (args) => {
        seen(args.node);
        return args.node;
      },
      transformResult: async (args) => args.result,
    }),
    ping: (o) => database.ping(o),
    acquireLock: (n, o) => database.acquireLock(n, o),
    listen: (c, f) => database.listen(c, f),
    close: () => database.close(),
  };
}
