/**
 * Tasks service contract: the session mailbox (busy policies, queued
 * turns) and sessions (transcript, close, fork, truncate).
 */
import { Code } from "@connectrpc/connect";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { BusyPolicy, type Task } from "@trellis/contracts/tasks";
import { eventually } from "@trellis/testkit";
import { beforeAll, describe, expect, it } from "vitest";
import { expectReason, text, textOf, watchUntil } from "../support/fixtures.js";
import type { TasksHarness } from "../support/harness.js";
import type { TasksSuite } from "./suite.js";

export function describeSessions(suite: TasksSuite): void {
  const { probe, gates, newSession, transcript, eventKinds } = suite;
  // The harness exists once the suite's beforeAll ran; bind it for the tests below.
  let h: TasksHarness;
  let agents: TasksSuite["agents"];
  beforeAll(() => {
    h = suite.h;
    agents = suite.agents;
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
}
