// The session owner under leases (distributed owner mode) at the store, two
// replicas in one process on one PostgreSQL: a replica deposed while it
// still believes it owns a session has its append refused (nothing of it is
// written), and its call goes on at the lease's new holder by a hand-off;
// per-session order holds across the replicas. Hand-offs and take-overs are
// counted as OpenTelemetry counters.
import { Role, TaskStatus } from "@trellis/contracts/core";
import {
  createDatabase,
  createOutboxWriter,
  type Database,
  readJournal,
  readOutbox,
} from "@trellis/storage";
import { type MemoryMeter, memoryMeter } from "@trellis/storage/contract";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userActor } from "../../src/domain/events.js";
import { LeasedTaskStore } from "../../src/store/leased-task-store.js";
import {
  SessionLeases,
  sessionLeaseHandoffsMetric,
  sessionLeaseTakeoversMetric,
} from "../../src/store/session-leases.js";
import { sessionStream } from "../../src/store/session-stream.js";
import type { Claim } from "../../src/store/task-store.js";
import { createStoreAgent, newTask, text, textOf } from "../support/fixtures.js";
import { migrateTasksStore, type OwnerJournal, openOwnerJournal } from "../support/store-suites.js";

const context = { actor: userActor("usr_1") };

interface Replica extends OwnerJournal {
  id: string;
  database: Database;
  leases: SessionLeases;
  store: LeasedTaskStore;
  /** This replica's metrics (its own meter provider). */
  metrics: MemoryMeter;
}

/** Sum of a counter's points of `replica` whose attributes include `attributes`. */
function counted(
  replica: Replica,
  name: string,
  attributes: Record<string, string> = {},
): Promise<number> {
  return replica.metrics.total(name, attributes);
}

describe("tasks store, session owner under leases (PostgreSQL, two replicas)", () => {
  let testDb: TestDatabase;
  let a: Replica;
  let b: Replica;
  let agentId: string;

  async function replica(id: string): Promise<Replica> {
    const database = await createDatabase({ kind: "postgres", url: testDb.url });
    const { journal, readModel } = await openOwnerJournal(database, {
      outbox: "tasks",
      kick: () => undefined,
      listen: true,
    });
    // A long TTL: the test expires a lease by hand, before the holder's renewal notices.
    const metrics = memoryMeter();
    const leases = new SessionLeases({
      database,
      schema: "tasks",
      owner: id,
      ttlMs: 60_000,
      meter: metrics.meter,
    });
    const store = new LeasedTaskStore({
      database,
      schema: "tasks",
      outbox: createOutboxWriter({ schema: "tasks" }),
      leaseMs: 60_000,
      owner: { journal, readModel },
      leases,
    });
    await leases.start(store.owner);
    return { id, database, journal, readModel, leases, store, metrics };
  }

  beforeAll(async () => {
    testDb = await createTestDatabase("tasks_leases");
    const setup = await createDatabase({ kind: "postgres", url: testDb.url });
    await migrateTasksStore(setup, "tasks");
    await setup.close();
    a = await replica("replica-a");
    b = await replica("replica-b");
    agentId = await createStoreAgent(a.store, context);
  }, 120_000);

  afterAll(async () => {
    for (const r of [a, b]) {
      if (!r) continue;
      await r.store.closeLeases();
      await r.journal.close();
      await r.readModel.stop();
      await r.database.close();
      await r.metrics.shutdown();
    }
    await testDb?.drop();
  });

  const submit = (on: Replica, sessionId: string, words: string) =>
    on.store.submitTask(newTask(agentId, sessionId, words), context, on.id);
  /** Finishes `claim` on replica `on`, answering `words`. */
  const complete = (on: Replica, claim: Claim, words: string) =>
    on.store.finishRun(
      claim,
      { status: "completed", messages: [text(words, Role.ASSISTANT)] },
      on.id,
    );
  /** One whole turn of `session` on replica `on`: `words` asked and answered. */
  const turn = async (on: Replica, session: string, words: string) => {
    const submitted = await submit(on, session, words);
    await complete(on, submitted.claim!, words);
  };

  /** The journal stream (and lease) of session `id` of the default workspace. */
  const streamOf = (id: string) => sessionStream({ workspace_id: "default", id });
  const entries = (session: string) =>
    readJournal(a.database.kysely, "tasks", { stream: streamOf(session), limit: 1000 });
  /** The lease of `session` lapses on the database clock; its holder is not told. */
  const lapse = (session: string) =>
    sql`update tasks.session_leases set expires_at = now() - interval '1 second'
      where stream = ${streamOf(session)}`.execute(a.database.kysely);

  it("refuses a deposed owner's append, writes nothing of it, and goes on at the new owner", async () => {
    const session = "ses_lease_1";
    await turn(a, session, "one");
    expect(a.leases.holds(streamOf(session))).toBe(true);
    // A's lease lapses on the database clock while A still believes it holds it.
    await lapse(session);
    const taken = await submit(b, session, "two");
    expect(taken.claim).toBeDefined();
    expect(b.leases.stats()).toMatchObject({ tookOver: 1 });
    const before = await entries(session);

    // A's step decides on its old state and appends with its old head: refused.
    const late = await submit(a, session, "three");
    expect(a.leases.stats().conflicts).toBe(1);
    // ...and retried after a hand-off from B: queued behind B's running turn.
    expect(b.leases.stats().handoffsGiven).toBeGreaterThanOrEqual(1);
    expect(late.claim).toBeUndefined();
    expect(late.task.status).toBe(TaskStatus.SUBMITTED);
    const after = await entries(session);
    // Nothing of the refused append: after B's entries, A's fence entry for
    // its new lease and the submit of "three"; in the outbox (written with
    // the appends) one `task.submitted` per task that exists, none for the
    // task the refused append had made.
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.length - before.length).toBe(2);
    const submitted = (await readOutbox(a.database, "tasks", { limit: 1000 }))
      .map((row) => row.event)
      .filter((event) => event.sessionId === session && event.kind === "task.submitted");

    // B's turn finishes (B asks the session back) and claims A's queued one.
    const done = await complete(b, taken.claim!, "two");
    expect(done.applied).toBe(true);
    expect(done.next?.task.id).toBe(late.task.id);
    await complete(b, done.next!, "three");
    const { items: messages } = await a.store.listMessages(
      session,
      { taskId: "" },
      { pageSize: 100, pageToken: "" },
    );
    expect(messages.map((m) => textOf(m.message))).toEqual([
      "one",
      "one",
      "two",
      "two",
      "three",
      "three",
    ]);
    expect(messages.map((m) => Number(m.position))).toEqual([0, 1, 2, 3, 4, 5]);
    const tasks = await b.store.listTasks(
      { sessionId: session, statuses: [] },
      { pageSize: 10, pageToken: "" },
    );
    expect(tasks.items.map((t) => t.status)).toEqual([
      TaskStatus.COMPLETED,
      TaskStatus.COMPLETED,
      TaskStatus.COMPLETED,
    ]);
    expect(submitted.map((event) => event.taskId).sort()).toEqual(
      tasks.items.map((t) => t.id).sort(),
    );

    // The take-overs and the hand-offs, as counters: B took the lapsed lease
    // over, A asked for the session and B gave it, and back; each replica's
    // counters say what its stats say.
    const handoff = "trellis.session_lease.handoff";
    expect(await counted(a, sessionLeaseTakeoversMetric)).toBeGreaterThan(0);
    expect(await counted(b, sessionLeaseTakeoversMetric)).toBeGreaterThan(1);
    expect(await counted(a, sessionLeaseHandoffsMetric, { [handoff]: "asked" })).toBeGreaterThan(0);
    expect(await counted(b, sessionLeaseHandoffsMetric, { [handoff]: "given" })).toBeGreaterThan(0);
    for (const r of [a, b]) {
      const stats = r.leases.stats();
      expect(await counted(r, sessionLeaseTakeoversMetric), r.id).toBe(stats.tookOver);
      expect(await counted(r, sessionLeaseHandoffsMetric, { [handoff]: "asked" }), r.id).toBe(
        stats.handoffsAsked,
      );
      expect(await counted(r, sessionLeaseHandoffsMetric, { [handoff]: "given" }), r.id).toBe(
        stats.handoffsGiven,
      );
    }
  }, 60_000);

  it("refuses a relational write of a holder whose lease lapsed, and writes nothing of it", async () => {
    const session = "ses_lease_2";
    await turn(a, session, "one");
    expect(a.leases.holds(streamOf(session))).toBe(true);
    const conflicts = a.leases.stats().conflicts;
    await lapse(session);
    // A still believes it holds the session; its transaction checks the lease row.
    await expect(
      a.store.appendMessage(session, text("note", Role.USER), undefined, context),
    ).rejects.toMatchObject({ reason: "conflict" });
    expect(a.leases.stats().conflicts).toBe(conflicts + 1);
    const page = { pageSize: 100, pageToken: "" };
    const before = await b.store.listMessages(session, { taskId: "" }, page);
    expect(before.items.map((m) => textOf(m.message))).toEqual(["one", "one"]);
    // Called again, A takes the lapsed lease anew (a new fence) and writes.
    await a.store.appendMessage(session, text("note", Role.USER), undefined, context);
    const after = await b.store.listMessages(session, { taskId: "" }, page);
    expect(after.items.map((m) => textOf(m.message))).toEqual(["one", "one", "note"]);
  }, 60_000);
  it("serves a read of a session it owns after that session's head, without the table's head", async () => {
    const session = "ses_lease_3";
    const stream = streamOf(session);
    expect(a.leases.readHead(stream)).toBeUndefined();
    await turn(a, session, "one");
    // A holds the lease; its head is the stream's last entry.
    const written = await entries(session);
    expect(a.leases.readHead(stream)).toBe(written.at(-1)?.position);
    const page = { pageSize: 100, pageToken: "" };
    const reads = a.store.owner.headReads;
    const own = await a.store.listMessages(session, { taskId: "" }, page, "default");
    expect(own.items.map((m) => textOf(m.message))).toEqual(["one", "one"]);
    expect((await a.store.getSession(session, "default")).id).toBe(session);
    expect(a.store.owner.headReads).toBe(reads);
    // Without the workspace the session is found by id: the table's head.
    await a.store.getSession(session);
    expect(a.store.owner.headReads).toBe(reads + 1);
    // B does not hold it: B waits for the table's head, and sees A's writes.
    const readsOfB = b.store.owner.headReads;
    expect(b.leases.readHead(stream)).toBeUndefined();
    const there = await b.store.listMessages(session, { taskId: "" }, page, "default");
    expect(there.items.map((m) => textOf(m.message))).toEqual(["one", "one"]);
    expect(b.store.owner.headReads).toBe(readsOfB + 1);
    // B takes the session over (a hand-off): A no longer answers a head; B does once fenced.
    const second = await submit(b, session, "two");
    expect(a.leases.readHead(stream)).toBeUndefined();
    expect(b.leases.readHead(stream)).toBe((await entries(session)).at(-1)?.position);
    await complete(b, second.claim!, "two");
    // A's read of the session now waits for the table's head and sees B's turn.
    const back = await a.store.listMessages(session, { taskId: "" }, page, "default");
    expect(back.items.map((m) => textOf(m.message))).toEqual(["one", "one", "two", "two"]);
    expect(a.store.owner.headReads).toBe(reads + 2);
  }, 60_000);
});
