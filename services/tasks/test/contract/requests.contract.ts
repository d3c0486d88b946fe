/**
 * Tasks service contract: request validation (typed errors naming the
 * field) and the event log (list, stream, order).
 */
import { Code } from "@connectrpc/connect";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { beforeAll, describe, expect, it } from "vitest";
import { expectReason, text, watchUntil } from "../support/fixtures.js";
import type { TasksHarness } from "../support/harness.js";
import type { TasksSuite } from "./suite.js";
import { errorParam } from "./suite.js";

export function describeRequestsAndEvents(suite: TasksSuite): void {
  const { newSession, eventKinds } = suite;
  // The harness exists once the suite's beforeAll ran; bind it for the tests below.
  let h: TasksHarness;
  let agents: TasksSuite["agents"];
  beforeAll(() => {
    h = suite.h;
    agents = suite.agents;
  });

  /** Approves the waiting task `taskId` of an approval agent (its `approval` signal). */
  const approve = (taskId: string) =>
    h.signals.deliver({
      signalId: `${taskId}:approval`,
      payload: {
        kind: {
          case: "structValue",
          value: { fields: { approved: { kind: { case: "boolValue", value: true } } } },
        },
      },
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
      // Get-or-create the session, asking for `agentId`.
      const submitAs = (agentId: string, words: string) =>
        h.tasks.submitTask({ sessionId, createSession: true, agentId, input: text(words) });
      const first = await submitAs(agents.approval, "go");
      expect(first.task?.agentId).toBe(agents.approval);
      const { session } = await h.sessions.getSession({ sessionId });
      expect(session?.agentId).toBe(agents.approval);
      // Get-or-create: the existing session runs its own agent.
      const second = await submitAs(agents.failing, "again");
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
      await approve(task?.id as string);
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
      const stream = h.events.streamEvents({ sessionId, fromNow: true }, { signal: abort.signal });
      const iterator = stream[Symbol.asyncIterator]();
      const first = (await iterator.next()).value;
      expect(first?.event).toBeUndefined();
      expect(first?.startAfterEventId).toBe(before.at(-1)?.id);
      await approve(task?.id as string);
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
}
