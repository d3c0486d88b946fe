// The turn journal in the tasks store (TRELLIS_TASKS_JOURNAL): submit and
// finish append their step records in the same transaction as their rows,
// the `tasks-read-model` projector writes the Outcome rows from them, and
// outcome reads wait for it (read-your-writes). On PGlite and PostgreSQL.
import { fromBinary } from "@bufbuild/protobuf";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { OutcomeStatus, type StepRecord, StepRecordSchema } from "@trellis/contracts/tasks";
import {
  createDatabase,
  createOutboxWriter,
  type Database,
  type Projector,
  readJournal,
} from "@trellis/storage";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userActor } from "../../src/domain/events.js";
import { PostgresTaskStore } from "../../src/store/postgres-task-store.js";
import { createTasksReadModel, READ_MODEL_PROJECTOR } from "../../src/store/read-model.js";
import { sessionStream } from "../../src/store/session-stream.js";
import { FINISHED_STEP, SUBMITTED_STEP } from "../../src/store/step-records.js";
import { createStoreAgent, newTask, text } from "../support/fixtures.js";
import { approvalSuspension, migrateTasksStore } from "../support/store-suites.js";

interface Opened {
  db: Database;
  /** Another process's connection to the same database (PostgreSQL), else the same one. */
  replica(): Promise<Database>;
  drop(): Promise<void>;
}

const backends: { name: string; open(): Promise<Opened> }[] = [
  {
    name: "PGlite",
    async open() {
      const db = await createDatabase({ kind: "pglite" });
      return { db, replica: async () => db, drop: async () => {} };
    },
  },
  {
    name: "PostgreSQL",
    async open() {
      const test: TestDatabase = await createTestDatabase("tasks_journal");
      const db = await createDatabase({ kind: "postgres", url: test.url, poolSize: 4 });
      return {
        db,
        replica: () => createDatabase({ kind: "postgres", url: test.url, poolSize: 4 }),
        drop: () => test.drop(),
      };
    },
  },
];

const context = { actor: userActor("usr_1") };

for (const backend of backends) {
  describe(`tasks store, turn journal on (${backend.name})`, () => {
    let database: Database;
    let opened: Opened;
    let drop: () => Promise<void>;
    let readModel: Projector;
    let store: PostgresTaskStore;
    let agentId: string;

    beforeAll(async () => {
      opened = await backend.open();
      ({ db: database, drop } = opened);
      await migrateTasksStore(database, "outbox_j");
      readModel = await createTasksReadModel({ database, schema: "tasks", delayMs: 20 });
      store = new PostgresTaskStore({
        database,
        schema: "tasks",
        outbox: createOutboxWriter({ schema: "outbox_j" }),
        leaseMs: 30_000,
        journal: { readModel },
      });
      agentId = await createStoreAgent(store, context);
    });
    afterAll(async () => {
      await readModel?.stop();
      await database?.close();
      await drop?.();
    });

    const submit = (sessionId: string, words: string, key?: string) =>
      store.submitTask(
        // "": a new session, else one the test created.
        { ...newTask(agentId, sessionId, words, key), createSession: sessionId === "" },
        context,
        "owner_1",
      );

    const steps = async (session: string): Promise<{ kind: string; record: StepRecord }[]> =>
      (
        await readJournal(database.kysely, "tasks", {
          stream: sessionStream({ workspace_id: "default", id: session }),
          limit: 100,
        })
      ).map((entry) => ({
        kind: entry.kind,
        record: fromBinary(StepRecordSchema, entry.body),
      }));

    it("journals a submit and a finish; the Outcome comes from the projector", async () => {
      const submitted = await submit("", "hello");
      const claim = submitted.claim;
      expect(claim).toBeDefined();
      const sessionId = submitted.task.sessionId;
      const finished = await store.finishRun(
        claim!,
        {
          status: "completed",
          messages: [text("hi there", Role.AGENT)],
          backendId: "scripted",
        },
        "owner_1",
      );
      expect(finished.applied).toBe(true);
      const task = finished.task!;
      expect(task.status).toBe(TaskStatus.COMPLETED);

      const journal = await steps(sessionId);
      expect(journal.map((s) => s.kind)).toEqual([SUBMITTED_STEP, FINISHED_STEP]);
      const [first, second] = journal.map((s) => s.record);
      expect(first?.step.case).toBe("submitted");
      if (first?.step.case !== "submitted") throw new Error("unreachable");
      expect(first.taskId).toBe(task.id);
      expect(first.step.value.runNow).toBe(true);
      expect(first.step.value.input?.id).toBe(task.input?.id);
      expect(first.step.value.task?.agentId).toBe(agentId);
      expect(first.counters?.messageCount).toBe(1n);
      expect(second?.step.case).toBe("finished");
      if (second?.step.case !== "finished") throw new Error("unreachable");
      expect(second.step.value.status).toBe(TaskStatus.COMPLETED);
      expect(second.step.value.assignedBackend).toBe("scripted");
      expect(second.step.value.output.map((m) => m.role)).toEqual([Role.AGENT]);
      expect(second.counters?.messageCount).toBe(2n);
      const outcome = second.step.value.outcome;
      expect(outcome?.id).toBe(task.outcomeId);
      expect(outcome?.status).toBe(OutcomeStatus.SUCCEEDED);

      // Read-your-writes: the read waits for the projector if it must.
      const read = await store.getOutcome(task.outcomeId);
      expect(read.id).toBe(task.outcomeId);
      expect(read.taskId).toBe(task.id);
      expect(read.summary).toBe(outcome?.summary);
      expect(read.messages.map((m) => m.id)).toEqual(outcome?.messages.map((m) => m.id));
      const listed = await store.listOutcomes({ sessionId }, { pageSize: 10, pageToken: "" });
      expect(listed.items.map((o) => o.id)).toEqual([task.outcomeId]);
      expect(readModel.status().lag).toBe(0n);
    });

    it("a suspension journals its status and signal, and no Outcome", async () => {
      const submitted = await submit("", "wait for me");
      const finished = await store.finishRun(submitted.claim!, approvalSuspension(), "owner_1");
      const journal = await steps(submitted.task.sessionId);
      const last = journal.at(-1)?.record;
      expect(last?.step.case).toBe("finished");
      if (last?.step.case !== "finished") throw new Error("unreachable");
      expect(last.step.value.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(finished.task?.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(last.step.value.signalId).toBe(`${submitted.task.id}:approval`);
      expect(last.step.value.outcome).toBeUndefined();
    });

    it("a refused write journals nothing; a replayed submit journals once", async () => {
      const session = await store.createSession(
        { workspaceId: "default", initialMessages: [] },
        context,
      );
      const sessionId = session.id;
      await submit(sessionId, "once", "key-1");
      const again = await submit(sessionId, "once", "key-1");
      expect(again.replayed).toBe(true);
      await store.closeSession(sessionId, "done", context);
      const before = (await steps(sessionId)).length;
      await expect(submit(sessionId, "after close")).rejects.toThrow();
      expect(await steps(sessionId)).toHaveLength(before);
      const kinds = (await steps(sessionId)).map((s) => s.kind);
      // The first submit ran at once; closing canceled it, which finalized it.
      expect(kinds.filter((k) => k === SUBMITTED_STEP)).toHaveLength(1);
    });

    it("a restarted projector goes on from its durable position, applying nothing twice", async () => {
      const head = (await readJournal(database.kysely, "tasks", { limit: 10_000 })).at(
        -1,
      )?.position;
      await readModel.waitFor(head ?? 0n);
      await readModel.stop();
      const before = readModel.position();
      const submitted = await submit("", "while stopped");
      const finished = await store.finishRun(
        submitted.claim!,
        { status: "completed", messages: [text("done", Role.AGENT)] },
        "owner_1",
      );
      const second = await createTasksReadModel({ database, schema: "tasks" });
      try {
        expect(second.position()).toBe(before);
        const journalHead = (await readJournal(database.kysely, "tasks", { limit: 10_000 })).at(
          -1,
        )?.position;
        await second.waitFor(journalHead ?? 0n, { timeoutMs: 10_000 });
        const count = await database.kysely
          .withSchema("tasks")
          .selectFrom("outcomes" as never)
          .select((eb) => eb.fn.countAll<string>().as("n"))
          .where("task_id" as never, "=", finished.task!.id as never)
          .executeTakeFirstOrThrow();
        expect(Number(count.n)).toBe(1);
        const projected = await database.kysely
          .withSchema("tasks")
          .selectFrom("journal_projection" as never)
          .select("position" as never)
          .where("name" as never, "=", READ_MODEL_PROJECTOR as never)
          .executeTakeFirstOrThrow();
        expect(BigInt((projected as { position: bigint }).position)).toBe(journalHead);
      } finally {
        await second.stop();
        readModel = await createTasksReadModel({ database, schema: "tasks" });
      }
    });

    it("two replicas: gapless positions, each session's steps in order, one Outcome per task", async () => {
      const other = await opened.replica();
      const otherModel = await createTasksReadModel({ database: other, schema: "tasks" });
      const replicaB = new PostgresTaskStore({
        database: other,
        schema: "tasks",
        outbox: createOutboxWriter({ schema: "outbox_j" }),
        leaseMs: 30_000,
        journal: { readModel: otherModel },
      });
      try {
        const sessions = await Promise.all(
          Array.from({ length: 6 }, () =>
            store.createSession({ workspaceId: "default", initialMessages: [] }, context),
          ),
        );
        // Turns of every session, alternately through each replica's store;
        // each turn is claimed at submit or after its predecessor's finish.
        const turns = sessions.map(async (session, s) => {
          const finished: string[] = [];
          let claim: Awaited<ReturnType<typeof store.submitTask>>["claim"];
          for (let i = 0; i < 4; i++) {
            const writer = (s + i) % 2 === 0 ? store : replicaB;
            const submitted = await writer.submitTask(
              { ...newTask(agentId, session.id, `${session.id}:${i}`), createSession: false },
              context,
              "owner_1",
            );
            claim ??= submitted.claim;
          }
          while (claim) {
            const writer = finished.length % 2 === 0 ? replicaB : store;
            const result = await writer.finishRun(
              claim,
              { status: "completed", messages: [text(`done ${claim.task.id}`, Role.AGENT)] },
              "owner_1",
            );
            expect(result.applied).toBe(true);
            finished.push(claim.task.id);
            claim = result.next;
          }
          return finished;
        });
        const finishedPerSession = await Promise.all(turns);
        expect(finishedPerSession.flat()).toHaveLength(24);

        const all = await readJournal(database.kysely, "tasks", { limit: 10_000 });
        // Gapless from 1, in commit order.
        expect(all.map((entry) => entry.position)).toEqual(all.map((_, i) => BigInt(i + 1)));
        for (const [s, session] of sessions.entries()) {
          const records = (await steps(session.id)).map((x) => x.record);
          // 4 submits, 4 finishes; a task's finish after its submit, and
          // finishes in the order the mailbox ran them.
          expect(records.filter((r) => r.step.case === "submitted")).toHaveLength(4);
          const finishes = records.filter((r) => r.step.case === "finished").map((r) => r.taskId);
          expect(finishes).toEqual(finishedPerSession[s]);
          for (const id of finishes) {
            const submittedAt = records.findIndex(
              (r) => r.taskId === id && r.step.case === "submitted",
            );
            const finishedAt = records.findIndex(
              (r) => r.taskId === id && r.step.case === "finished",
            );
            expect(submittedAt).toBeGreaterThanOrEqual(0);
            expect(finishedAt).toBeGreaterThan(submittedAt);
          }
          // Counters only grow along the stream.
          const counts = records.map((r) => r.counters?.messageCount ?? 0n);
          expect([...counts].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual(counts);
        }
        // Both projectors run under one name: each Outcome is written once.
        const head = all.at(-1)?.position ?? 0n;
        await Promise.all([
          readModel.waitFor(head, { timeoutMs: 10_000 }),
          otherModel.waitFor(head, { timeoutMs: 10_000 }),
        ]);
        for (const [s, session] of sessions.entries()) {
          const listed = await replicaB.listOutcomes(
            { sessionId: session.id },
            { pageSize: 100, pageToken: "" },
          );
          expect(listed.items.map((o) => o.taskId).sort()).toEqual(
            [...(finishedPerSession[s] ?? [])].sort(),
          );
        }
      } finally {
        await otherModel.stop();
        if (other !== database) await other.close();
      }
    });
  });
}
