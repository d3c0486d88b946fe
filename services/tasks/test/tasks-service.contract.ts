/**
 * The tasks service's behaviour, one suite every backend passes: embedded
 * (PGlite + in-process log) and distributed (PostgreSQL + JetStream). Each
 * backend adds a two-line spec file.
 *
 * Everything goes through a real transport (gRPC over h2c), with the
 * scripted graph backend as the agent (plus the test backends of
 * support/test-executor.ts where timing must be controlled).
 */
import { afterAll, beforeAll, describe } from "vitest";
import { describeAgentState } from "./contract/agent-state.contract.js";
import { describeLifecycle } from "./contract/lifecycle.contract.js";
import { describeRequestsAndEvents } from "./contract/requests.contract.js";
import { describeSessions } from "./contract/sessions.contract.js";
import { type SuiteAgents, suiteHelpers, type TasksSuite } from "./contract/suite.js";
import { describeWorkspaces } from "./contract/workspaces.contract.js";
import { APPROVAL_GRAPH, createAgent, FAILING_GRAPH, TOOL_AUTH_GRAPH } from "./support/fixtures.js";
import type { TasksHarness, TasksTarget } from "./support/harness.js";
import { createTestExecutor } from "./support/test-executor.js";

/** Runs the shared suite against `target`. */
export function describeTasksService(name: string, makeTarget: () => TasksTarget): void {
  describe(`tasks service (${name})`, () => {
    const target = makeTarget();
    const { executor, probe, gates } = createTestExecutor();
    let h: TasksHarness;
    let agents: SuiteAgents;

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

    const suite: TasksSuite = {
      name,
      get h() {
        return h;
      },
      get agents() {
        return agents;
      },
      executor,
      probe,
      gates,
      ...suiteHelpers(() => h),
    };
    describeAgentState(suite);
    describeLifecycle(suite);
    describeSessions(suite);
    describeRequestsAndEvents(suite);
    describeWorkspaces(suite);
  });
}
