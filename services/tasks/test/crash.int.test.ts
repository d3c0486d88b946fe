/**
 * kill -9 of the tasks service with 100 tasks in flight (distributed mode:
 * its own process on PostgreSQL + JetStream). After a restart every accepted
 * task reaches a terminal state, none is run twice into the transcript, and
 * every session's transcript is in order.
 */
import { TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { eventually, freePort } from "@trellis/testkit";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, slowEcho, text, textOf } from "./support/fixtures.js";
import { clientsFor, distributedTarget, type TasksClients } from "./support/harness.js";
import { tasksProcesses } from "./support/service-processes.js";

// Also with the turn journal on: the Outcome of every task is projected
// once, whichever process wrote its step record.
for (const journal of [false, true]) {
  describe(`tasks service crash (kill -9 mid-flight${journal ? ", journal on" : ""})`, () => {
    const target = distributedTarget();
    const processes = tasksProcesses();

    afterAll(async () => {
      processes.killAll();
      await target.teardown();
    });

    it("recovers every accepted task after kill -9, without duplicates, transcripts in order", async () => {
      const port = await freePort();
      const env = {
        DATABASE_URL: await target.databaseUrl(),
        NATS_URL: process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222",
        TRELLIS_NATS_PREFIX: target.prefix,
        PORT: String(port),
        TRELLIS_LOG_LEVEL: "warn",
        TRELLIS_TASKS_LEASE: "1s",
        TRELLIS_TASKS_SWEEP: "200ms",
        TRELLIS_TASKS_JOURNAL: String(journal),
      };
      const clients: TasksClients = clientsFor(`http://127.0.0.1:${port}`);
      const first = await processes.start(env);
      await eventually(() => clients.sessions.listSessions({}).then(() => true), {
        timeoutMs: 20_000,
        what: "the tasks service to answer",
      });

      // Turns long enough (300 ms) that each session still has queued work when the
      // kill comes, however slowly this machine submits under load.
      const agentId = await createAgent(clients, "slow", "scripted", slowEcho(300));
      const sessionIds = await Promise.all(
        Array.from(
          { length: 10 },
          async () => (await clients.sessions.createSession({ agentId })).session?.id as string,
        ),
      );
      const accepted: Task[] = [];
      await Promise.all(
        sessionIds.map(async (sessionId, s) => {
          for (let i = 0; i < 10; i++) {
            const { task } = await clients.tasks.submitTask({
              sessionId,
              input: text(`s${s} t${i}`),
            });
            accepted.push(task as Task);
          }
        }),
      );
      expect(accepted).toHaveLength(100);

      // Let some turns finish, then kill the service without warning.
      await eventually(
        async () => {
          const { tasks } = await clients.tasks.listTasks({
            statuses: [TaskStatus.COMPLETED],
            pageSize: 1000,
          });
          return tasks.length >= 15;
        },
        { timeoutMs: 20_000, what: "some turns to complete" },
      );
      first.kill("SIGKILL");
      await new Promise((resolve) => first.once("exit", resolve));
      // The kill really happened mid-flight: turns were running and queued.
      const db = new pg.Client({ connectionString: env.DATABASE_URL });
      await db.connect();
      const { rows } = await db.query<{ running: string; open: string }>(
        `select count(*) filter (where run_state = 'running') as running,
              count(*) filter (where status not in (5, 6, 7)) as open
       from tasks.tasks`,
      );
      await db.end();
      const lost = Number(rows[0]?.running);
      expect(lost).toBeGreaterThan(0);
      expect(Number(rows[0]?.open)).toBeGreaterThan(lost);

      await processes.start(env);
      const finished = await eventually(
        async () => {
          const { tasks } = await clients.tasks.listTasks({ pageSize: 1000 });
          const open = tasks.filter(
            (t) =>
              t.status !== TaskStatus.COMPLETED &&
              t.status !== TaskStatus.FAILED &&
              t.status !== TaskStatus.CANCELED,
          );
          return tasks.length >= 100 && open.length === 0 ? tasks : undefined;
        },
        { timeoutMs: 40_000, intervalMs: 200, what: "every task to reach a terminal state" },
      );
      expect(finished).toHaveLength(100);
      // Scripted agents are safe to retry: every lost turn ran again and completed.
      expect(finished.every((t) => t.status === TaskStatus.COMPLETED)).toBe(true);
      expect(new Set(finished.map((t) => t.id))).toEqual(new Set(accepted.map((t) => t.id)));
      // Exactly one Outcome per task, the one the task names.
      const { outcomes } = await clients.outcomes.listOutcomes({ pageSize: 1000 });
      expect(outcomes).toHaveLength(100);
      expect(new Set(outcomes.map((o) => o.id))).toEqual(new Set(finished.map((t) => t.outcomeId)));
      // The turns that were running when the process died were re-queued, with a stated reason.
      const requeued = await Promise.all(
        finished.map(async (t) => {
          const { events } = await clients.events.listEvents({ taskId: t.id });
          return events.filter((e) => e.kind === "task.status_changed");
        }),
      );
      const notes = requeued.flat();
      expect(notes.length).toBeGreaterThanOrEqual(lost);
      for (const note of notes) {
        const payload = note.payload?.kind;
        expect(payload?.case === "taskStatusChanged" && payload.value.reason).toMatch(
          /re-queued: .*lease expired/,
        );
      }

      for (const sessionId of sessionIds) {
        const { messages } = await clients.sessions.listMessages({ sessionId, pageSize: 1000 });
        const { tasks } = await clients.tasks.listTasks({ sessionId, pageSize: 1000 });
        // One input and one reply per task, in arrival order, alternating.
        expect(messages).toHaveLength(tasks.length * 2);
        expect(messages.map((m) => m.taskId)).toEqual(tasks.flatMap((t) => [t.id, t.id]));
        expect(messages.map((m) => Number(m.position))).toEqual(messages.map((_, i) => i));
        for (const task of tasks) {
          const own = messages.filter((m) => m.taskId === task.id);
          expect(own.map((m) => textOf(m.message))).toEqual([
            textOf(task.input),
            textOf(task.input),
          ]);
          expect(task.output).toHaveLength(1);
        }
      }
    }, 60_000);
  });
}
