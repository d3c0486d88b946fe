// The embedded session owner (TRELLIS_TASKS_JOURNAL=owner) at the store: a
// submit and a finish to a known session are each ONE journal append (its
// row changes; no step record; its events, sequenced by the owner, go to the
// outbox with it); the read model writes the rows behind, and reads see the
// caller's writes.

import type { JsonObject } from "@bufbuild/protobuf";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { EventSchema, Role, TaskStatus } from "@trellis/contracts/core";
import {
  FinishedStepSchema,
  OutcomeSchema,
  OutcomeStatus,
  StepRecordSchema,
} from "@trellis/contracts/tasks";
import type { LoggedEvent } from "@trellis/eventlog";
import {
  createDatabase,
  createOutboxWriter,
  type Database,
  readJournal,
  readOutbox,
  writesStatement,
} from "@trellis/storage";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userActor } from "../../src/domain/events.js";
import { OwnedTaskStore } from "../../src/store/owned-task-store.js";
import { storable } from "../../src/store/owned-turns.js";
import {
  applyRowChanges,
  encodeRowChanges,
  ROWS_STEP,
  type RowChange,
  rowWrites,
} from "../../src/store/row-changes.js";
import type { TasksDatabase } from "../../src/store/schema.js";
import { sessionStream } from "../../src/store/session-stream.js";
import { encodeStepEvent, FINISHED_STEP } from "../../src/store/step-records.js";
import type { Claim } from "../../src/store/task-store.js";
import { createStoreAgent, newTask, text, textOf } from "../support/fixtures.js";
import {
  approvalSuspension,
  migrateTasksStore,
  type OwnerJournal,
  openOwnerJournal,
} from "../support/store-suites.js";

const context = { actor: userActor("usr_1") };

interface EmbeddedOwner extends OwnerJournal {
  database: Database;
  store: OwnedTaskStore;
  agentId: string;
}

/** The embedded owner's store on `database`, its outbox in schema `outbox`. */
function ownedStore(database: Database, outbox: string, owner: OwnerJournal): OwnedTaskStore {
  return new OwnedTaskStore({
    database,
    schema: "tasks",
    outbox: createOutboxWriter({ schema: outbox }),
    leaseMs: 30_000,
    owner,
  });
}

/**
 * A fresh PGlite with the tasks schema and an outbox schema, its journal
 * (writing the appends' events to that outbox and handing the rows to
 * `kick`), the read model (applying `delayMs` after each wake-up), the
 * owner's store, and one agent.
 */
async function openEmbeddedOwner(options: {
  outbox: string;
  delayMs: number;
  kick: (committed?: readonly LoggedEvent[]) => void;
  agent: string;
}): Promise<EmbeddedOwner> {
  const { outbox, delayMs, kick } = options;
  const database = await createDatabase({ kind: "pglite" });
  await migrateTasksStore(database, outbox);
  const { journal, readModel } = await openOwnerJournal(database, { outbox, kick, delayMs });
  const store = ownedStore(database, outbox, { journal, readModel });
  const agentId = await createStoreAgent(store, context, options.agent);
  return { database, journal, readModel, store, agentId };
}

async function closeEmbeddedOwner(owner: EmbeddedOwner | undefined): Promise<void> {
  owner?.store.close();
  await owner?.journal.close();
  await owner?.readModel.stop();
  await owner?.database.close();
}

describe("tasks store, embedded session owner (PGlite)", () => {
  let owner: EmbeddedOwner;
  // What the projector handed to the relay with its kicks.
  const kicked: { position: bigint; id: string }[] = [];

  beforeAll(async () => {
    owner = await openEmbeddedOwner({
      outbox: "outbox_o",
      delayMs: 20,
      kick: (rows) => {
        for (const row of rows ?? []) kicked.push({ position: row.position, id: row.event.id });
      },
      agent: "echo",
    });
  }, 180_000);
  afterAll(() => closeEmbeddedOwner(owner));

  const submit = (sessionId: string, words: string, key?: string) =>
    owner.store.submitTask(newTask(owner.agentId, sessionId, words, key), context, "owner_1");

  const kinds = async (session: string) => {
    const stream = sessionStream({ workspace_id: "default", id: session });
    return (await readJournal(owner.database.kysely, "tasks", { stream, limit: 100 })).map(
      (e) => e.kind,
    );
  };

  it("writes a submit and a finish as one append each, events with it; rows follow", async () => {
    // The first submit creates the session (relational), so the owner knows it after.
    const first = await submit("ses_owner_1", "hello");
    expect(first.claim).toBeDefined();
    expect(await kinds("ses_owner_1")).toEqual([]);
    const done = await owner.store.finishRun(
      first.claim!,
      { status: "completed", messages: [text("hi there", Role.ASSISTANT)] },
      "owner_1",
    );
    expect(done).toMatchObject({ applied: true, transcriptLength: 2n });
    expect(done.task?.status).toBe(TaskStatus.COMPLETED);
    const before = owner.journal.stats();
    const { task, claim } = await submit("ses_owner_1", "again");
    expect(claim?.inputPosition).toBe(2n);
    expect(owner.journal.stats().appends - before.appends).toBe(1);
    // The finish of the first turn (owned: its session was known by then)
    // and this submit: their row changes; their events are in the outbox.
    expect(await kinds("ses_owner_1")).toEqual([ROWS_STEP, ROWS_STEP]);
    // Committed with the append, before any projection: the log has them now.
    const early = (await readOutbox(owner.database, "outbox_o", { limit: 1000 }))
      .map((row) => row.event)
      .filter((event) => event.taskId === task.id);
    expect(early.map((e) => e.kind)).toEqual(["task.submitted", "task.started", "user.message"]);
    expect(early.map((e) => e.sequence)).toEqual([1n, 2n, 3n]);
    // Reads wait for the projector: the caller sees its own submit.
    expect((await owner.store.getTask(task.id)).status).toBe(TaskStatus.WORKING);
    const finished = await owner.store.finishRun(
      claim!,
      { status: "completed", messages: [text("second answer", Role.ASSISTANT)] },
      "owner_1",
    );
    expect(owner.journal.stats().appends - before.appends).toBe(2);
    expect(finished.transcriptLength).toBe(4n);
    const read = await owner.store.getTask(task.id);
    expect(read.status).toBe(TaskStatus.COMPLETED);
    expect(textOf(read.output[0])).toBe("second answer");
    // The Outcome rode on the finish's row changes.
    const outcome = await owner.store.getOutcome(read.outcomeId);
    expect(outcome).toMatchObject({ taskId: task.id, sessionId: "ses_owner_1" });
    expect(outcome.status).toBe(OutcomeStatus.SUCCEEDED);
    expect(outcome.messages.map(textOf)).toEqual(["second answer"]);
    expect(outcome.createdAt).toBeDefined();
    const messages = await owner.store.listMessages(
      "ses_owner_1",
      { taskId: "" },
      { pageSize: 10, pageToken: "" },
    );
    expect(messages.items.map((m) => [m.position, textOf(m.message)])).toEqual([
      [0n, "hello"],
      [1n, "hi there"],
      [2n, "again"],
      [3n, "second answer"],
    ]);
    const session = await owner.store.getSession("ses_owner_1");
    expect(session.messageCount).toBe(4n);
    // The outbox rows: this task's events, in order, sequenced per resource.
    const outbox = (await readOutbox(owner.database, "outbox_o", { limit: 1000 }))
      .map((row) => row.event)
      .filter((event) => event.taskId === task.id);
    expect(outbox.map((e) => e.kind)).toEqual([
      "task.submitted",
      "task.started",
      "user.message",
      "agent.message",
      "task.completed",
    ]);
    // The journal handed the relay the rows it wrote, as written (the
    // relational fallbacks, e.g. creating the session, write through the
    // outbox writer instead).
    const rows = await readOutbox(owner.database, "outbox_o", { limit: 1000 });
    const byPosition = new Map(rows.map((row) => [row.position, row.event.id]));
    expect(kicked.map((k) => byPosition.get(k.position))).toEqual(kicked.map((k) => k.id));
    const handed = new Set(kicked.map((k) => k.id));
    const ends = outbox.filter((e) => e.kind === "agent.message" || e.kind === "task.completed");
    expect(ends.map((e) => handed.has(e.id))).toEqual([true, true]);
    // Row changes are projected as one statement a batch.
    expect(owner.readModel.status().statementBatches).toBeGreaterThan(0);
    expect(owner.readModel.status().transactionBatches).toBe(0);
  });

  it("queues a second submit behind the running one and claims it on finish", async () => {
    const running = await submit("ses_owner_2", "one");
    const queued = await submit("ses_owner_2", "two");
    expect(queued.claim).toBeUndefined();
    expect(queued.task.status).toBe(TaskStatus.SUBMITTED);
    const done = await owner.store.finishRun(
      running.claim!,
      { status: "completed", messages: [] },
      "owner_1",
    );
    expect(done.next?.task.id).toBe(queued.task.id);
    // A finish by a run that no longer holds the claim commits nothing.
    expect(
      await owner.store.finishRun(running.claim!, { status: "completed", messages: [] }, "owner_1"),
    ).toEqual({ applied: false });
    expect((await owner.store.getTask(queued.task.id)).status).toBe(TaskStatus.WORKING);
  });

  it("answers a retried submit with the task its key created", async () => {
    await submit("ses_owner_3", "first");
    const keyed = await submit("ses_owner_3", "keyed", "key-1");
    const again = await submit("ses_owner_3", "keyed", "key-1");
    expect(again).toMatchObject({ replayed: true, task: { id: keyed.task.id } });
    await expect(submit("ses_owner_3", "other body", "key-1")).rejects.toThrow(/idempotency/i);
    const listed = await owner.store.listTasks(
      { sessionId: "ses_owner_3", statuses: [] },
      { pageSize: 10, pageToken: "" },
    );
    expect(listed.items).toHaveLength(2);
  });

  it("leaves output the tables would refuse to the relational path (never appended)", async () => {
    const { claim } = await submit("ses_owner_4", "go");
    await owner.store.finishRun(claim!, { status: "completed", messages: [] }, "owner_1");
    const next = await submit("ses_owner_4", "again");
    const before = owner.journal.stats().appends;
    // A NUL in the output: the relational finish gets the database's refusal.
    await expect(
      owner.store.finishRun(
        next.claim!,
        { status: "completed", messages: [text("bad\u0000text", Role.ASSISTANT)] },
        "owner_1",
      ),
    ).rejects.toMatchObject({ code: expect.stringMatching(/^22/) });
    expect(owner.journal.stats().appends).toBe(before);
    // The projector is not stuck: reads and the failed turn's finish go on.
    const failed = await owner.store.finishRun(
      next.claim!,
      {
        status: "failed",
        messages: [],
        category: "output_unrecordable",
        message: "x",
        retryable: false,
      },
      "owner_1",
    );
    expect(failed.task?.status).toBe(TaskStatus.FAILED);
    expect((await owner.store.getTask(next.task.id)).status).toBe(TaskStatus.FAILED);
  });

  it("hands a session's mailbox over in one statement: the release runs before the take", async () => {
    const running = await submit("ses_handover", "one");
    const queued = await submit("ses_handover", "two");
    expect((await owner.store.getTask(queued.task.id)).status).toBe(TaskStatus.SUBMITTED);
    const at = new Date("2027-04-03T10:00:00.000Z");
    // The take listed first: the order of the changes does not order the writes.
    const changes: RowChange[] = [
      {
        op: "update",
        table: "tasks",
        id: queued.task.id,
        set: { run_state: "running", updated_at: at },
      },
      {
        op: "update",
        table: "tasks",
        id: running.task.id,
        set: { run_state: "done", updated_at: at },
      },
    ];
    const writes = rowWrites(changes);
    expect(writes).toMatchObject({ first: [expect.any(Function)], rest: [expect.any(Function)] });
    // As the projector runs a batch: one statement, no transaction.
    await writesStatement(owner.database.kysely.withSchema("tasks"), writes!, [
      sql<number>`1`.as("written"),
    ]).execute();
    const rows = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("tasks" as never)
      .select(["id" as never, "run_state" as never])
      .where("session_id" as never, "=", "ses_handover" as never)
      .execute();
    expect(
      new Map(rows.map((r) => [(r as { id: string }).id, (r as { run_state: string }).run_state])),
    ).toEqual(
      new Map([
        [running.task.id, "done"],
        [queued.task.id, "running"],
      ]),
    );
  });

  it("writes the updates of several rows of a table in one statement, each column typed", async () => {
    const sessions = ["ses_rows_1", "ses_rows_2", "ses_rows_3"];
    const first = await Promise.all(sessions.map((id) => submit(id, `hello ${id}`)));
    const ids = first.map((r) => r.task.id);
    const at = new Date("2027-04-03T10:00:00.000Z");
    const bytes = new Uint8Array([0, 1, 2, 254, 255]);
    // Tasks 0 and 1 set the same columns (one statement); task 2 others.
    const changes: RowChange[] = [
      ...ids.slice(0, 2).map(
        (id, i): RowChange => ({
          op: "update",
          table: "tasks",
          id,
          set: {
            metadata: JSON.stringify({ n: i, quote: 'it\'s "x" ✓ 😀' }),
            output: bytes,
            lease_expires_at: at,
            queue_seq: 9_007_199_254_740_993n + BigInt(i),
            cancel_reason: `reason ${i} 'quoted'`,
            checkpoint: null,
          },
        }),
      ),
      { op: "update", table: "tasks", id: ids[2] as string, set: { cancel_reason: "alone" } },
      // A later change of the same row merges into the first.
      { op: "update", table: "tasks", id: ids[0] as string, set: { cancel_reason: "merged" } },
      ...sessions.map(
        (id, i): RowChange => ({
          op: "update",
          table: "sessions",
          id,
          set: { turn_count: 40n + BigInt(i), updated_at: at },
        }),
      ),
    ];
    await owner.database.kysely
      .transaction()
      // As the projector calls it: the transaction scoped to the schema.
      .execute((trx) => applyRowChanges(changes, trx.withSchema("tasks") as never));
    const tasks = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("tasks" as never)
      .selectAll()
      .where("id" as never, "in", ids as never)
      .execute();
    const byId = new Map((tasks as unknown as TasksDatabase["tasks"][]).map((t) => [t.id, t]));
    for (const [i, id] of ids.slice(0, 2).entries()) {
      const row = byId.get(id);
      expect(row?.metadata).toEqual({ n: i, quote: 'it\'s "x" ✓ 😀' });
      expect(new Uint8Array(row?.output as Uint8Array)).toEqual(bytes);
      expect(new Date(row?.lease_expires_at as never).toISOString()).toBe(at.toISOString());
      expect(BigInt(row?.queue_seq as never)).toBe(9_007_199_254_740_993n + BigInt(i));
      expect(row?.cancel_reason).toBe(i === 0 ? "merged" : "reason 1 'quoted'");
      expect(row?.checkpoint).toBeNull();
    }
    expect(byId.get(ids[2] as string)?.cancel_reason).toBe("alone");
    const counts = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("sessions" as never)
      .select(["id" as never, "turn_count" as never])
      .where("id" as never, "in", sessions as never)
      .orderBy("id" as never)
      .execute();
    expect(
      (counts as unknown as { id: string; turn_count: bigint }[]).map((r) => [
        r.id,
        BigInt(r.turn_count),
      ]),
    ).toEqual(sessions.map((id, i) => [id, 40n + BigInt(i)]));
  });

  it("projects the Outcome of a finish recorded before owned steps dropped their step record", async () => {
    // Journals written by earlier versions carry an owned finish's Outcome
    // on its step record (tasks.step.finished), not in its row changes.
    const { task } = await submit("ses_owner_old", "earlier version");
    const record = create(StepRecordSchema, {
      sessionId: "ses_owner_old",
      workspaceId: "default",
      taskId: task.id,
      step: {
        case: "finished",
        value: create(FinishedStepSchema, {
          status: TaskStatus.COMPLETED,
          outcome: create(OutcomeSchema, {
            id: "out_recorded_before",
            taskId: task.id,
            sessionId: "ses_owner_old",
            workspaceId: "default",
            status: OutcomeStatus.SUCCEEDED,
            summary: "from a step record",
          }),
        }),
      },
    });
    const stream = sessionStream({ workspace_id: "default", id: "ses_owner_old" });
    const { positions } = await owner.journal.append([
      { stream, kind: FINISHED_STEP, body: toBinary(StepRecordSchema, record) },
      { stream, kind: ROWS_STEP, body: encodeRowChanges([]) },
    ]);
    await owner.readModel.waitFor(positions.at(-1) as bigint, { timeoutMs: 10_000 });
    const outcome = await owner.store.getOutcome("out_recorded_before");
    expect(outcome).toMatchObject({ taskId: task.id, summary: "from a step record" });
    expect(outcome.status).toBe(OutcomeStatus.SUCCEEDED);
  });

  it("writes events a journal from before session 24 holds as entries to the outbox, in order", async () => {
    const { task } = await submit("ses_owner_entries", "before");
    const stream = sessionStream({ workspace_id: "default", id: "ses_owner_entries" });
    const earlier = (await readOutbox(owner.database, "outbox_o", { limit: 1000 })).filter(
      (row) => row.event.taskId === task.id,
    );
    // As owned steps appended them then: the event without its sequence.
    const legacy = (kind: string) =>
      create(EventSchema, {
        id: `evt_legacy_${kind}`,
        kind,
        workspaceId: "default",
        sessionId: "ses_owner_entries",
        taskId: task.id,
        resource: { object: "task", id: task.id },
        createdAt: timestampNow(),
      });
    const { positions } = await owner.journal.append([
      { stream, kind: "agent.message", body: encodeStepEvent(legacy("agent.message")) },
      { stream, kind: "task.progress", body: encodeStepEvent(legacy("task.progress")) },
      { stream, kind: ROWS_STEP, body: encodeRowChanges([]) },
    ]);
    const handed = kicked.length;
    await owner.readModel.waitFor(positions.at(-1) as bigint, { timeoutMs: 10_000 });
    const rows = (await readOutbox(owner.database, "outbox_o", { limit: 1000 })).filter(
      (row) => row.event.taskId === task.id,
    );
    // Sequenced after the task's events the owner wrote with its appends.
    expect(rows.slice(earlier.length).map((r) => [r.event.id, r.event.sequence])).toEqual([
      ["evt_legacy_agent.message", BigInt(earlier.length + 1)],
      ["evt_legacy_task.progress", BigInt(earlier.length + 2)],
    ]);
    expect(rows[earlier.length]?.event.previousEventId).toBe(earlier.at(-1)?.event.id);
    // ...and handed to the relay by the projector.
    expect(kicked.slice(handed).map((k) => k.id)).toEqual([
      "evt_legacy_agent.message",
      "evt_legacy_task.progress",
    ]);
  });

  it("dead-letters a step the tables refuse and projects the steps after it", async () => {
    const { task } = await submit("ses_poison_1", "before");
    // A step whose row change the database refuses (a NUL in a text
    // column), appended between a session's steps as a replica would.
    const refused: RowChange[] = [
      { op: "update", table: "tasks", id: task.id, set: { cancel_reason: "bad\u0000reason" } },
    ];
    const { positions } = await owner.journal.append([
      { stream: "ses_poison_1", kind: ROWS_STEP, body: encodeRowChanges(refused) },
    ]);
    const second = await submit("ses_poison_2", "after");
    expect((await owner.store.getTask(second.task.id)).status).toBe(TaskStatus.WORKING);
    expect(owner.readModel.status()).toMatchObject({ deadLetters: 1, failures: 0 });
    const dead = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("journal_dead_letter" as never)
      .select(["projector" as never, "position" as never, "kind" as never, "reason" as never])
      .execute();
    expect(
      (dead as unknown as { position: bigint }[]).map((d) => ({
        ...d,
        position: BigInt(d.position),
      })),
    ).toEqual([
      {
        projector: "tasks-read-model",
        position: positions[0],
        kind: ROWS_STEP,
        reason: expect.stringMatching(/^22/),
      },
    ]);
    // The refused change is not applied; the session goes on.
    const row = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("tasks" as never)
      .select("cancel_reason" as never)
      .where("id" as never, "=", task.id as never)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ cancel_reason: "" });
    expect((await owner.store.getTask(task.id)).status).toBe(TaskStatus.WORKING);
  });

  it("tells storable text from what PostgreSQL refuses", () => {
    expect(storable({ a: ["ok", { b: "fine ✓ 😀" }], bytes: new Uint8Array([0, 1]) })).toBe(true);
    expect(storable("a\u0000b")).toBe(false);
    expect(storable({ "k\u0000": 1 })).toBe(false);
    expect(storable(["\ud800 lone"])).toBe(false);
    expect(storable(text("bad\u0000text"))).toBe(false);
  });
});

describe("tasks store, embedded session owner: the runner's read of the agent state", () => {
  let owner: EmbeddedOwner;

  beforeAll(async () => {
    owner = await openEmbeddedOwner({
      outbox: "outbox_s",
      // Applies only when someone waits (a minute's delay after each wake-up):
      // what forces a projection is then visible in its position.
      delayMs: 60_000,
      kick: () => {},
      agent: "stateful",
    });
  }, 180_000);
  afterAll(() => closeEmbeddedOwner(owner));

  const submit = (words: string, sessionId = "ses_state_1", on = owner.store) =>
    on.submitTask(newTask(owner.agentId, sessionId, words), context, "owner_1");

  const complete = (claim: Claim | undefined, state?: JsonObject) =>
    owner.store.finishRun(
      claim!,
      { status: "completed", messages: [text("ok", Role.ASSISTANT)], ...(state ? { state } : {}) },
      "owner_1",
    );

  /** What the table holds (as a store on the same database after a restart reads it). */
  const stored = async (sessionId: string) => {
    await owner.readModel.waitFor(owner.journal.head(), { timeoutMs: 10_000 });
    const row = await owner.database.kysely
      .withSchema("tasks")
      .selectFrom("session_states" as never)
      .select("state" as never)
      .where("session_id" as never, "=", sessionId as never)
      .executeTakeFirst();
    return (row as { state: JsonObject } | undefined)?.state;
  };

  it("serves the state a finish left from memory: no wait for the projector", async () => {
    // Created by the first submit (relational), then owned.
    const first = await submit("one");
    await complete(first.claim, { count: 1 });
    // The finish changed the state and is not projected yet: memory answers.
    const head = owner.journal.head();
    expect(owner.readModel.status().position).toBeLessThan(head);
    expect(await owner.store.loadAgentState("ses_state_1")).toEqual({ count: 1 });
    expect(owner.readModel.status().position).toBeLessThan(head);

    // The next submit changes no state: the session keeps it.
    const second = await submit("two");
    expect(second.claim).toBeDefined();
    expect(await owner.store.loadAgentState("ses_state_1")).toEqual({ count: 1 });

    // Its finish changes it again; a finish without a state keeps it.
    await complete(second.claim, { count: 2 });
    expect(await owner.store.loadAgentState("ses_state_1")).toEqual({ count: 2 });
    const third = await submit("three");
    await complete(third.claim);
    expect(await owner.store.loadAgentState("ses_state_1")).toEqual({ count: 2 });
    expect(owner.readModel.status().position).toBeLessThan(owner.journal.head());
    // And it is what the table holds once projected.
    expect(await stored("ses_state_1")).toEqual({ count: 2 });
  });

  it("after an eviction, reads the table once (after the state's append), then memory", async () => {
    const first = await submit("one", "ses_state_2");
    await complete(first.claim, { step: "first", nested: { bb: 1, a: [1, { yy: 2, x: 3 }] } });
    const second = await submit("two", "ses_state_2");
    // Evicted (as idle, or a lost lease) between the claim and the run.
    owner.store.owner.forget(sessionStream({ workspace_id: "default", id: "ses_state_2" }));
    expect(await owner.store.loadAgentState("ses_state_2")).toEqual({
      step: "first",
      nested: { bb: 1, a: [1, { yy: 2, x: 3 }] },
    });
    await complete(second.claim, { step: "second" });
    const changed = owner.journal.head();
    // Loaded again by the next submit (state unknown): read once, then kept.
    owner.store.owner.forget(sessionStream({ workspace_id: "default", id: "ses_state_2" }));
    const third = await submit("three", "ses_state_2");
    expect(
      owner.store.owner.held({ workspace_id: "default", id: "ses_state_2" })?.agentState,
    ).toBeUndefined();
    expect(await owner.store.loadAgentState("ses_state_2")).toEqual({ step: "second" });
    expect(
      owner.store.owner.held({ workspace_id: "default", id: "ses_state_2" })?.agentState,
    ).toBeDefined();
    // The projector passed the finish that changed the state.
    expect(owner.readModel.status().position).toBeGreaterThanOrEqual(changed);
    await complete(third.claim, { step: "third", zz: { b: 1, aa: 2 } });
    // Memory gives what the table gives, key order included.
    const fromMemory = await owner.store.loadAgentState("ses_state_2");
    const fromTable = await stored("ses_state_2");
    expect(fromMemory).toEqual(fromTable);
    expect(JSON.stringify(fromMemory)).toBe(JSON.stringify(fromTable));
  });

  it("after a relational finish that writes the state (a suspension), reads the new one", async () => {
    const first = await submit("one", "ses_state_3");
    await complete(first.claim, { phase: "before" });
    expect(await owner.store.loadAgentState("ses_state_3")).toEqual({ phase: "before" });
    const second = await submit("two", "ses_state_3");
    // A suspension is finished by the relational path (under the owner): it
    // writes session_states itself, and the session's memory is dropped.
    await owner.store.finishRun(
      second.claim!,
      approvalSuspension({ phase: "suspended" }),
      "owner_1",
    );
    expect(owner.store.owner.held({ workspace_id: "default", id: "ses_state_3" })).toBeUndefined();
    expect(await owner.store.loadAgentState("ses_state_3")).toEqual({ phase: "suspended" });
    // The next turn of the session starts from it too.
    const third = await submit("three", "ses_state_3");
    expect(third.claim).toBeDefined();
    expect(await owner.store.loadAgentState("ses_state_3")).toEqual({ phase: "suspended" });
  });

  it("after a restart, a new owner on the same database reads what the last finish left", async () => {
    const first = await submit("one", "ses_state_4");
    await complete(first.claim, { restarted: false });
    const second = await submit("two", "ses_state_4");
    await complete(second.claim, { restarted: true });
    await owner.readModel.waitFor(owner.journal.head(), { timeoutMs: 10_000 });
    const restarted = ownedStore(owner.database, "outbox_s", owner);
    try {
      expect(await restarted.loadAgentState("ses_state_4")).toEqual({ restarted: true });
      const third = await submit("three", "ses_state_4", restarted);
      expect(third.claim).toBeDefined();
      expect(await restarted.loadAgentState("ses_state_4")).toEqual({ restarted: true });
      expect(
        restarted.owner.held({ workspace_id: "default", id: "ses_state_4" })?.agentState,
      ).toBeDefined();
    } finally {
      restarted.close();
    }
  });
});
