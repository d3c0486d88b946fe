/**
 * Issue 22, finding 2: a turn whose output the store refuses (a NUL in an
 * assistant message: PostgreSQL's jsonb holds no U+0000) fails at once with
 * that cause — recorded, not re-run, not `worker_lost` — even for an agent
 * that is safe to retry. Embedded (PGlite) and distributed (PostgreSQL).
 */
import { create } from "@bufbuild/protobuf";
import { MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import {
  type AgentExecutor,
  createLocalExecutor,
  type ExecutionAdapter,
  type ExecutionResult,
} from "@trellis/execution";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, text, watchUntil } from "./support/fixtures.js";
import { distributedTarget, embeddedTarget, type TasksHarness } from "./support/harness.js";

function poisonExecutor(): { executor: AgentExecutor; runs: () => number } {
  let runs = 0;
  const poison: ExecutionAdapter = {
    backendId: "poison",
    async execute(): Promise<ExecutionResult> {
      runs += 1;
      return {
        status: "completed",
        messages: [
          create(MessageSchema, {
            role: Role.ASSISTANT,
            parts: [{ kind: { case: "text", value: { text: "bad\u0000text" } } }],
          }),
        ],
      };
    },
  };
  return { executor: createLocalExecutor([poison]), runs: () => runs };
}

describe.each([
  ["embedded", embeddedTarget],
  ["distributed", distributedTarget],
])("a turn whose output cannot be stored (%s)", (_name, target) => {
  const { executor, runs } = poisonExecutor();
  const t = target();
  let h: TasksHarness;

  beforeAll(async () => {
    // A short lease: were the turn left to recovery, it would re-run within the test.
    h = await t.start({
      executor,
      env: { TRELLIS_TASKS_LEASE: "300ms", TRELLIS_TASKS_SWEEP: "50ms" },
    });
  });

  afterAll(async () => {
    await h?.close();
    await t.teardown();
  });

  it("fails once with the real cause and frees the session", async () => {
    const agentId = await createAgent(h, "poison", "poison", {}, { safeToRetry: true });
    const { session } = await h.sessions.createSession({ agentId });
    const { task } = await h.tasks.submitTask({
      sessionId: session?.id as string,
      input: text("go"),
    });
    const { task: done } = await watchUntil(h, task?.id as string);
    expect(done.status).toBe(TaskStatus.FAILED);
    expect(done.failure).toMatchObject({ category: "output_unrecordable", retryable: false });
    expect(done.failure?.message).toMatch(/cannot be stored/);
    // Several leases later: still one run, no recovery re-ran it.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(runs()).toBe(1);
    const { task: after } = await h.tasks.getTask({ taskId: task?.id as string });
    expect(after?.status).toBe(TaskStatus.FAILED);
  });
});
