/**
 * Two tasks replicas in distributed owner mode (TRELLIS_TASKS_JOURNAL=owner,
 * each its own process on one PostgreSQL + JetStream), sessions owned under
 * leases. A load of 10 sessions × 10 turns, each session's submits moving
 * between the replicas (hand-offs), and kill -9 of one replica mid-load
 * with turns running on it: the other takes its sessions over once their
 * leases lapse, and every accepted turn completes exactly once, every
 * session's transcript in order, nothing lost, nothing duplicated.
 */
import { TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { eventually, freePort } from "@trellis/testkit";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent, slowEcho, text, textOf } from "./support/fixtures.js";
import { clientsFor, distributedTarget, type TasksClients } from "./support/harness.js";
import { tasksProcesses } from "./support/service-processes.js";

const SESSIONS = 10;
const TURNS = 10;

const terminal = (t: Task) =>
  t.status === TaskStatus.COMPLETED ||
  t.status === TaskStatus.FAILED ||
  t.status === TaskStatus.CANCELED;

describe("two tasks replicas, session owner under leases (kill -9 of one mid-load)", () => {
  const target = distributedTarget();
  const processes = tasksProcesses();

  afterAll(async () => {
    processes.killAll();
    await target.teardown();
  });

  it("loses and duplicates nothing and keeps every session in order", async () => {
    const base = {
      DATABASE_URL: await target.databaseUrl(),
      NATS_URL: process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222",
      TRELLIS_NATS_PREFIX: target.prefix,
      TRELLIS_LOG_LEVEL: "warn",
      TRELLIS_TASKS_LEASE: "1s",
      TRELLIS_TASKS_SWEEP: "200ms",
      TRELLIS_TASKS_JOURNAL: "owner",
    };
    const ports = [await freePort(), await freePort()];
    const replicas = ports.map((port) => clientsFor(`http://127.0.0.1:${port}`));
    const [a, b] = replicas as [TasksClients, TasksClients];
    const first = processes.start({ ...base, PORT: String(ports[0]) });
    await eventually(() => a.sessions.listSessions({}).then(() => true), {
      timeoutMs: 30_000,
      what: "replica A to answer",
    });
    processes.start({ ...base, PORT: String(ports[1]) });
    await eventually(() => b.sessions.listSessions({}).then(() => true), {
      timeoutMs: 30_000,
      what: "replica B to answer",
    });

    const agentId = await createAgent(a, "slow", "scripted", slowEcho(200));
    const sessionIds = await Promise.all(
      Array.from(
        { length: SESSIONS },
        async () => (await a.sessions.createSession({ agentId })).session?.id as string,
      ),
    );
    let killed = false;
    // Submit i of session s goes to replica (s + ⌊i/3⌋) mod 2, so sessions move
    // between replicas; once A is dead, to B. A submit whose answer was lost in
    // the kill is retried on B with the same key: accepted once either way.
    const submit = async (s: number, i: number): Promise<Task> => {
      const request = {
        sessionId: sessionIds[s] as string,
        input: text(`s${s} t${i}`),
        idempotencyKey: `load-${s}-${i}`,
      };
      for (let attempt = 0; ; attempt++) {
        const onA = !killed && (s + Math.floor(i / 3) + attempt) % 2 === 0;
        try {
          const { task } = await (onA ? a : b).tasks.submitTask(request);
          return task as Task;
        } catch (error) {
          if (attempt >= 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };
    const accepted: Task[][] = sessionIds.map(() => []);
    const load = Promise.all(
      sessionIds.map(async (_, s) => {
        for (let i = 0; i < TURNS; i++) accepted[s]?.push(await submit(s, i));
      }),
    );

    const db = new pg.Client({ connectionString: base.DATABASE_URL });
    await db.connect();
    try {
      const aOwner = `%-${first.pid}-%`;
      // Mid-load: some turns done and A holding a live lease with a turn
      // running (sessions move between the replicas, so at a given moment A
      // may hold none), then kill -9 of A at once. B takes a session over only after its lease
      // lapsed and it has work for it.
      await eventually(
        async () => {
          // Read straight from the tables (a listing waits for the projector,
          // which under load can outlast the whole load).
          const { rows } = await db.query<{ completed: string; held: string; running: string }>(
            `select (select count(*) from tasks.tasks where status = $2) as completed,
                    (select count(*) from tasks.session_leases
                      where owner like $1 and expires_at > now()) as held,
                    (select count(*) from tasks.tasks
                      where run_state = 'running' and lease_owner like $1) as running`,
            [aOwner, TaskStatus.COMPLETED],
          );
          const row = rows[0];
          return Number(row?.completed) >= 10 && Number(row?.held) > 0 && Number(row?.running) > 0;
        },
        {
          timeoutMs: 60_000,
          what: "some turns to complete and A to hold a session with a turn running",
        },
      );
      first.kill("SIGKILL");
      killed = true;
      await new Promise((resolve) => first.once("exit", resolve));
      // The tables are projected behind the journal: a turn A finished just
      // before it died may still read "running" until B's projector has
      // applied A's last appends. A listing on B waits for the projector to
      // pass the journal's head; only then is "running on A" what A's journal
      // says (what B must re-queue).
      await b.sessions.listSessions({});
      const running = await db.query<{ id: string }>(
        "select id from tasks.tasks where run_state = 'running' and lease_owner like $1",
        [aOwner],
      );
      const runningOnA = running.rows.map((r) => r.id);
      expect(runningOnA.length).toBeGreaterThan(0);

      await load;
      const all = accepted.flat();
      expect(all).toHaveLength(SESSIONS * TURNS);
      const finished = await eventually(
        async () => {
          const { tasks } = await b.tasks.listTasks({ pageSize: 1000 });
          return tasks.length >= SESSIONS * TURNS && tasks.every(terminal) ? tasks : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 250, what: "every task to reach a terminal state" },
      );
      // Nothing lost, nothing duplicated: exactly the accepted tasks, each completed once.
      expect(finished).toHaveLength(SESSIONS * TURNS);
      expect(new Set(finished.map((t) => t.id))).toEqual(new Set(all.map((t) => t.id)));
      expect(finished.every((t) => t.status === TaskStatus.COMPLETED)).toBe(true);
      const { outcomes } = await b.outcomes.listOutcomes({ pageSize: 1000 });
      expect(outcomes).toHaveLength(SESSIONS * TURNS);
      expect(new Set(outcomes.map((o) => o.id))).toEqual(new Set(finished.map((t) => t.outcomeId)));

      for (const [s, sessionId] of sessionIds.entries()) {
        const { messages } = await b.sessions.listMessages({ sessionId, pageSize: 1000 });
        const { tasks } = await b.tasks.listTasks({ sessionId, pageSize: 1000 });
        // The session's tasks in submission order, one input and one reply each, alternating.
        expect(tasks.map((t) => t.id)).toEqual(accepted[s]?.map((t) => t.id));
        expect(messages).toHaveLength(TURNS * 2);
        expect(messages.map((m) => m.taskId)).toEqual(tasks.flatMap((t) => [t.id, t.id]));
        expect(messages.map((m) => Number(m.position))).toEqual(messages.map((_, i) => i));
        expect(messages.map((m) => textOf(m.message))).toEqual(
          Array.from({ length: TURNS }, (_, i) => [`s${s} t${i}`, `s${s} t${i}`]).flat(),
        );
      }

      // B took A's sessions over (a new fence on each), and A's running
      // turns were re-run by B: every task's turn ran to one completion.
      const taken = await db.query<{ n: string }>(
        "select count(*) as n from tasks.session_leases where owner not like $1 and fence > 1",
        [aOwner],
      );
      expect(Number(taken.rows[0]?.n)).toBeGreaterThan(0);
      const fences = await db.query<{ sessions: string; acquisitions: string; stolen: string }>(
        `select count(*) as sessions, coalesce(sum(fence), 0) as acquisitions,
           count(*) filter (where owner not like $1 and fence > 1) as stolen
         from tasks.session_leases`,
        [aOwner],
      );
      console.info("lease take-over:", {
        runningOnAAtKill: runningOnA.length,
        ...fences.rows[0],
      });
      // Kill -9 after accept: the turns running on A were re-queued by B (its
      // worker's lease expired) and completed exactly once (one Outcome each, above).
      // The log is read through the relay, so wait for the note to arrive.
      for (const id of runningOnA) {
        await eventually(
          async () => {
            const { events } = await b.events.listEvents({ taskId: id });
            const notes = events.flatMap((e) =>
              e.payload?.kind.case === "taskStatusChanged" ? [e.payload.kind.value.reason] : [],
            );
            return notes.some((n) => /re-queued: .*lease expired/.test(n));
          },
          { timeoutMs: 15_000, intervalMs: 250, what: `task ${id}'s re-queue (lease expired)` },
        );
      }
    } finally {
      await db.end();
    }
  }, 240_000);
});
