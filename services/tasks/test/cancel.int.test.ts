/**
 * Cancellation that really stops (PostgreSQL + JetStream):
 * - a running task is CANCELED only once its worker confirmed the backend
 *   stopped — until then it stays WORKING with its cancel requested
 *   (`canceled_at`, `user.cancel_requested`, no `task.canceled`);
 * - a backend that never stops is given up on after the cancel grace, and
 *   `task.canceled` says so;
 * - canceling a task cancels the tasks it delegated to (`parent_task_id`),
 *   down the tree, and leaves finished ones alone.
 */
import { Code } from "@connectrpc/connect";
import { type Event, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPROVAL_GRAPH, createAgent, expectReason, text, watchUntil } from "./support/fixtures.js";
import { distributedTarget, type TasksHarness } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

describe("cancellation (PostgreSQL + JetStream)", () => {
  const target = distributedTarget();
  const { executor, gates } = createTestExecutor();
  /** Long grace: the test decides when the stubborn backend stops. */
  let patient: TasksHarness;
  /** Short grace: a backend that does not stop is given up on. */
  let hasty: TasksHarness;
  let gate: string;
  let stubborn: string;
  let waiter: string;
  const toRelease: string[] = [];

  beforeAll(async () => {
    const env = { TRELLIS_TASKS_LEASE: "5s", TRELLIS_TASKS_SWEEP: "200ms" };
    patient = await target.start({
      executor,
      env: { ...env, TRELLIS_TASKS_CANCEL_GRACE: "120s" },
      replicaId: "cancel-patient",
    });
    hasty = await target.start({
      executor,
      env: { ...env, TRELLIS_TASKS_CANCEL_GRACE: "300ms" },
      replicaId: "cancel-hasty",
    });
    gate = await createAgent(patient, "gate", "gate", {});
    stubborn = await createAgent(patient, "stubborn", "gate", { ignore_abort: true });
    waiter = await createAgent(patient, "waiter", "scripted", APPROVAL_GRAPH);
  }, 60_000);

  afterAll(async () => {
    for (const id of toRelease) gates.open(id);
    await patient?.close();
    await hasty?.close();
    await target.teardown();
  });

  async function events(h: TasksHarness, taskId: string): Promise<Event[]> {
    return (await h.events.listEvents({ taskId, limit: 1000 })).events;
  }

  /**
   * The task's events once its `task.canceled` is in the log: the log is
   * written by the outbox relay after the commit the RPC answered from.
   */
  async function eventsWhenCanceled(h: TasksHarness, taskId: string): Promise<Event[]> {
    return eventually(
      async () => {
        const all = await events(h, taskId);
        return all.some((e) => e.kind === "task.canceled") ? all : undefined;
      },
      { what: `task.canceled of ${taskId}`, timeoutMs: 20_000 },
    );
  }

  function reasonOf(event: Event | undefined): string {
    return event?.payload?.kind.case === "taskStatusChanged" ? event.payload.kind.value.reason : "";
  }

  async function running(h: TasksHarness, agentId: string, parentTaskId = ""): Promise<Task> {
    const { session } = await h.sessions.createSession({ agentId });
    const { task } = await h.tasks.submitTask({
      sessionId: session?.id as string,
      input: text("long"),
      parentTaskId,
    });
    await gates.started(task?.id as string);
    return task as Task;
  }

  /** A parent task waiting (for approval) in its own session, free to delegate. */
  async function waitingParent(): Promise<{ sessionId: string; parentId: string }> {
    const { session } = await patient.sessions.createSession({ agentId: waiter });
    const sessionId = session?.id as string;
    const { task: parent } = await patient.tasks.submitTask({ sessionId, input: text("delegate") });
    const parentId = parent?.id as string;
    await watchUntil(patient, parentId, (t) => t.status === TaskStatus.INPUT_REQUIRED);
    return { sessionId, parentId };
  }

  it("records CANCELED only after the backend confirmed it stopped", async () => {
    const task = await running(patient, stubborn);
    toRelease.push(task.id);
    // Asked through the other replica: the cancel reaches the runner by NOTIFY.
    const answer = hasty.tasks.cancelTask({ taskId: task.id, reason: "enough" });
    // Requested, not recorded: the backend is still running.
    const requested = await eventually(
      async () => {
        const { task: t } = await patient.tasks.getTask({ taskId: task.id });
        return t?.canceledAt !== undefined ? t : undefined;
      },
      { what: "the cancel request", timeoutMs: 20_000 },
    );
    expect(requested.status).toBe(TaskStatus.WORKING);
    await eventually(
      async () => {
        const kinds = (await events(patient, task.id)).map((e) => e.kind);
        return kinds.includes("user.cancel_requested") ? kinds : undefined;
      },
      { what: "user.cancel_requested", timeoutMs: 20_000 },
    );
    // Still not canceled while the backend has not stopped (it ignores the abort).
    await new Promise((r) => setTimeout(r, 500));
    expect((await patient.tasks.getTask({ taskId: task.id })).task?.status).toBe(
      TaskStatus.WORKING,
    );
    expect((await events(patient, task.id)).map((e) => e.kind)).not.toContain("task.canceled");

    // The backend stops: now it is recorded, and the cancel's answer says so.
    gates.open(task.id);
    const { task: answered } = await answer;
    expect(answered?.status).toBe(TaskStatus.CANCELED);
    const all = await eventsWhenCanceled(patient, task.id);
    const canceled = all.filter((e) => e.kind === "task.canceled");
    expect(canceled).toHaveLength(1);
    expect(reasonOf(canceled[0])).toBe("enough (the backend confirmed it stopped)");
    const kinds = all.map((e) => e.kind);
    expect(kinds.indexOf("user.cancel_requested")).toBeLessThan(kinds.indexOf("task.canceled"));
    // The backend's late "completed" did not replace it.
    expect(kinds).not.toContain("task.completed");
    // Canceling again changes nothing.
    const again = await patient.tasks.cancelTask({ taskId: task.id });
    expect(again.task?.status).toBe(TaskStatus.CANCELED);
  }, 60_000);

  it("gives a backend that never stops up after the cancel grace, and says so", async () => {
    const task = await running(hasty, stubborn);
    toRelease.push(task.id);
    const { task: answered } = await hasty.tasks.cancelTask({ taskId: task.id });
    expect(answered?.status).toBe(TaskStatus.CANCELED);
    const canceled = (await eventsWhenCanceled(hasty, task.id)).filter(
      (e) => e.kind === "task.canceled",
    );
    expect(canceled).toHaveLength(1);
    expect(reasonOf(canceled[0])).toBe(
      "canceled by request (the backend did not confirm it stopped: the cancel grace period ran out)",
    );
    // The session's mailbox is free again.
    const next = await hasty.tasks.submitTask({
      sessionId: task.sessionId,
      agentId: "agent_echo",
      input: text("after"),
    });
    expect((await watchUntil(hasty, next.task?.id as string)).task.status).toBe(
      TaskStatus.COMPLETED,
    );
  }, 60_000);

  it("cascades to the tasks it delegated to, down the tree, leaving finished ones alone", async () => {
    // The parent waits (for approval) while its delegates work.
    const { parentId } = await waitingParent();
    const child = await running(patient, gate, parentId);
    const grandchild = await running(hasty, gate, child.id);
    const { session: doneSession } = await patient.sessions.createSession({});
    const { task: finished } = await patient.tasks.submitTask({
      sessionId: doneSession?.id as string,
      input: text("quick"),
      parentTaskId: parentId,
    });
    await watchUntil(patient, finished?.id as string);

    const { task: answered } = await patient.tasks.cancelTask({ taskId: parentId });
    expect(answered?.status).toBe(TaskStatus.CANCELED);
    for (const id of [child.id, grandchild.id]) {
      const { task } = await watchUntil(patient, id, (t) => t.outcomeId !== "");
      expect({ id, status: task.status }).toEqual({ id, status: TaskStatus.CANCELED });
      const delegateEvents = await eventsWhenCanceled(patient, id);
      const canceled = delegateEvents.find((e) => e.kind === "task.canceled");
      // Running delegates were stopped, not abandoned.
      expect(reasonOf(canceled)).toMatch(
        /^its parent task task_\w+ was canceled \(the backend confirmed it stopped\)$/,
      );
      const requested = delegateEvents.find((e) => e.kind === "user.cancel_requested");
      expect(JSON.stringify(requested?.payload)).toContain("was canceled");
    }
    expect((await patient.tasks.getTask({ taskId: finished?.id as string })).task?.status).toBe(
      TaskStatus.COMPLETED,
    );
    // The canceled parent delegates nothing more.
    const late = await expectReason(
      patient.tasks.submitTask({
        sessionId: doneSession?.id as string,
        input: text("too late"),
        parentTaskId: parentId,
      }),
      "conflict",
    );
    expect(late.code).toBe(Code.Aborted);
    // A finished task is still refused, as before.
    const error = await expectReason(
      patient.tasks.cancelTask({ taskId: finished?.id as string }),
      "invalid_state_transition",
    );
    expect(error.code).toBe(Code.FailedPrecondition);
  }, 90_000);

  it("closing a session cancels what its open tasks delegated to", async () => {
    const { sessionId, parentId } = await waitingParent();
    const child = await running(hasty, gate, parentId);
    await patient.sessions.closeSession({ sessionId, reason: "done" });
    expect((await patient.tasks.getTask({ taskId: parentId })).task?.status).toBe(
      TaskStatus.CANCELED,
    );
    const { task } = await watchUntil(patient, child.id, (t) => t.outcomeId !== "");
    expect(task.status).toBe(TaskStatus.CANCELED);
  }, 60_000);
});
