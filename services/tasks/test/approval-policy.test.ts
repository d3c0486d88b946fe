/**
 * Persona autonomy policy: an `act_with_approval` agent's turns reach the
 * backend with every tool it may call marked `requiresApproval` (the harness
 * then suspends each call for approval); other tiers add nothing.
 */

import { AutonomyTier } from "@trellis/contracts/tasks";
import type { AgentExecutor, ExecutionRequest } from "@trellis/execution";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { approvalPolicy } from "../src/worker/turn-runner.js";
import { text, watchUntil } from "./support/fixtures.js";
import { embeddedTarget, type TasksHarness } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

describe("approval policy of a persona", () => {
  it("marks every tool of an act_with_approval agent, from its definition's tools or its own", () => {
    expect(
      approvalPolicy({
        autonomyTier: AutonomyTier.ACT_WITH_APPROVAL,
        tools: ["search"],
        definition: { tools: ["send_email", "deploy", "deploy"] },
      }),
    ).toEqual({
      toolDescriptors: [
        { name: "send_email", requiresApproval: true },
        { name: "deploy", requiresApproval: true },
      ],
    });
    expect(
      approvalPolicy({
        autonomyTier: AutonomyTier.ACT_WITH_APPROVAL,
        tools: ["search"],
        definition: {},
      }),
    ).toEqual({ toolDescriptors: [{ name: "search", requiresApproval: true }] });
    for (const tier of [AutonomyTier.ACT_AUTO, AutonomyTier.SUGGEST, AutonomyTier.UNSPECIFIED]) {
      expect(
        approvalPolicy({ autonomyTier: tier, tools: ["search"], definition: { tools: ["x"] } }),
      ).toEqual({});
    }
  });

  describe("on a running service", () => {
    const target = embeddedTarget();
    const { executor: inner } = createTestExecutor();
    const seen = new Map<string, ExecutionRequest>();
    const executor: AgentExecutor = {
      backends: () => inner.backends(),
      validateDefinition: (backend, definition) => inner.validateDefinition(backend, definition),
      execute(request) {
        seen.set(request.taskId, request);
        return inner.execute(request);
      },
    };
    let h: TasksHarness;

    beforeAll(async () => {
      h = await target.start({ executor });
    }, 60_000);

    afterAll(async () => {
      await h?.close();
      await target.teardown();
    });

    async function runWith(autonomyTier: AutonomyTier): Promise<ExecutionRequest | undefined> {
      const { agent } = await h.agents.createAgent({
        agent: {
          name: `tier-${autonomyTier}`,
          backend: "scripted",
          definition: { entry: "reply", nodes: { reply: { update: { messages: [] } } } },
          tools: ["send_email"],
          autonomyTier,
        },
      });
      const { session } = await h.sessions.createSession({ agentId: agent?.id as string });
      const { task } = await h.tasks.submitTask({
        sessionId: session?.id as string,
        input: text("go"),
      });
      await watchUntil(h, task?.id as string);
      return seen.get(task?.id as string);
    }

    it("hands the backend the approval requirement of the agent's tier", async () => {
      const guarded = await runWith(AutonomyTier.ACT_WITH_APPROVAL);
      expect(guarded?.toolDescriptors).toEqual([{ name: "send_email", requiresApproval: true }]);
      const free = await runWith(AutonomyTier.ACT_AUTO);
      expect(free).toBeDefined();
      expect(free?.toolDescriptors).toBeUndefined();
    });
  });
});
