/**
 * The tasks service's behaviour, one suite every backend passes: embedded
 * (PGlite + in-process log) and distributed (PostgreSQL + JetStream). Each
 * backend adds a two-line spec file.
 *
 * Everything goes through a real transport (gRPC over h2c), with the
 * scripted graph backend as the agent (plus the test backends of
 * support/test-executor.ts where timing must be controlled).
 */
import { createHash } from "node:crypto";
import { Code, type ConnectError } from "@connectrpc/connect";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { BusyPolicy, OutcomeStatus, type Task } from "@trellis/contracts/tasks";
import { errorDetailOf } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  APPROVAL_GRAPH,
  createAgent,
  expectReason,
  FAILING_GRAPH,
  TOOL_AUTH_GRAPH,
  text,
  textOf,
  watchUntil,
} from "./support/fixtures.js";
import type { TasksHarness, TasksTarget } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

/** Runs the shared suite against `target`. */
export function describeTasksService(name: string, makeTarget: () => TasksTarget): void {
  describe(`tasks service (${name})`, () => {
    const target = makeTarget();
    const { executor, probe, gates } = createTestExecutor();
    let h: TasksHarness;
    let agents: {
      approval: string;
      toolAuth: string;
      failing: string;
      gate: string;
      gateTool: string;
      broken: string;
    };

    beforeAll(async () => {
      h = await target.start({ executor });
      agents = {
        approval: await createAgent(h, "approver", "scripted", APPROVAL_GRAPH),
        toolAuth: await createAgent(h, "deployer", "scripted", TOOL_AUTH_GRAPH),
        failing: await createAgent(h, "failing", "scripted", FAILING_GRAPH),
        gate: await createAgent(h, "gate", "gate", {}),
        gateTool: await createAgent(h, "gate-tool", "gate", { tool_call: "search" }),
        broken: await createAgent(h, "broken", "broken", {}),
      };
    });

    afterAll(async () => {
      await h?.close();
      await target.teardown();
    });

    async function newSession(agentId = ""): Promise<string> {
      const { session } = await h.sessions.createSession({ agentId });
      return session?.id as string;
    }

    async function transcript(sessionId: string) {
      const { messages } = await h.sessions.listMessages({ sessionId, pageSize: 1000 });
      return messages;
    }

    async function eventKinds(request: { sessionId?: string; taskId?: string }, count: number) {
      return eventually(
        async () => {
          const { events } = await h.events.listEvents({ ...request, limit: 1000 });
          return events.length >= count ? events : undefined;
        },
        { what: `${count} events` },
      );
    }

    describe("agent state", () => {
      // One field appended by every run: a run's state shows what it started from.
      const counting = (suspend: boolean) => ({
        state: { fields: { runs: { type: "list<int>", reducer: "append", default: [] } } },
        entry: "count",
        nodes: {
          count: { update: { messages: [{ role: "assistant", content: "counted" }], runs: [1] } },
          ...(suspend
            ? {
                wait: { suspend: { signal_id: "go" } },
              }
            : {}),
        },
        edges: suspend ? [{ from: "count", to: "wait" }] : [{ from: "count", to: "END" }],
      });

      it("starts each turn from the state the session's last turn left", async () => {
        const agent = await createAgent(h, "state-counter", "scripted", counting(false));
        const sessionId = await newSession(agent);
        const states = [];
        for (const words of ["one", "two", "three"]) {
          const { task } = await h.tasks.submitTask({ sessionId, input: text(words) });
          const { task: done } = await watchUntil(h, task?.id as string);
          expect(done.status).toBe(TaskStatus.COMPLETED);
          states.push(done.state);
        }
        expect(states).toEqual([{ runs: [1] }, { runs: [1, 1] }, { runs: [1, 1, 1] }]);
      });

      it("starts from the state a suspended turn left (written by the relational path)", async () => {
        const agent = await createAgent(h, "state-suspender", "scripted", counting(true));
        const sessionId = await newSession(agent);
        const { task } = await h.tasks.submitTask({ sessionId, input: text("one") });
        const { task: waiting } = await watchUntil(h, task?.id as string, () => false, {
          untilSettled: true,
        });
        expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
        expect(waiting.state).toEqual({ runs: [1] });
        await h.tasks.cancelTask({ taskId: task?.id as string });
        // The next turn starts from what the suspended run left.
        const next = await h.tasks.submitTask({ sessionId, input: text("two") });
        const { task: second } = await watchUntil(h, next.task?.id as string, () => false, {
          untilSettled: true,
        });
        expect(second.status).toBe(TaskStatus.INPUT_REQUIRED);
        expect(second.state).toEqual({ runs: [1, 1] });
      });
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
        expect((await watchUntil(h, next.task?.id as string)).task.status).toBe(
          TaskStatus.COMPLETED,
        );
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
          { timeoutMs: 1_500 },
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

    describe("mailbox", () => {
      it("runs 50 concurrent ENQUEUE submits into one session strictly one after another", async () => {
        const sessionId = await newSession();
        const submitted = await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            h.tasks.submitTask({
              sessionId,
              input: text(`turn ${i}`),
              busyPolicy: BusyPolicy.ENQUEUE,
            }),
          ),
        );
        const ids = submitted.map((r) => r.task?.id as string);
        const finished = await Promise.all(ids.map((id) => watchUntil(h, id)));
        expect(finished.every((f) => f.task.status === TaskStatus.COMPLETED)).toBe(true);
        const messages = await transcript(sessionId);
        expect(messages).toHaveLength(100);
        for (let i = 0; i < 100; i += 2) {
          const input = messages[i];
          const reply = messages[i + 1];
          expect(input?.message?.role).toBe(Role.USER);
          expect(reply?.message?.role).toBe(Role.ASSISTANT);
          expect(reply?.taskId).toBe(input?.taskId);
          expect(textOf(reply?.message)).toBe(textOf(input?.message));
          expect(input?.turn).toBe(BigInt(i / 2));
        }
        // Turns ran in arrival order: the order the submits were accepted.
        const byStart = messages.filter((_, i) => i % 2 === 0).map((m) => m.taskId);
        const accepted = [...finished]
          .map((f) => f.task)
          .sort((a, b) => Number(a.startedAt?.seconds ?? 0n) - Number(b.startedAt?.seconds ?? 0n));
        expect(new Set(byStart)).toEqual(new Set(accepted.map((t) => t.id)));
        expect(probe.starts(sessionId)).toEqual(byStart);
        expect(probe.maxConcurrentPerSession()).toBe(1);
        const { session } = await h.sessions.getSession({ sessionId });
        expect(session?.turnCount).toBe(50n);
      });

      it("with REJECT runs exactly one of 50 concurrent submits; the rest get Aborted and store nothing", async () => {
        // A gate turn holds the mailbox until the test opens it: "busy" does not depend on timing.
        const sessionId = await newSession(agents.gate);
        const results = await Promise.allSettled(
          Array.from({ length: 50 }, (_, i) =>
            h.tasks.submitTask({ sessionId, input: text(`r${i}`), busyPolicy: BusyPolicy.REJECT }),
          ),
        );
        const accepted = results.filter((r) => r.status === "fulfilled");
        const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
        expect(accepted).toHaveLength(1);
        expect(rejected).toHaveLength(49);
        for (const r of rejected) {
          expect(r.reason.code).toBe(Code.Aborted);
        }
        await expectReason(
          h.tasks.submitTask({ sessionId, input: text("again"), busyPolicy: BusyPolicy.REJECT }),
          "conflict",
        );
        const { tasks } = await h.tasks.listTasks({ sessionId });
        expect(tasks).toHaveLength(1);
        const only = accepted[0] as PromiseFulfilledResult<{ task?: Task }>;
        gates.open(only.value.task?.id as string);
        await watchUntil(h, only.value.task?.id as string);
        expect(await transcript(sessionId)).toHaveLength(2);
      });

      it("INTERRUPT cancels the running turn, closes its tool calls, then runs the new one", async () => {
        const sessionId = await newSession(agents.gateTool);
        const first = await h.tasks.submitTask({ sessionId, input: text("search for it") });
        await gates.started(first.task?.id as string);
        const second = await h.tasks.submitTask({
          sessionId,
          agentId: "agent_echo",
          input: text("stop, do this"),
          busyPolicy: BusyPolicy.INTERRUPT,
        });
        const { task: done } = await watchUntil(h, second.task?.id as string);
        expect(done.status).toBe(TaskStatus.COMPLETED);
        const { task: interrupted } = await h.tasks.getTask({ taskId: first.task?.id as string });
        expect(interrupted?.status).toBe(TaskStatus.CANCELED);
        const messages = (await transcript(sessionId)).map((m) => m.message);
        expect(messages.map((m) => m?.role)).toEqual([
          Role.USER,
          Role.ASSISTANT,
          Role.TOOL,
          Role.USER,
          Role.ASSISTANT,
        ]);
        expect(messages[2]?.toolCallId).toBe(messages[1]?.toolCalls[0]?.id);
        expect(textOf(messages[2])).toContain("interrupted");
        expect(textOf(messages[3])).toBe("stop, do this");
      });

      it("hands the executor the transcript before the turn as history", async () => {
        const sessionId = await newSession();
        for (const word of ["one", "two", "three"]) {
          const { task } = await h.tasks.submitTask({ sessionId, input: text(word) });
          await watchUntil(h, task?.id as string);
        }
        const { task } = await h.tasks.submitTask({ sessionId, input: text("four") });
        await watchUntil(h, task?.id as string);
        expect(probe.history(task?.id as string)).toBe(6);
      });

      it("refuses tasks in a closed session (conflict)", async () => {
        const sessionId = await newSession();
        const { session } = await h.sessions.closeSession({ sessionId, reason: "done" });
        expect(session?.state).toBe(4);
        await expectReason(h.tasks.submitTask({ sessionId, input: text("late") }), "conflict");
      });
    });

    describe("sessions", () => {
      async function threeTurns(): Promise<{ sessionId: string; tasks: Task[] }> {
        const sessionId = await newSession();
        const tasks: Task[] = [];
        for (const word of ["a", "b", "c"]) {
          const { task } = await h.tasks.submitTask({ sessionId, input: text(word) });
          tasks.push((await watchUntil(h, task?.id as string)).task);
        }
        return { sessionId, tasks };
      }

      it("forks at a message count and at an event", async () => {
        const { sessionId, tasks } = await threeTurns();
        const { session: byCount } = await h.sessions.forkSession({
          sessionId,
          atMessageCount: 2n,
        });
        expect(byCount).toMatchObject({
          parentSessionId: sessionId,
          rootSessionId: sessionId,
          messageCount: 2n,
          turnCount: 1n,
        });
        expect(byCount?.branchId).not.toBe("");
        const copied = await transcript(byCount?.id as string);
        const original = await transcript(sessionId);
        expect(copied.map((m) => m.message?.id)).toEqual(
          original.slice(0, 2).map((m) => m.message?.id),
        );

        const events = await eventKinds({ taskId: tasks[1]?.id as string }, 5);
        const completed = events.find((e) => e.kind === "task.completed");
        const { session: byEvent } = await h.sessions.forkSession({
          sessionId,
          atEventId: completed?.id as string,
        });
        expect(byEvent?.messageCount).toBe(4n);
        expect(byEvent?.forkedFromEventId).toBe(completed?.id);
        // A fork of a fork keeps the root.
        const { session: grandchild } = await h.sessions.forkSession({
          sessionId: byEvent?.id as string,
        });
        expect(grandchild?.rootSessionId).toBe(sessionId);
        expect(grandchild?.parentSessionId).toBe(byEvent?.id);
        const forkEvents = await eventKinds({ sessionId: byEvent?.id as string }, 2);
        expect(forkEvents.map((e) => e.kind)).toEqual(["session.created", "session.thread_forked"]);
        // The fork runs its own turns.
        const { task } = await h.tasks.submitTask({
          sessionId: byEvent?.id as string,
          input: text("d"),
        });
        await watchUntil(h, task?.id as string);
        expect((await transcript(byEvent?.id as string)).map((m) => textOf(m.message))).toEqual([
          "a",
          "a",
          "b",
          "b",
          "d",
          "d",
        ]);
        await expectReason(
          h.sessions.forkSession({ sessionId, atMessageCount: 99n }),
          "invalid_request",
        );
      });

      it("truncates to the first N turns in place", async () => {
        const { sessionId } = await threeTurns();
        const { session, droppedMessages } = await h.sessions.truncateSession({
          sessionId,
          keepTurns: 1n,
        });
        expect(droppedMessages).toBe(4n);
        expect(session).toMatchObject({ messageCount: 2n, turnCount: 1n });
        expect((await transcript(sessionId)).map((m) => textOf(m.message))).toEqual(["a", "a"]);
        // Wait for the truncation's event itself: how many events a turn records
        // (progress batches) varies with timing, so a count cannot tell.
        const events = await eventually(
          async () => {
            const { events } = await h.events.listEvents({ sessionId, limit: 1000 });
            return events.some((e) => e.kind === "session.truncated") ? events : undefined;
          },
          { what: "the session.truncated event" },
        );
        expect(events.at(-1)?.kind).toBe("session.truncated");
        // The next turn sees the truncated history and continues at position 2.
        const { task } = await h.tasks.submitTask({ sessionId, input: text("z") });
        await watchUntil(h, task?.id as string);
        expect(probe.history(task?.id as string)).toBe(2);
        expect((await transcript(sessionId)).map((m) => [m.position, textOf(m.message)])).toEqual([
          [0n, "a"],
          [1n, "a"],
          [2n, "z"],
          [3n, "z"],
        ]);
        // Keeping more turns than exist drops nothing.
        expect(
          (await h.sessions.truncateSession({ sessionId, keepTurns: 10n })).droppedMessages,
        ).toBe(0n);
      });

      it("refuses to truncate while a turn runs", async () => {
        const sessionId = await newSession(agents.gate);
        const { task } = await h.tasks.submitTask({ sessionId, input: text("busy") });
        await gates.started(task?.id as string);
        await expectReason(h.sessions.truncateSession({ sessionId, keepTurns: 0n }), "conflict");
        gates.open(task?.id as string);
        await watchUntil(h, task?.id as string);
      });

      it("appends and pages messages in order; validates their shape", async () => {
        const { session } = await h.sessions.createSession({
          initialMessages: [text("You are terse.", Role.SYSTEM)],
        });
        const sessionId = session?.id as string;
        for (let i = 0; i < 5; i++) {
          await h.sessions.appendMessage({ sessionId, message: text(`note ${i}`) });
        }
        const seen: string[] = [];
        let pageToken = "";
        do {
          const page = await h.sessions.listMessages({ sessionId, pageSize: 2, pageToken });
          seen.push(...page.messages.map((m) => textOf(m.message)));
          pageToken = page.nextPageToken;
        } while (pageToken);
        expect(seen).toEqual(["You are terse.", "note 0", "note 1", "note 2", "note 3", "note 4"]);
        const error = await expectReason(
          h.sessions.appendMessage({ sessionId, message: { role: Role.USER, parts: [] } }),
          "invalid_request",
        );
        expect(error.code).toBe(Code.InvalidArgument);
        const { message } = await h.sessions.getMessage({
          messageId: (await transcript(sessionId))[1]?.message?.id as string,
        });
        expect(textOf(message?.message)).toBe("note 0");
      });
    });

    describe("requests", () => {
      it("validates the input message (any chat role, or agent)", async () => {
        const sessionId = await newSession();
        const error = await expectReason(
          h.tasks.submitTask({ sessionId, input: text("hi", Role.UNSPECIFIED) }),
          "invalid_request",
        );
        expect(errorParam(error)).toBe("input.role");
        await expectReason(h.tasks.submitTask({ sessionId }), "invalid_request");
        for (const role of [Role.SYSTEM, Role.ASSISTANT]) {
          const { task } = await h.tasks.submitTask({ sessionId, input: text("said", role) });
          expect((await watchUntil(h, task?.id as string)).task.status).toBe(TaskStatus.COMPLETED);
        }
        const agentInput = await h.tasks.submitTask({
          sessionId,
          input: text("from a peer", Role.AGENT),
        });
        expect((await watchUntil(h, agentInput.task?.id as string)).task.status).toBe(
          TaskStatus.COMPLETED,
        );
      });

      it("replays a submit with the same idempotency key; refuses the key with another body", async () => {
        const sessionId = await newSession();
        const first = await h.tasks.submitTask({
          sessionId,
          input: text("once"),
          idempotencyKey: "k-1",
        });
        const again = await h.tasks.submitTask({
          sessionId,
          input: text("once"),
          idempotencyKey: "k-1",
        });
        expect(again.replayed).toBe(true);
        expect(again.task?.id).toBe(first.task?.id);
        const error = await expectReason(
          h.tasks.submitTask({ sessionId, input: text("twice"), idempotencyKey: "k-1" }),
          "idempotency_key_reused",
        );
        expect(error.code).toBe(Code.AlreadyExists);
        await watchUntil(h, first.task?.id as string);
        expect((await h.tasks.listTasks({ sessionId })).tasks).toHaveLength(1);
      });

      it("accepts a tool message only when it answers an earlier tool call of the session", async () => {
        const sessionId = await newSession();
        const orphan = await expectReason(
          h.tasks.submitTask({
            sessionId,
            input: { role: Role.TOOL, toolCallId: "call_1", parts: [text("42").parts[0]!] },
          }),
          "invalid_request",
        );
        expect(errorParam(orphan)).toBe("input.tool_call_id");
        await h.sessions.appendMessage({
          sessionId,
          message: {
            role: Role.ASSISTANT,
            toolCalls: [{ id: "call_1", name: "lookup" }],
          },
        });
        const { task } = await h.tasks.submitTask({
          sessionId,
          input: { role: Role.TOOL, toolCallId: "call_1", parts: [text("42").parts[0]!] },
        });
        expect((await watchUntil(h, task?.id as string)).task.status).toBe(TaskStatus.COMPLETED);
      });

      it("binds a session created on submit to the requested agent; an existing one keeps its own", async () => {
        const sessionId = `ses_bound_${Date.now()}`;
        const first = await h.tasks.submitTask({
          sessionId,
          createSession: true,
          agentId: agents.approval,
          input: text("go"),
        });
        expect(first.task?.agentId).toBe(agents.approval);
        const { session } = await h.sessions.getSession({ sessionId });
        expect(session?.agentId).toBe(agents.approval);
        // Get-or-create: the existing session runs its own agent.
        const second = await h.tasks.submitTask({
          sessionId,
          createSession: true,
          agentId: agents.failing,
          input: text("again"),
        });
        expect(second.task?.agentId).toBe(agents.approval);
      });

      it("creates the session on submit when asked", async () => {
        const { task } = await h.tasks.submitTask({ createSession: true, input: text("fresh") });
        expect(task?.sessionId).toMatch(/^ses_/);
        expect((await watchUntil(h, task?.id as string)).task.status).toBe(TaskStatus.COMPLETED);
        await expectReason(
          h.tasks.submitTask({ sessionId: "ses_missing", input: text("x") }),
          "resource_not_found",
        );
      });

      it("validates agent definitions through the executor", async () => {
        const error = await expectReason(
          h.agents.createAgent({
            agent: {
              name: "bad",
              backend: "scripted",
              definition: {
                entry: "x",
                nodes: { x: { update: { messages: [{ role: "robot" }] } } },
              },
            },
          }),
          "agent_definition_invalid",
        );
        expect(errorParam(error)).toBe("agent.definition.nodes.x.update.messages[0].role");
        const unknown = await expectReason(
          h.agents.createAgent({ agent: { name: "x", backend: "nope", definition: {} } }),
          "agent_definition_invalid",
        );
        expect(errorParam(unknown)).toBe("agent.backend");
        const { agents: list } = await h.agents.listAgents({ workspaceId: "default" });
        expect(list.map((a) => a.id)).toContain("agent_echo");
      });

      it("lists tasks by session and status, in pages", async () => {
        const sessionId = await newSession();
        for (let i = 0; i < 3; i++) {
          const { task } = await h.tasks.submitTask({ sessionId, input: text(`p${i}`) });
          await watchUntil(h, task?.id as string);
        }
        const first = await h.tasks.listTasks({ sessionId, pageSize: 2 });
        expect(first.tasks).toHaveLength(2);
        const second = await h.tasks.listTasks({
          sessionId,
          pageSize: 2,
          pageToken: first.nextPageToken,
        });
        expect(second.tasks).toHaveLength(1);
        expect(second.nextPageToken).toBe("");
        const done = await h.tasks.listTasks({ sessionId, statuses: [TaskStatus.COMPLETED] });
        expect(done.tasks).toHaveLength(3);
        expect(
          (await h.tasks.listTasks({ sessionId, statuses: [TaskStatus.FAILED] })).tasks,
        ).toHaveLength(0);
      });

      it("lists the tasks a task delegated to (parent_task_id), in any session", async () => {
        const sessionId = await newSession();
        const { task: parent } = await h.tasks.submitTask({ sessionId, input: text("plan") });
        await watchUntil(h, parent?.id as string);
        const other = await newSession();
        const children: string[] = [];
        for (const session of [sessionId, other]) {
          const { task } = await h.tasks.submitTask({
            sessionId: session,
            input: text("delegated"),
            parentTaskId: parent?.id as string,
          });
          children.push(task?.id as string);
          await watchUntil(h, task?.id as string);
        }
        const { tasks } = await h.tasks.listTasks({ parentTaskId: parent?.id as string });
        expect(tasks.map((t) => [t.id, t.sessionId])).toEqual([
          [children[0], sessionId],
          [children[1], other],
        ]);
        const inSession = await h.tasks.listTasks({
          parentTaskId: parent?.id as string,
          sessionId,
        });
        expect(inSession.tasks.map((t) => t.id)).toEqual([children[0]]);
        expect((await h.tasks.listTasks({ parentTaskId: "task_none" })).tasks).toEqual([]);
      });
    });

    describe("events", () => {
      it("pages with after_event_id deterministically; an unknown cursor is cursor_expired", async () => {
        const sessionId = await newSession();
        const { task } = await h.tasks.submitTask({ sessionId, input: text("page") });
        await watchUntil(h, task?.id as string);
        const all = await eventKinds({ sessionId }, 6);
        const firstPage = await h.events.listEvents({ sessionId, limit: 2 });
        expect(firstPage.hasMore).toBe(true);
        expect(firstPage.events.map((e) => e.id)).toEqual(all.slice(0, 2).map((e) => e.id));
        const rest = await h.events.listEvents({
          sessionId,
          afterEventId: firstPage.events[1]?.id as string,
        });
        expect(rest.events.map((e) => e.id)).toEqual(all.slice(2).map((e) => e.id));
        const again = await h.events.listEvents({
          sessionId,
          afterEventId: firstPage.events[1]?.id as string,
        });
        expect(again).toEqual(rest);
        const error = await expectReason(
          h.events.listEvents({ sessionId, afterEventId: "evt_unknown" }),
          "cursor_expired",
        );
        expect(error.code).toBe(Code.OutOfRange);
        const { event } = await h.events.getEvent({ eventId: all[0]?.id as string });
        expect(event?.kind).toBe("session.created");
      });

      it("streams history then live events with no gap or duplicate", async () => {
        const sessionId = await newSession(agents.approval);
        const { task } = await h.tasks.submitTask({ sessionId, input: text("stream") });
        await watchUntil(h, task?.id as string, () => false, { untilSettled: true });
        const history = await eventKinds({ sessionId }, 5);
        const abort = new AbortController();
        const received: string[] = [];
        const stream = (async () => {
          for await (const { event } of h.events.streamEvents(
            { sessionId, afterEventId: history[1]?.id as string },
            { signal: abort.signal },
          )) {
            received.push(event?.id as string);
            if (event?.kind === "task.completed") break;
          }
        })();
        await h.signals.deliver({
          signalId: `${task?.id}:approval`,
          payload: {
            kind: {
              case: "structValue",
              value: { fields: { approved: { kind: { case: "boolValue", value: true } } } },
            },
          },
        });
        await stream;
        abort.abort();
        const all = await h.events.listEvents({ sessionId });
        const expected = all.events.slice(2).map((e) => e.id);
        expect(received).toEqual(expected.slice(0, received.length));
        expect(new Set(received).size).toBe(received.length);
        expect(all.events.findIndex((e) => e.kind === "task.completed")).toBe(1 + received.length);
      });

      it("streams from now: first the start cursor, then only later events", async () => {
        const sessionId = await newSession(agents.approval);
        const { task } = await h.tasks.submitTask({ sessionId, input: text("now") });
        await watchUntil(h, task?.id as string, () => false, { untilSettled: true });
        const before = await eventKinds({ sessionId }, 6);
        const abort = new AbortController();
        const stream = h.events.streamEvents(
          { sessionId, fromNow: true },
          { signal: abort.signal },
        );
        const iterator = stream[Symbol.asyncIterator]();
        const first = (await iterator.next()).value;
        expect(first?.event).toBeUndefined();
        expect(first?.startAfterEventId).toBe(before.at(-1)?.id);
        await h.signals.deliver({
          signalId: `${task?.id}:approval`,
          payload: {
            kind: {
              case: "structValue",
              value: { fields: { approved: { kind: { case: "boolValue", value: true } } } },
            },
          },
        });
        const received: string[] = [];
        for (;;) {
          const { value, done } = await iterator.next();
          if (done || !value?.event) break;
          received.push(value.event.kind);
          if (value.event.kind === "task.completed") break;
        }
        abort.abort();
        expect(received[0]).toBe("user.tool_confirmation");
        expect(received.at(-1)).toBe("task.completed");
        await expectReason(
          (async () => {
            for await (const _ of h.events.streamEvents({
              sessionId,
              fromNow: true,
              afterEventId: before[0]?.id as string,
            })) {
              /* refused before any response */
            }
          })(),
          "invalid_request",
        );
      });
    });

    describe("workspaces", () => {
      it("keeps callers inside their workspace and never reveals other workspaces' resources", async () => {
        const alice = h.as({ actorId: "alice", workspaceId: "ws_alice" });
        const bob = h.as({ actorId: "bob", workspaceId: "ws_bob" });
        const { session } = await alice.sessions.createSession({});
        expect(session?.workspaceId).toBe("ws_alice");
        const { task } = await alice.tasks.submitTask({
          sessionId: session?.id as string,
          input: text("mine"),
        });
        expect(task?.createdBy).toBe("alice");
        const done = await watchUntil(alice, task?.id as string);
        expect(done.task.status).toBe(TaskStatus.COMPLETED);
        await expectReason(
          bob.sessions.getSession({ sessionId: session?.id as string }),
          "resource_not_found",
        );
        await expectReason(bob.tasks.getTask({ taskId: task?.id as string }), "resource_not_found");
        await expectReason(
          bob.tasks.cancelTask({ taskId: task?.id as string }),
          "resource_not_found",
        );
        await expectReason(
          bob.tasks.submitTask({ sessionId: session?.id as string, input: text("theirs") }),
          "resource_not_found",
        );
        await expectReason(
          bob.events.listEvents({ taskId: task?.id as string }),
          "resource_not_found",
        );
        await expectReason(
          bob.outcomes.getOutcome({ outcomeId: done.task.outcomeId }),
          "resource_not_found",
        );
        await expectReason(
          bob.sessions.createSession({ workspaceId: "ws_alice" }),
          "resource_not_found",
        );
        expect((await bob.sessions.listSessions({})).sessions).toEqual([]);
        expect(
          (await alice.sessions.listSessions({ workspaceId: "ws_bob" })).sessions.map((s) => s.id),
        ).toEqual([session?.id]);
        const events = await eventually(async () => {
          const { events } = await alice.events.listEvents({ taskId: task?.id as string });
          return events.length >= 5 ? events : undefined;
        });
        expect(events[0]?.actor?.id).toBe("alice");
        // Internal calls (no caller) see everything.
        expect((await h.tasks.getTask({ taskId: task?.id as string })).task?.workspaceId).toBe(
          "ws_alice",
        );
      });
    });

    describe("agent ids per workspace", () => {
      it("lets two workspaces use one agent id, neither learning of the other, each running its own", async () => {
        const carol = h.as({ actorId: "carol", workspaceId: "ws_carol" });
        const dave = h.as({ actorId: "dave", workspaceId: "ws_dave" });
        const id = `agent_standup_${Date.now()}`;
        const make = (who: typeof carol, reply: string) =>
          who.agents.createAgent({
            agent: {
              id,
              name: "standup",
              backend: "scripted",
              definition: {
                entry: "reply",
                nodes: { reply: { update: { messages: [{ role: "assistant", content: reply }] } } },
                edges: [{ from: "reply", to: "END" }],
              },
            },
          });
        expect((await make(carol, "carol's")).agent?.workspaceId).toBe("ws_carol");
        // Another workspace takes the same id: no conflict, nothing revealed.
        expect((await make(dave, "dave's")).agent?.workspaceId).toBe("ws_dave");
        // Within one workspace the id stays unique.
        await expectReason(make(carol, "again"), "conflict");
        expect((await dave.agents.getAgent({ agentId: id })).agent?.workspaceId).toBe("ws_dave");
        // A session names the agent of its own workspace.
        for (const [who, reply] of [
          [carol, "carol's"],
          [dave, "dave's"],
        ] as const) {
          const { session } = await who.sessions.createSession({ agentId: id });
          const { task } = await who.tasks.submitTask({
            sessionId: session?.id as string,
            input: text("hi"),
          });
          const done = await watchUntil(who, task?.id as string);
          expect(done.task.status).toBe(TaskStatus.COMPLETED);
          const { messages } = await who.sessions.listMessages({
            sessionId: session?.id as string,
          });
          const last = JSON.stringify(messages.at(-1), (_k, v: unknown) =>
            typeof v === "bigint" ? String(v) : v,
          );
          expect(last).toContain(reply);
        }
        // The built-in echo agent stays usable everywhere.
        const { session } = await carol.sessions.createSession({ agentId: "agent_echo" });
        expect(session?.agentId).toBe("agent_echo");
      });
    });

    describe("artifacts", () => {
      it("stores content in the database with its sha256 and size", async () => {
        const sessionId = await newSession();
        const content = new TextEncoder().encode("hello artifact");
        const { artifact } = await h.artifacts.registerArtifact({
          artifact: { sessionId, name: "note.txt", mimeType: "text/plain" },
          content,
        });
        expect(artifact?.sha256).toBe(
          `sha256:${createHash("sha256").update(content).digest("hex")}`,
        );
        expect(artifact?.sizeBytes).toBe(BigInt(content.length));
        const body = await h.artifacts.getArtifactContent({ artifactId: artifact?.id as string });
        expect(new TextDecoder().decode(body.content)).toBe("hello artifact");
        expect(body.mimeType).toBe("text/plain");
        const { artifacts } = await h.artifacts.listArtifacts({ sessionId });
        expect(artifacts.map((a) => a.id)).toEqual([artifact?.id]);
        await expectReason(
          h.artifacts.registerArtifact({ artifact: { name: "empty" } }),
          "invalid_request",
        );
      });
    });
  });
}

/** ErrorDetail.param of a Connect error: the field the error is about. */
function errorParam(error: ConnectError): string | undefined {
  return errorDetailOf(error)?.param;
}
