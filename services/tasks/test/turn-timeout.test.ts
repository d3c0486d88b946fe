/** A turn that never returns is stopped at its deadline: FAILED `timeout`, never stuck WORKING. */
import { TaskStatus } from "@trellis/contracts/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, text, watchUntil } from "./support/fixtures.js";
import { embeddedTarget, type TasksHarness } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

describe("turn deadline", () => {
  const { executor, gates } = createTestExecutor();
  let h: TasksHarness;

  beforeAll(async () => {
    h = await embeddedTarget().start({
      executor,
      env: { TRELLIS_TASKS_TURN_TIMEOUT: "300ms", TRELLIS_TASKS_CANCEL_GRACE: "100ms" },
    });
  });

  afterAll(async () => {
    await h?.close();
  });

  it("fails a turn that outlives TRELLIS_TASKS_TURN_TIMEOUT and frees the mailbox", async () => {
    const agentId = await createAgent(h, "stuck", "gate", {});
    const { session } = await h.sessions.createSession({ agentId });
    const { task } = await h.tasks.submitTask({
      sessionId: session?.id as string,
      input: text("hang"),
    });
    await gates.started(task?.id as string);
    const { task: failed } = await watchUntil(h, task?.id as string);
    expect(failed.status).toBe(TaskStatus.FAILED);
    expect(failed.failure).toMatchObject({ category: "timeout", retryable: true });
    const next = await h.tasks.submitTask({
      sessionId: session?.id as string,
      agentId: "agent_echo",
      input: text("next"),
    });
    expect((await watchUntil(h, next.task?.id as string)).task.status).toBe(TaskStatus.COMPLETED);
  });
});
