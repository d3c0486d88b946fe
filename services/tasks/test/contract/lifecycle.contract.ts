/**
 * Tasks service contract: a task's lifecycle (submit, run, suspend, resume,
 * cancel, fail) and submit-and-wait (wait_ms).
 */
import { Code } from "@connectrpc/connect";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { OutcomeStatus } from "@trellis/contracts/tasks";
import { errorDetailOf } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { beforeAll, describe, expect, it } from "vitest";
import { expectReason, text, textOf, watchUntil } from "../support/fixtures.js";
import type { TasksHarness } from "../support/harness.js";
import type { TasksSuite } from "./suite.js";

export function describeLifecycle(suite: TasksSuite): void {
  const { gates, newSession, transcript, eventKinds } = suite;
  // The harness exists once the suite's beforeAll ran; bind it for the tests below.
  let h: TasksHarness;
  let agents: TasksSuite["agents"];
  beforeAll(() => {
    h = suite.h;
    agents = suite.agents;
  });

  describe("lifecycle", () => {
    it("runs a submitted task to COMPLETED with the default echo agent", async () => {
      const sessionId = await newSession();
      const { task, replayed } = await h.tasks.submitTask({ sessionId, input: text("hello") });
      expect(replayed).toBe(false);
      expect([TaskStatus.SUBMITTED, TaskStatus.WORKING]).toContain(task?.status);
      const { task: done } = await watchUntil(h, task?.id as string);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.output.map(textOf)).toEqual(["hello"]);
      expect(done.startedAt).toBeDefined();
      expect(done.completedAt).toBeDefined();
      expect(done.canceledAt).toBeUndefined();
      expect(done.agentId).toBe("agent_echo");
      const { outcome } = await h.outcomes.getOutcome({ outcomeId: done.outcomeId });
      expect(outcome?.status).toBe(OutcomeStatus.SUCCEEDED);
      expect(outcome?.summary).toBe("hello");
      const messages = await transcript(sessionId);
      expect(
        messages.map((m) => [m.position, m.message?.role, textOf(m.message), m.taskId]),
      ).toEqual([
        [0n, Role.USER, "hello", done.id],
        [1n, Role.ASSISTANT, "hello", done.id],
      ]);
    });

    it("emits the Harn events of a turn in order, per resource without gaps", async () => {
      const sessionId = await newSession();
      const { task } = await h.tasks.submitTask({ sessionId, input: text("events") });
      await watchUntil(h, task?.id as string);
      const taskEvents = await eventKinds({ taskId: task?.id as string }, 5);
      expect(taskEvents.map((e) => e.kind)).toEqual([
        "task.submitted",
        "task.started",
        "user.message",
        "agent.message",
        "task.completed",
      ]);
      expect(taskEvents.map((e) => e.sequence)).toEqual([1n, 2n, 3n, 4n, 5n]);
      for (const [i, e] of taskEvents.entries()) {
        expect(e.resource).toMatchObject({ object: "task", id: task?.id });
        expect(e.sessionId).toBe(sessionId);
        expect(e.taskId).toBe(task?.id);
        expect(e.workspaceId).toBe("default");
        expect(e.previousEventId).toBe(i === 0 ? "" : taskEvents[i - 1]?.id);
      }
      const started = taskEvents[1]?.payload?.kind;
      expect(started?.case).toBe("taskStatusChanged");
      if (started?.case === "taskStatusChanged") {
        expect(started.value.status).toBe(TaskStatus.WORKING);
        expect(started.value.previousStatus).toBe(TaskStatus.SUBMITTED);
      }
      // Submitted and started name the task's agent; the terminal event does not need to.
      const agentOf = (e: (typeof taskEvents)[number] | undefined) =>
        e?.payload?.kind.case === "taskStatusChanged" ? e.payload.kind.value.agentId : undefined;
      expect(task?.agentId).not.toBe("");
      expect([agentOf(taskEvents[0]), agentOf(taskEvents[1])]).toEqual([
        task?.agentId,
        task?.agentId,
      ]);
      const reply = taskEvents[3]?.payload?.kind;
      expect(reply?.case === "messageAppended" && reply.value.position).toBe(1n);
      const sessionEvents = await eventKinds({ sessionId }, 6);
      expect(sessionEvents[0]?.kind).toBe("session.created");
      expect(sessionEvents[0]?.resource).toMatchObject({ object: "session", id: sessionId });
      const { session } = await h.sessions.getSession({ sessionId });
      expect(session?.lastEventId).toBe(sessionEvents.at(-1)?.id);
    });

    it("suspends for input, resumes on the signal and completes; a delivery id is applied once", async () => {
      const sessionId = await newSession(agents.approval);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("Ada") });
      const { task: waiting, seen } = await watchUntil(h, task?.id as string, () => false, {
        untilSettled: true,
      });
      expect(seen.at(-1)).toBe(TaskStatus.INPUT_REQUIRED);
      expect(waiting.suspension?.signalId).toBe(`${task?.id}:approval`);
      expect(waiting.suspension?.metadata).toEqual({ tool: "deploy" });
      expect(waiting.suspension?.pendingMessages.map(textOf)).toEqual(["Hello Ada"]);
      // harness-chat §8.1: the pending message is in the output and the transcript already.
      expect(waiting.output.map(textOf)).toEqual(["Hello Ada"]);
      expect((await transcript(sessionId)).map((m) => textOf(m.message))).toEqual([
        "Ada",
        "Hello Ada",
      ]);
      // The suspended task does not hold the mailbox: another turn runs meanwhile.
      const other = await h.tasks.submitTask({
        sessionId,
        agentId: "agent_echo",
        input: text("meanwhile"),
      });
      expect((await watchUntil(h, other.task?.id as string)).task.status).toBe(
        TaskStatus.COMPLETED,
      );

      // ListTasks finds the one task waiting for the signal, and nothing after it resumed.
      const waitingFor = async () =>
        (
          await h.tasks.listTasks({ waitingSignalId: waiting.suspension?.signalId as string })
        ).tasks.map((t) => t.id);
      expect(await waitingFor()).toEqual([task?.id]);

      const first = await h.signals.deliver({
        signalId: waiting.suspension?.signalId as string,
        payload: {
          kind: {
            case: "structValue",
            value: { fields: { approved: { kind: { case: "boolValue", value: true } } } },
          },
        },
        deliveryId: "approval-1",
      });
      expect(first).toMatchObject({ taskId: task?.id, duplicate: false });
      const again = await h.signals.deliver({
        signalId: waiting.suspension?.signalId as string,
        deliveryId: "approval-1",
      });
      expect(again.duplicate).toBe(true);
      const { task: done } = await watchUntil(h, task?.id as string);
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(await waitingFor()).toEqual([]);
      expect(done.output.map(textOf)).toEqual(["Hello Ada", 'approved: {"approved":true}']);
      expect(done.suspension).toBeUndefined();
      const kinds = (await eventKinds({ taskId: task?.id as string }, 9)).map((e) => e.kind);
      expect(kinds).toEqual([
        "task.submitted",
        "task.started",
        "user.message",
        "agent.message",
        "task.input_required",
        "user.tool_confirmation",
        "task.started",
        "agent.message",
        "task.completed",
      ]);
      // Transcript order: the pending message at suspension; the resumed turn's
      // reply lands after the turn that ran meanwhile.
      const roles = (await transcript(sessionId)).map((m) => textOf(m.message));
      expect(roles).toEqual([
        "Ada",
        "Hello Ada",
        "meanwhile",
        "meanwhile",
        'approved: {"approved":true}',
      ]);
      await expectReason(
        h.signals.deliver({
          signalId: waiting.suspension?.signalId as string,
          deliveryId: "approval-2",
        }),
        "resource_not_found",
      );
    });

    it("reports an unknown signal as resource_not_found", async () => {
      const error = await expectReason(
        h.signals.deliver({ signalId: "task_nope:approval" }),
        "resource_not_found",
      );
      expect(error.code).toBe(Code.NotFound);
    });

    it("fails a task whose agent raises, with the failure and a FAILED outcome", async () => {
      const sessionId = await newSession(agents.failing);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("go") });
      const { task: failed } = await watchUntil(h, task?.id as string);
      expect(failed.status).toBe(TaskStatus.FAILED);
      expect(failed.failure).toMatchObject({
        category: "provider_invalid_request",
        message: "the model refused",
        retryable: false,
      });
      const { outcome } = await h.outcomes.getOutcome({ outcomeId: failed.outcomeId });
      expect(outcome?.status).toBe(OutcomeStatus.FAILED);
      const kinds = (await eventKinds({ taskId: failed.id }, 4)).map((e) => e.kind);
      expect(kinds.at(-1)).toBe("task.failed");
    });

    it("fails (never leaves WORKING) a task whose backend throws", async () => {
      const sessionId = await newSession(agents.broken);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("go") });
      const { task: failed } = await watchUntil(h, task?.id as string);
      expect(failed.status).toBe(TaskStatus.FAILED);
      expect(failed.failure?.category).toBe("internal_error");
      expect(failed.failure?.message).toContain("backend exploded");
    });

    it("cancels a suspended task: CANCELED stays, open tool calls get a synthetic result", async () => {
      const sessionId = await newSession(agents.toolAuth);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("deploy it") });
      const { task: waiting } = await watchUntil(h, task?.id as string, () => false, {
        untilSettled: true,
      });
      expect(waiting.status).toBe(TaskStatus.AUTH_REQUIRED);
      expect(waiting.suspension?.signalId).toBe(`${task?.id}:oauth`);
      const { task: canceled } = await h.tasks.cancelTask({
        taskId: task?.id as string,
        reason: "changed my mind",
      });
      expect(canceled?.status).toBe(TaskStatus.CANCELED);
      expect(canceled?.canceledAt).toBeDefined();
      expect(canceled?.completedAt).toBeUndefined();
      // Idempotent, and nothing replaces CANCELED.
      expect((await h.tasks.cancelTask({ taskId: task?.id as string })).task?.status).toBe(
        TaskStatus.CANCELED,
      );
      await expectReason(
        h.signals.deliver({ signalId: `${task?.id}:oauth`, deliveryId: "late" }),
        "resource_not_found",
      );
      const { task: after } = await h.tasks.getTask({ taskId: task?.id as string });
      expect(after?.status).toBe(TaskStatus.CANCELED);
      const messages = (await transcript(sessionId)).map((m) => m.message);
      expect(messages.map((m) => m?.role)).toEqual([Role.USER, Role.ASSISTANT, Role.TOOL]);
      expect(messages[1]?.toolCalls[0]?.id).toBe("call_deploy");
      expect(messages[2]?.toolCallId).toBe("call_deploy");
      expect(textOf(messages[2])).toContain("interrupted");
      const { outcome } = await h.outcomes.getOutcome({ outcomeId: after?.outcomeId as string });
      expect(outcome?.status).toBe(OutcomeStatus.CANCELED);
      const kinds = (await eventKinds({ taskId: task?.id as string }, 8)).map((e) => e.kind);
      // The tool call joined the transcript at suspension (harness-chat §8.1).
      expect(kinds.slice(-5)).toEqual([
        "agent.message",
        "task.auth_required",
        "user.cancel_requested",
        "agent.tool_result",
        "task.canceled",
      ]);
    });

    it("cancels through a {cancel: true} signal", async () => {
      const sessionId = await newSession(agents.approval);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("x") });
      const { task: waiting } = await watchUntil(h, task?.id as string, () => false, {
        untilSettled: true,
      });
      const result = await h.signals.deliver({
        signalId: waiting.suspension?.signalId as string,
        payload: {
          kind: {
            case: "structValue",
            value: { fields: { cancel: { kind: { case: "boolValue", value: true } } } },
          },
        },
      });
      expect(result.task?.status).toBe(TaskStatus.CANCELED);
    });

    it("cancels a running task: the backend is aborted and the next turn waits for it", async () => {
      const sessionId = await newSession(agents.gate);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("long") });
      await gates.started(task?.id as string);
      const { task: canceled } = await h.tasks.cancelTask({ taskId: task?.id as string });
      expect(canceled?.status).toBe(TaskStatus.CANCELED);
      const { task: final } = await watchUntil(h, task?.id as string, (t) => t.outcomeId !== "");
      expect(final.status).toBe(TaskStatus.CANCELED);
      expect(final.completedAt).toBeUndefined();
      // A late success cannot replace CANCELED.
      gates.open(task?.id as string);
      const next = await h.tasks.submitTask({
        sessionId,
        agentId: "agent_echo",
        input: text("after"),
      });
      expect((await watchUntil(h, next.task?.id as string)).task.status).toBe(TaskStatus.COMPLETED);
      expect((await h.tasks.getTask({ taskId: task?.id as string })).task?.status).toBe(
        TaskStatus.CANCELED,
      );
    });

    it("refuses to cancel a completed task (invalid_state_transition)", async () => {
      const sessionId = await newSession();
      const { task } = await h.tasks.submitTask({ sessionId, input: text("done") });
      await watchUntil(h, task?.id as string);
      const error = await expectReason(
        h.tasks.cancelTask({ taskId: task?.id as string }),
        "invalid_state_transition",
      );
      expect(error.code).toBe(Code.FailedPrecondition);
    });
  });

  describe("submit and wait (wait_ms)", () => {
    it("answers with the settled task: completed, or suspended for input", async () => {
      const sessionId = await newSession();
      const { task, replayed } = await h.tasks.submitTask({
        sessionId,
        input: text("quick"),
        waitMs: 10_000,
      });
      expect(replayed).toBe(false);
      expect(task?.status).toBe(TaskStatus.COMPLETED);
      expect(task?.output.map(textOf)).toEqual(["quick"]);
      expect(task?.outcomeId).not.toBe("");

      const approval = await newSession(agents.approval);
      const { task: suspended } = await h.tasks.submitTask({
        sessionId: approval,
        input: text("Ada"),
        waitMs: 10_000,
      });
      expect(suspended?.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(suspended?.suspension?.pendingMessages.map(textOf)).toEqual(["Hello Ada"]);
      // The same task WatchTask reports.
      const { task: watched } = await watchUntil(h, suspended?.id as string, () => true);
      expect(watched).toEqual(suspended);
    });

    it("waits for a running turn to end; a wait that runs out (or meets the caller's deadline) answers with the task as it stands", async () => {
      const sessionId = await newSession(agents.gate);
      // Runs out: the gate is still closed.
      const { task: running } = await h.tasks.submitTask({
        sessionId,
        input: text("slow"),
        waitMs: 150,
      });
      expect([TaskStatus.SUBMITTED, TaskStatus.WORKING]).toContain(running?.status);
      const first = running?.id as string;
      await gates.started(first);
      // A caller's deadline shorter than the wait: answered before it, with
      // the task it submitted (queued behind the first), not DEADLINE_EXCEEDED.
      const hurried = await h.tasks.submitTask(
        { sessionId, input: text("hurried"), waitMs: 20_000 },
        { timeoutMs: 3_000 },
      );
      expect(hurried.task?.status).toBe(TaskStatus.SUBMITTED);
      // Queued behind both: answered once the turns before it ended and it ran.
      const queued = h.tasks.submitTask({ sessionId, input: text("next"), waitMs: 20_000 });
      const third = await eventually(
        async () => {
          const { tasks } = await h.tasks.listTasks({ sessionId });
          return tasks.find((t) => t.id !== first && t.id !== hurried.task?.id)?.id;
        },
        { what: "the queued task" },
      );
      gates.open(first);
      await gates.started(hurried.task?.id as string);
      gates.open(hurried.task?.id as string);
      await gates.started(third);
      gates.open(third);
      const { task: done } = await queued;
      expect(done?.id).toBe(third);
      expect(done?.status).toBe(TaskStatus.COMPLETED);
      expect(done?.output.map(textOf)).toEqual(["gate opened"]);
      expect((await h.tasks.getTask({ taskId: first })).task?.status).toBe(TaskStatus.COMPLETED);
    });

    it("replays with another wait under the same key; refuses a wait over 60 s", async () => {
      const sessionId = await newSession();
      const first = await h.tasks.submitTask({
        sessionId,
        input: text("once"),
        idempotencyKey: "wait-1",
      });
      // wait_ms says how to answer, not what to run: same key, same task.
      const again = await h.tasks.submitTask({
        sessionId,
        input: text("once"),
        idempotencyKey: "wait-1",
        waitMs: 10_000,
      });
      expect(again.replayed).toBe(true);
      expect(again.task?.id).toBe(first.task?.id);
      expect(again.task?.status).toBe(TaskStatus.COMPLETED);
      const error = await expectReason(
        h.tasks.submitTask({ sessionId, input: text("long"), waitMs: 60_001 }),
        "invalid_request",
      );
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage).toContain("wait_ms must be at most 60000");
      expect(errorDetailOf(error)?.param).toBe("wait_ms");
      // Refused before anything was stored.
      expect((await h.tasks.listTasks({ sessionId })).tasks).toHaveLength(1);
    });
  });
}
