// The consumer's batches on a real database (PGlite): a batch issues exactly
// what handling its events one at a time issues (byte for byte), repeats
// inside a batch and redeliveries issue nothing twice, and two issuers with
// their own remembered chain heads keep one gap-free chain.

import { clone, create } from "@bufbuild/protobuf";
import { ActorKind, type Event, EventSchema } from "@trellis/contracts/core";
import { InProcessEventLog } from "@trellis/eventlog";
import type { Database } from "@trellis/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Delivery, ReceiptProcessor } from "../src/processor.js";
import type { PostgresReceiptStore } from "../src/store/receipt-store.js";
import { logTaskHistory, type TaskHistory } from "../src/task-history.js";
import { everyAgentKnown, keyRingOf, newKey } from "../src/testing/receipt-helpers.js";
import {
  migrateReceipts,
  openPGliteDatabase,
  receiptStoreOn,
} from "../src/testing/receipts-database.js";
import { testProcessor } from "../src/testing/test-processor.js";
import { receiptSchemaValidator, taskEvents } from "./support.js";

const keys = keyRingOf(newKey("key_batch"));
const directory = everyAgentKnown("scripted");

/** Events of several tasks, in one log order, with positions 1…n and sequences per task. */
function logOf(tasks: { taskId: string; workspaceId: string; withTool?: boolean }[]): Delivery[] {
  const perTask = tasks.map((t) =>
    taskEvents({ ...t, sequenced: true, withModel: true, final: "COMPLETED" }),
  );
  // Interleave the tasks' events, as concurrent tasks appear in the log.
  const log: Event[] = [];
  for (let i = 0; perTask.some((events) => i < events.length); i++) {
    for (const events of perTask) if (events[i]) log.push(events[i] as Event);
  }
  return log.map((event, i) => ({ event, position: BigInt(i + 1), deliveryCount: 1 }));
}

/** A replay task's events: a plain task with `replay.started` (source `sourceTaskId`) after its submission. */
function replayTaskEvents(taskId: string, sourceTaskId: string, workspaceId: string): Event[] {
  const base = taskEvents({ taskId, workspaceId, sequenced: true });
  const submitted = base[0] as Event;
  const started = create(EventSchema, {
    kind: "replay.started",
    resource: { object: "task", id: taskId },
    workspaceId,
    sessionId: submitted.sessionId,
    taskId,
    ...(submitted.createdAt ? { createdAt: submitted.createdAt } : {}),
    actor: { id: "agent_echo", kind: ActorKind.AGENT },
    payload: {
      kind: {
        case: "data",
        value: {
          source_task_id: sourceTaskId,
          replay_task_id: taskId,
          mode: "exact",
          strategy: "rerun",
          checkpoint_id: null,
          checkpoint_event_id: null,
          overrides: [],
        },
      },
    },
  });
  return [base[0] as Event, started, ...base.slice(1)].map((event, i) =>
    create(EventSchema, { ...event, id: `evt_${taskId}_${i + 1}`, sequence: BigInt(i + 1) }),
  );
}

interface Harness {
  db: Database<unknown>;
  store: PostgresReceiptStore;
  /** Another store on the same tables, as another replica would have. */
  newStore(): PostgresReceiptStore;
  processor(options?: {
    exclusive?: boolean;
    store?: PostgresReceiptStore;
    history?: TaskHistory;
  }): ReceiptProcessor;
  rows(
    workspace: string,
  ): Promise<{ chain_index: bigint; receipt_hash: string; document: string }[]>;
}

/** The receipts tables in their own schema of a shared database. */
async function harness(db: Database<unknown>, schema: string): Promise<Harness> {
  await migrateReceipts(db, schema);
  const newStore = () => receiptStoreOn(db, schema);
  const store = newStore();
  return {
    db,
    store,
    newStore,
    processor(options = {}) {
      // Deterministic clock and ids, so runs can be compared byte for byte.
      let n = 0;
      return testProcessor({
        store: options.store ?? store,
        keys,
        directory,
        now: () => new Date("2026-11-22T12:00:00Z"),
        newReceiptId: () => `rcpt_${String(++n).padStart(4, "0")}`,
        ...(options.exclusive ? { exclusive: true } : {}),
        ...(options.history ? { history: options.history } : {}),
      });
    },
    async rows(workspace) {
      return (await db.kysely
        .withSchema(schema)
        .selectFrom("receipts" as never)
        .select(["chain_index", "receipt_hash", "document"] as never)
        .where("workspace_id" as never, "=", workspace as never)
        .orderBy("chain_index" as never)
        .execute()) as { chain_index: bigint; receipt_hash: string; document: string }[];
    },
  };
}

function expectGapFree(rows: { chain_index: bigint; receipt_hash: string; document: string }[]) {
  rows.forEach((row, k) => {
    expect(Number(row.chain_index)).toBe(k + 1);
    const doc = JSON.parse(row.document);
    expect(doc.chain.previous_receipt_hash).toBe(k === 0 ? null : rows[k - 1]?.receipt_hash);
    expect(receiptSchemaValidator()(doc)).toEqual([]);
  });
}

describe("receipts in batches", () => {
  let db: Database<unknown>;
  let close: () => Promise<void>;
  let one: Harness;
  let batched: Harness;
  let exclusive: Harness;

  beforeAll(async () => {
    ({ db, close } = await openPGliteDatabase());
    one = await harness(db, "receipts_one");
    batched = await harness(db, "receipts_batched");
    exclusive = await harness(db, "receipts_exclusive");
  });

  afterAll(async () => {
    await close?.();
  });

  it("issues byte for byte what one event at a time issues", async () => {
    const tasks = Array.from({ length: 12 }, (_, i) => ({
      taskId: `task_b${i}`,
      workspaceId: i % 3 === 0 ? "ws_b2" : "ws_b1",
      withTool: i % 2 === 0,
    }));
    const log = logOf(tasks);

    const single = one.processor();
    for (const delivery of log) {
      expect(await single.handle(delivery, 1)).toEqual({ ack: true });
    }
    // Batches of uneven sizes, cutting tasks anywhere.
    for (const [harnessed, processor] of [
      [batched, batched.processor()],
      [exclusive, exclusive.processor({ exclusive: true })],
    ] as const) {
      for (let at = 0, size = 1; at < log.length; at += size, size = (size * 3) % 17) {
        const outcomes = await processor.handleBatch(log.slice(at, at + size));
        expect(outcomes.every((o) => o.ack)).toBe(true);
      }
      for (const workspace of ["ws_b1", "ws_b2"]) {
        const expected = await one.rows(workspace);
        // A task receipt per task and an approval receipt per tool task.
        expect(expected.length).toBe(
          tasks.filter((t) => t.workspaceId === workspace).length +
            tasks.filter((t) => t.workspaceId === workspace && t.withTool).length,
        );
        expectGapFree(expected);
        expect(await harnessed.rows(workspace)).toEqual(expected);
      }
    }
  });

  it("issues nothing twice: repeats in a batch, redeliveries, a restarted consumer", async () => {
    const h = batched;
    const log = logOf([{ taskId: "task_again", workspaceId: "ws_again", withTool: true }]);
    const processor = h.processor();
    // The whole task twice in one batch.
    const outcomes = await processor.handleBatch([...log, ...log]);
    expect(outcomes).toHaveLength(log.length * 2);
    expect(outcomes.every((o) => o.ack)).toBe(true);
    expect(await h.rows("ws_again")).toHaveLength(2);
    // Redelivered (the store looks first) …
    await processor.handleBatch(log.map((d) => ({ ...d, deliveryCount: 2 })));
    // … and delivered as new to a fresh consumer with its own store: the
    // subject's unique key turns the attempt into a retry that finds them.
    const fresh = h.newStore();
    const restarted = h.processor({ store: fresh, exclusive: true });
    expect((await restarted.handleBatch(log)).every((o) => o.ack)).toBe(true);
    const rows = await h.rows("ws_again");
    expect(rows).toHaveLength(2);
    expectGapFree(rows);
  });

  it("with the log as history (embedded): records no facts, and after a restart issues byte for byte what one process issues", async () => {
    const tasks = Array.from({ length: 6 }, (_, i) => ({
      taskId: `task_h${i}`,
      workspaceId: "ws_hist",
      withTool: i % 2 === 0,
    }));
    const base = logOf(tasks).map((d) => d.event);
    // An event about task_h1 on another resource (its final artifact): the
    // history must find it through the session, not the task's resource.
    const end = base.findIndex((e) => e.taskId === "task_h1" && e.kind === "task.completed");
    const artifact = create(EventSchema, {
      id: "evt_task_h1_artifact",
      kind: "artifact.created",
      resource: { object: "artifact", id: "art_h1" },
      workspaceId: "ws_hist",
      sessionId: (base[end] as Event).sessionId,
      taskId: "task_h1",
      sequence: 1n,
      ...((base[end] as Event).createdAt ? { createdAt: (base[end] as Event).createdAt } : {}),
      actor: { id: "agent_echo", kind: ActorKind.AGENT },
      payload: {
        kind: {
          case: "data",
          value: { artifact_id: "art_h1", kind: "file", uri: "/a/b.txt", sha256: "0".repeat(64) },
        },
      },
    });
    const events = [...base.slice(0, end), artifact, ...base.slice(end)];
    // The consumer is handed the events as the log holds them.
    const log = new InProcessEventLog();
    await log.appendLogged(events.map((event, i) => ({ event, position: BigInt(i + 1) })));
    const deliveries: Delivery[] = (await log.read({ filter: { workspaceId: "ws_hist" } })).map(
      (logged) => ({ ...logged, deliveryCount: 1 }),
    );
    expect(deliveries).toHaveLength(events.length);

    // What one process that records every event's facts issues.
    const expected = await harness(db, "receipts_hist_expected");
    const single = expected.processor();
    for (const delivery of deliveries)
      expect(await single.handle(delivery, 1)).toEqual({ ack: true });
    const wanted = await expected.rows("ws_hist");
    expect(JSON.parse(wanted[1]?.document ?? "{}").final_artifacts).toBeDefined();

    const h = await harness(db, "receipts_hist");
    const history = logTaskHistory(log);
    // Everything before the first receipt is due, then a restart: the new
    // process saw none of the tasks begin and reads them from the log.
    const due = deliveries.findIndex(
      (d) => d.event.kind === "user.tool_confirmation" || d.event.kind === "task.completed",
    );
    expect(due).toBeGreaterThan(tasks.length);
    const before = h.processor({ exclusive: true, history });
    expect((await before.handleBatch(deliveries.slice(0, due))).every((o) => o.ack)).toBe(true);
    const after = h.processor({ exclusive: true, history });
    for (let at = due, size = 1; at < deliveries.length; at += size, size = (size * 3) % 7) {
      const outcomes = await after.handleBatch(deliveries.slice(at, at + size));
      expect(outcomes.every((o) => o.ack)).toBe(true);
    }
    const rows = await h.rows("ws_hist");
    expectGapFree(rows);
    expect(rows).toEqual(wanted);
    const recorded = await db.kysely
      .withSchema("receipts_hist")
      .selectFrom("task_events" as never)
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    expect(Number(recorded.n)).toBe(0);
  });

  it("refuses a history without exclusive (replicas fence through recorded facts)", () => {
    expect(() => batched.processor({ history: logTaskHistory(new InProcessEventLog()) })).toThrow(
      /needs `exclusive`/,
    );
  });

  it("keeps one chain when issuers with their own remembered heads take turns and race", async () => {
    const h = exclusive;
    // Two stores on one database, as two replicas would be: each remembers
    // the chain head as of its own last append.
    const stores = [h.newStore(), h.newStore()];
    const processors = stores.map((store) => h.processor({ store }));
    const tasks = Array.from({ length: 40 }, (_, i) => ({
      taskId: `task_race${i}`,
      workspaceId: "ws_race",
    }));
    const log = logOf(tasks);
    // Every task's end comes after all tasks' other events (interleaved log).
    const ends = log.slice(-tasks.length);
    expect(ends.every((d) => d.event.kind === "task.completed")).toBe(true);
    const before = log.slice(0, -tasks.length);
    const split = (deliveries: Delivery[], size: number) =>
      Array.from({ length: Math.ceil(deliveries.length / size) }, (_, i) =>
        deliveries.slice(i * size, (i + 1) * size),
      );
    // Take turns: each store's remembered head is stale on its next turn.
    const ordered = [...before, ...ends.slice(0, 16)];
    for (const [i, batch] of split(ordered, 9).entries()) {
      const outcomes = await (processors[i % 2] as ReceiptProcessor).handleBatch(batch);
      expect(outcomes.every((o) => o.ack)).toBe(true);
    }
    // Race: both at once on the remaining ends.
    const outcomes = await Promise.all(
      split(ends.slice(16), 4).map((batch, i) =>
        (processors[i % 2] as ReceiptProcessor).handleBatch(batch),
      ),
    );
    expect(outcomes.flat().every((o) => o.ack)).toBe(true);
    // The stale heads were noticed and the appends redone, not forked.
    expect(stores.reduce((n, store) => n + store.conflicts, 0)).toBeGreaterThan(0);
    const rows = await h.rows("ws_race");
    expect(rows).toHaveLength(tasks.length);
    expectGapFree(rows);
  });

  it("as one of several replicas, builds from memory only what no other replica added to", async () => {
    // Replica B records an event of the task that is not on the task's own
    // stream (its sequences cannot show it missing); replica A saw the task
    // stream whole and builds the receipt from memory: the commit sees the
    // store holding one event more, writes nothing, and A rebuilds from the store.
    const workspaceId = "ws_fence";
    const events = taskEvents({
      taskId: "task_fence",
      workspaceId,
      sequenced: true,
      withModel: true,
    });
    const call = events.find((e) => e.kind === "agent.model_call") as Event;
    const offStream = clone(EventSchema, call);
    offStream.id = "evt_fence_offstream";
    offStream.resource = create(EventSchema, {
      resource: { object: "session", id: call.sessionId },
    }).resource;
    offStream.sequence = 1n;
    const deliveries = [offStream, ...events].map((event, i) => ({
      event,
      position: BigInt(7_000 + i),
      deliveryCount: 1,
    }));
    const reference = await harness(db, "receipts_fence_ref");
    expect((await reference.processor().handleBatch(deliveries)).every((o) => o.ack)).toBe(true);

    const h = await harness(db, "receipts_fence");
    const a = h.processor({ store: h.newStore() });
    const b = h.processor({ store: h.newStore() });
    const [first, ...rest] = deliveries;
    const last = rest.pop() as Delivery;
    expect((await a.handleBatch(rest)).every((o) => o.ack)).toBe(true);
    expect((await b.handleBatch([first as Delivery])).every((o) => o.ack)).toBe(true);
    expect((await a.handleBatch([last])).every((o) => o.ack)).toBe(true);

    const [expected] = (await reference.rows(workspaceId)).map((r) => JSON.parse(r.document));
    const rows = await h.rows(workspaceId);
    expect(rows).toHaveLength(1);
    expectGapFree(rows);
    const doc = JSON.parse((rows[0] as { document: string }).document);
    // Sealed twice: the first attempt (from memory) was refused.
    expect(doc.receipt_id).toBe("rcpt_0002");
    const comparable = (d: Record<string, unknown>) => {
      const { receipt_id: _id, chain: _chain, signatures: _signatures, ...rest } = d;
      return rest;
    };
    expect(comparable(doc)).toEqual(comparable(expected));
    // Both model calls are in it: the task stream's and the off-stream one.
    expect(doc.cost.provider_breakdown[0].input_tokens).toBe(2 * 1200);
  });

  it("references a replay's source receipt issued in the same batch, whichever task ends first", async () => {
    // Own schemas: receipt ids restart with each processor.
    for (const [h, exclusiveMode] of [
      [await harness(db, "receipts_replays_s"), false],
      [await harness(db, "receipts_replays_x"), true],
    ] as const) {
      const workspaceId = `ws_same_batch_${exclusiveMode ? "x" : "s"}`;
      const source = taskEvents({
        taskId: `task_src_${workspaceId}`,
        workspaceId,
        sequenced: true,
      });
      const sourceEnd = source.at(-1) as Event;
      const replayOf = (id: string) => replayTaskEvents(id, sourceEnd.taskId, workspaceId);
      const first = replayOf(`task_rep1_${workspaceId}`);
      const second = replayOf(`task_rep2_${workspaceId}`);
      // One batch: the source's events, then a replay, then another replay
      // that ends before the source does (its end is moved ahead of the source's).
      const log = [...source.slice(0, -1), ...first, ...second, sourceEnd];
      const deliveries = log.map((event, i) => ({
        event,
        position: BigInt(1_000 + i),
        deliveryCount: 1,
      }));
      const processor = h.processor(exclusiveMode ? { exclusive: true } : {});
      const outcomes = await processor.handleBatch(deliveries);
      expect(outcomes.every((o) => o.ack)).toBe(true);
      const rows = await h.rows(workspaceId);
      expect(rows).toHaveLength(3);
      expectGapFree(rows);
      const docs = rows.map((r) => JSON.parse(r.document));
      // The source is sealed first, so both replays can reference it.
      expect(docs[0].subject.id).toBe(sourceEnd.taskId);
      const sourceDoc = docs[0];
      for (const doc of docs.slice(1)) {
        expect(doc.replay_input.materials[0]).toMatchObject({
          kind: "event_log",
          id: sourceEnd.taskId,
          sha256: sourceDoc.chain.merkle_root,
          metadata: {
            role: "replay_source",
            source_receipt_id: sourceDoc.receipt_id,
            source_receipt_hash: sourceDoc.chain.receipt_hash,
          },
        });
      }
      expect(
        docs
          .slice(1)
          .map((d) => d.subject.id)
          .sort(),
      ).toEqual([first[0]?.taskId, second[0]?.taskId].sort());
    }
  });

  it("references the source receipt after a conflict made the batch look up existing receipts", async () => {
    const h = await harness(db, "receipts_replays_conflict");
    const workspaceId = "ws_conflict_src";
    const source = taskEvents({ taskId: "task_src_conflict", workspaceId, sequenced: true });
    const replay = replayTaskEvents("task_rep_conflict", "task_src_conflict", workspaceId);
    const deliveries = [...source, ...replay].map((event, i) => ({
      event,
      position: BigInt(5_000 + i),
      deliveryCount: 1,
    }));
    // Another replica issues the source's receipt after this one looked for
    // it (its lookup misses) and before this one commits: the batch meets the
    // subject's unique key, retries, and finds the source's receipt existing.
    const other = h.processor({ store: h.newStore() });
    expect((await other.handleBatch(deliveries.slice(0, source.length))).every((o) => o.ack)).toBe(
      true,
    );
    const stale = Object.assign(h.newStore(), { receiptFor: async () => undefined });
    const processor = h.processor({ store: stale });
    expect((await processor.handleBatch(deliveries)).every((o) => o.ack)).toBe(true);
    const rows = await h.rows(workspaceId);
    expect(rows).toHaveLength(2);
    expectGapFree(rows);
    const [sourceDoc, replayDoc] = rows.map((r) => JSON.parse(r.document));
    expect(replayDoc.replay_input.materials[0].metadata).toMatchObject({
      source_receipt_id: sourceDoc.receipt_id,
      source_receipt_hash: sourceDoc.chain.receipt_hash,
    });
  });
});
