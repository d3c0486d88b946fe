// Context compaction in running turns, against both targets (embedded:
// PGlite and the in-process log; distributed: PostgreSQL and JetStream): past
// the agent's token budget a turn is handed [summary, recent turns] instead of
// the whole transcript, `context.compacted` / `context.warning` land in the
// session's log before the turn's reply, and the transcript in storage stays whole.
import { create } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import {
  createLocalExecutor,
  createScriptedAdapter,
  type ExecutionAdapter,
} from "@trellis/execution";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, text, textOf, watchUntil } from "./support/fixtures.js";
import {
  distributedTarget,
  embeddedTarget,
  type TasksHarness,
  type TasksTarget,
} from "./support/harness.js";

// What the backend was handed, by task id.
const handed = new Map<string, Message[]>();

/** Replies with a long answer and remembers the history it was given. */
const recorder: ExecutionAdapter = {
  backendId: "recorder",
  async execute(request) {
    handed.set(request.taskId, [...request.history]);
    const reply = create(MessageSchema, {
      role: Role.ASSISTANT,
      parts: [
        {
          kind: {
            case: "text",
            value: {
              text: `answer to ${textOf(request.input).split("\n")[0]}\n${"a".repeat(400)}`,
            },
          },
        },
      ],
    });
    return { status: "completed", messages: [reply] };
  },
};

const targets: TasksTarget[] = [embeddedTarget(), distributedTarget()];

describe.each(targets.map((t) => ({ name: t.name, target: t })))(
  "context compaction in turns ($name)",
  ({ target }) => {
    let h: TasksHarness;

    beforeAll(async () => {
      h = await target.start({
        executor: createLocalExecutor([createScriptedAdapter(), recorder]),
      });
    }, 60_000);

    afterAll(async () => {
      await h?.close();
      await target.teardown();
    });

    it("hands a turn past its budget a summary plus the recent turns, and logs why", async () => {
      // Each turn ≈ 2 × 110 tokens; compaction passes 600 at the fourth turn.
      const agentId = await createAgent(h, "compacting", "recorder", {
        context: { budget_tokens: 600, keep_recent_turns: 1, warn_percent: 70 },
      });
      const { session } = await h.sessions.createSession({ agentId });
      const sessionId = session?.id as string;
      const taskIds: string[] = [];
      for (let i = 1; i <= 4; i++) {
        const { task } = await h.tasks.submitTask({
          sessionId,
          input: text(`question ${i}\n${"q".repeat(400)}`),
        });
        taskIds.push(task?.id as string);
        const done = await watchUntil(h, task?.id as string);
        expect(done.task.status).toBe(TaskStatus.COMPLETED);
      }

      // Turns 1–3 saw the whole transcript; turn 4 saw [summary, turn 3].
      expect(taskIds.slice(0, 3).map((id) => handed.get(id)?.length)).toEqual([0, 2, 4]);
      const fourth = handed.get(taskIds[3]!)!;
      expect(fourth.map((m) => [m.role, textOf(m).split("\n")[0]])).toEqual([
        [Role.SYSTEM, expect.stringMatching(/^Summary of the 2 earlier turns/)],
        [Role.USER, "question 3"],
        [Role.ASSISTANT, "answer to question 3"],
      ]);
      expect(textOf(fourth[0])).toContain(
        "1. user: question 1\n   assistant: answer to question 1",
      );

      // The log says what happened, in the turn that was compacted, before its reply.
      // In distributed mode events reach the log through the relay: wait for the reply's.
      const events = await eventually(
        async () => {
          const { events } = await h.events.listEvents({ sessionId, limit: 1000 });
          return events.some((e) => e.taskId === taskIds[3] && e.kind === "agent.message")
            ? events
            : undefined;
        },
        { timeoutMs: 30_000, what: "the fourth turn's reply in the log" },
      );
      const context = events.filter((e) => e.kind.startsWith("context."));
      const compacted = context.find((e) => e.kind === "context.compacted")!;
      expect(compacted.taskId).toBe(taskIds[3]);
      const data = compacted.payload?.kind.case === "data" ? compacted.payload.kind.value : {};
      expect(data).toMatchObject({
        strategy: "first_line",
        original_count: 6,
        compacted_count: 3,
        summarized_turns: 2,
        summarized_through_position: 3,
        budget_tokens: 600,
        summary: textOf(fourth[0]),
        resume_cursor: `compact:${sessionId}:4`,
      });
      const warnings = context.filter((e) => e.kind === "context.warning");
      expect(warnings.length).toBeGreaterThanOrEqual(1);
      const order = events.map((e) => e.id);
      const reply = events.find((e) => e.taskId === taskIds[3] && e.kind === "agent.message")!;
      expect(order.indexOf(compacted.id)).toBeLessThan(order.indexOf(reply.id));

      // The transcript in storage is whole: 4 inputs and 4 replies.
      const { messages } = await h.sessions.listMessages({ sessionId, pageSize: 100 });
      expect(messages.map((m) => textOf(m.message).split("\n")[0])).toEqual([
        "question 1",
        "answer to question 1",
        "question 2",
        "answer to question 2",
        "question 3",
        "answer to question 3",
        "question 4",
        "answer to question 4",
      ]);
    }, 60_000);
  },
);
