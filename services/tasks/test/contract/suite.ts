/**
 * What the tasks service contract's parts (contract/*.contract.ts) share:
 * the harness, the agents made for the suite and small helpers over them,
 * set up by describeTasksService (tasks-service.contract.ts).
 */
import type { ConnectError } from "@connectrpc/connect";
import { errorDetailOf } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import type { TasksHarness } from "../support/harness.js";
import type { createTestExecutor } from "../support/test-executor.js";

/** The agents every part may use, made in the suite's beforeAll. */
export interface SuiteAgents {
  approval: string;
  toolAuth: string;
  failing: string;
  gate: string;
  gateTool: string;
  broken: string;
}

/** One backend's suite; `h` and `agents` are valid once its beforeAll ran. */
export type TasksSuite = {
  readonly name: string;
  readonly h: TasksHarness;
  readonly agents: SuiteAgents;
} & ReturnType<typeof createTestExecutor> &
  ReturnType<typeof suiteHelpers>;

/** Helpers over the suite's harness (`harness()` is read when they run). */
export function suiteHelpers(harness: () => TasksHarness) {
  async function newSession(agentId = ""): Promise<string> {
    const { session } = await harness().sessions.createSession({ agentId });
    return session?.id as string;
  }

  async function transcript(sessionId: string) {
    const { messages } = await harness().sessions.listMessages({ sessionId, pageSize: 1000 });
    return messages;
  }

  async function eventKinds(request: { sessionId?: string; taskId?: string }, count: number) {
    return eventually(
      async () => {
        const { events } = await harness().events.listEvents({ ...request, limit: 1000 });
        return events.length >= count ? events : undefined;
      },
      { what: `${count} events` },
    );
  }

  return { newSession, transcript, eventKinds };
}

/** ErrorDetail.param of a Connect error: the field the error is about. */
export function errorParam(error: ConnectError): string | undefined {
  return errorDetailOf(error)?.param;
}
