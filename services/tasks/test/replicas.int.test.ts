/**
 * Several replicas of the tasks service on one PostgreSQL and one JetStream:
 * the mailbox holds across them, cancels and watches cross them, and a
 * replica that shuts down hands its turns back.
 */
import { Role, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, slowEcho, text, textOf, watchUntil } from "./support/fixtures.js";
import { distributedTarget, type TasksHarness } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

// Also with the turn journal on: the step records are appended inside the
// same locked, fenced transactions, and both replicas run the read model's
// projector under one name. And with the session owner under leases
// ("owner"): a session's calls on the other replica take it by a hand-off.
for (const journal of ["false", "true", "owner"] as const) {
  const label = {
    false: ", relational path",
    true: ", journal on",
    owner: ", session owner under leases",
  }[journal];
  describe(`tasks service replicas (PostgreSQL + JetStream${label})`, () => {
    const target = distributedTarget();
    const { executor, probe, gates } = createTestExecutor();
    const env = {
      TRELLIS_TASKS_LEASE: "2s",
      TRELLIS_TASKS_SWEEP: "100ms",
      // Named every time: "false" is the relational path (no longer the default).
      TRELLIS_TASKS_JOURNAL: journal,
    };
    let a: TasksHarness;
    let b: TasksHarness;
    let slow: string;
    let gate: string;

    beforeAll(async () => {
      a = await target.start({ executor, env, replicaId: "replica-a" });
      b = await target.start({ executor, env, replicaId: "replica-b" });
      slow = await createAgent(a, "slow", "scripted", slowEcho(5));
      gate = await createAgent(a, "gate", "gate", {});
    });

    afterAll(async () => {
      await a?.close();
      await b?.close();
      await target.teardown();
    });

    it("never runs two turns of one session at once, whichever replica takes the submit", async () => {
      const sessions = await Promise.all(
        Array.from(
          { length: 5 },
          async () => (await a.sessions.createSession({ agentId: slow })).session?.id as string,
        ),
      );
      const submits = sessions.flatMap((sessionId) =>
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? a : b).tasks.submitTask({ sessionId, input: text(`${sessionId}:${i}`) }),
        ),
      );
      const tasks = (await Promise.all(submits)).map((r) => r.task as Task);
      const done = await Promise.all(tasks.map((t, i) => watchUntil(i % 2 === 0 ? b : a, t.id)));
      expect(done.every((d) => d.task.status === TaskStatus.COMPLETED)).toBe(true);
      expect(probe.maxConcurrentPerSession()).toBe(1);
      for (const sessionId of sessions) {
        const { messages } = await a.sessions.listMessages({ sessionId, pageSize: 100 });
        expect(messages).toHaveLength(20);
        for (let i = 0; i < 20; i += 2) {
          expect(messages[i]?.message?.role).toBe(Role.USER);
          expect(messages[i + 1]?.message?.role).toBe(Role.ASSISTANT);
          expect(textOf(messages[i + 1]?.message)).toBe(textOf(messages[i]?.message));
        }
      }
      // Every task has exactly its one Outcome, readable from either replica
      // (journal on: projected once although both replicas run the projector).
      for (const [i, task] of done.map((d) => d.task).entries()) {
        const reader = i % 2 === 0 ? a : b;
        const { outcome } = await reader.outcomes.getOutcome({ outcomeId: task.outcomeId });
        expect(outcome?.taskId).toBe(task.id);
      }
      for (const sessionId of sessions) {
        const { outcomes } = await b.outcomes.listOutcomes({ sessionId, pageSize: 100 });
        expect(outcomes).toHaveLength(10);
      }
    });

    it("cancels a turn running on the other replica (the backend is aborted)", async () => {
      const { session } = await a.sessions.createSession({ agentId: gate });
      const { task } = await a.tasks.submitTask({
        sessionId: session?.id as string,
        input: text("long"),
      });
      const taskId = task?.id as string;
      await gates.started(taskId);
      // The gate is never opened: the turn would run on forever unless the
      // cancel asked through b reaches a's runner and aborts its backend.
      await b.tasks.cancelTask({ taskId });
      const { task: final } = await watchUntil(b, taskId, (t) => t.outcomeId !== "");
      expect(final.status).toBe(TaskStatus.CANCELED);
      // The turn's execution ended "cancelled" (the abort reached it), not "completed".
      expect(probe.ended(taskId)).toBe("cancelled");
      const { messages } = await a.sessions.listMessages({ sessionId: final.sessionId });
      expect(messages.map((m) => textOf(m.message))).not.toContain("gate opened");
      // The log says so: one task.canceled, after the request, and the backend
      // confirmed it stopped (a backend that ignores the abort is given up on
      // after the cancel grace instead, with another reason).
      const events = await eventually(
        async () => {
          const all = (await a.events.listEvents({ taskId, limit: 1000 })).events;
          return all.some((e) => e.kind === "task.canceled") ? all : undefined;
        },
        { what: `task.canceled of ${taskId}`, timeoutMs: 20_000 },
      );
      const kinds = events.map((e) => e.kind);
      expect(kinds.filter((k) => k === "task.canceled")).toHaveLength(1);
      expect(kinds).not.toContain("task.completed");
      expect(kinds.indexOf("user.cancel_requested")).toBeLessThan(kinds.indexOf("task.canceled"));
      const canceled = events.find((e) => e.kind === "task.canceled");
      const reason =
        canceled?.payload?.kind.case === "taskStatusChanged"
          ? canceled.payload.kind.value.reason
          : "";
      expect(reason).toMatch(/\(the backend confirmed it stopped\)$/);
    });

    it("hands its turns back on shutdown: re-run elsewhere when safe, else FAILED worker_lost", async () => {
      const c = await target.start({
        executor,
        env: { ...env, TRELLIS_TASKS_SHUTDOWN_GRACE: "50ms", TRELLIS_TASKS_CANCEL_GRACE: "50ms" },
        replicaId: "replica-c",
      });
      const safeGate = await createAgent(c, "safe-gate", "gate", {}, { safeToRetry: true });
      const unsafe = await c.tasks.submitTask({
        sessionId: (await c.sessions.createSession({ agentId: gate })).session?.id as string,
        input: text("unsafe"),
      });
      const safe = await c.tasks.submitTask({
        sessionId: (await c.sessions.createSession({ agentId: safeGate })).session?.id as string,
        input: text("safe"),
      });
      await gates.started(unsafe.task?.id as string);
      await gates.started(safe.task?.id as string);
      await c.close();
      const { task: lost } = await watchUntil(a, unsafe.task?.id as string);
      expect(lost.status).toBe(TaskStatus.FAILED);
      expect(lost.failure?.category).toBe("worker_lost");
      // The safe one is picked up by a surviving replica's sweep and runs again.
      await eventually(async () => probe.starts(safe.task?.sessionId as string).length === 2, {
        what: "the safe turn to run again",
      });
      gates.open(safe.task?.id as string);
      const { task: rerun } = await watchUntil(b, safe.task?.id as string);
      expect(rerun.status).toBe(TaskStatus.COMPLETED);
      const { messages } = await a.sessions.listMessages({
        sessionId: safe.task?.sessionId as string,
      });
      expect(messages.map((m) => textOf(m.message))).toEqual(["safe", "gate opened"]);
    });
  });
}
