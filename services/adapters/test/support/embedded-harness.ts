/**
 * Embedded Trellis (every service in one process on PGlite, definitions as
 * shipped) whose harness talks to the recorded OpenAI server, for the tests
 * of the harness in embedded mode: start it, create a harness agent, run a
 * turn until it settles.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { TaskStatus } from "@trellis/contracts/core";
import { AgentService, type Task, TaskService } from "@trellis/contracts/tasks";
import { type RecordedServer, startRecordedServer } from "@trellis/execution/testing";
import { chatToMessage } from "@trellis/messages";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { createTasksService } from "@trellis/tasks";
import { uniqueName } from "@trellis/testkit";
import { createAdaptersService } from "../../src/definition.js";
import { settledTask } from "./settled-task.js";

/** Starts the recorded server, then Trellis with OpenAI at it (`openaiKey`) and the harness tools of `toolsModule`. */
export async function startEmbeddedHarness(options: {
  openaiKey: string;
  toolsModule: string;
}): Promise<{ server: RecordedServer; trellis: EmbeddedTrellis }> {
  const server = await startRecordedServer();
  try {
    const trellis = await startEmbedded({
      services: [createTasksService(), createAdaptersService()],
      port: 0,
      env: {
        TRELLIS_LOG_LEVEL: "error",
        OPENAI_API_KEY: options.openaiKey,
        OPENAI_BASE_URL: `${server.url}/v1`,
        TRELLIS_HARNESS_TOOLS: options.toolsModule,
      },
      logger: createLogger({ service: "test", level: "error" }),
    });
    return { server, trellis };
  } catch (error) {
    // The caller never sees the server, so it cannot close it.
    await server.close();
    throw error;
  }
}

/** Creates a harness agent; its id. */
export async function createHarnessAgent(
  trellis: EmbeddedTrellis,
  name: string,
  definition: JsonObject,
): Promise<string> {
  const { agent } = await trellis
    .client(AgentService)
    .createAgent({ agent: { name, backend: "harness", definition } });
  return agent?.id as string;
}

/** Submits `text` to `agentId` in a new session; the task once it completed or failed. */
export async function settledTurn(
  trellis: EmbeddedTrellis,
  agentId: string,
  text: string,
  timeoutMs: number,
): Promise<{ task: Task; sessionId: string }> {
  const sessionId = uniqueName("ses");
  const tasks = trellis.client(TaskService);
  const { task } = await tasks.submitTask({
    sessionId,
    agentId,
    createSession: true,
    input: chatToMessage({ role: "user", content: text }),
  });
  const settled = await settledTask(tasks, task?.id as string, {
    timeoutMs,
    intervalMs: 50,
    until: [TaskStatus.COMPLETED, TaskStatus.FAILED],
  });
  return { task: settled, sessionId };
}
