/**
 * `trellis serve adapter-worker` as a real process in a distributed mesh
 * (tasks and adapters services on real PostgreSQL and JetStream), its
 * harness talking to the recorded OpenAI server:
 *
 * - it serves gRPC health and registers its backends with the mesh;
 * - a harness agent's tool-loop turn runs on it end to end into the
 *   session transcript (assistant tool call → tool → assistant final);
 * - the scripted backend runs on it for a router that has none in process;
 * - killed mid-turn, the task fails (`worker_lost`), never stays WORKING;
 * - SIGTERM lets the running turn finish, then the process exits 0;
 * - its harness tools read vault secrets through the router that granted the
 *   turn, under the vault's access policy, and record each read with the
 *   fingerprint the router sent (the worker holds no fingerprint key).
 */
import { createHash, randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { Code, ConnectError } from "@connectrpc/connect";
import { ApprovalInterrupts } from "@trellis/contracts/adapters";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { createRoutedExecutor } from "@trellis/execution";
import {
  fixture,
  OPENAI_CHAT,
  type RecordedServer,
  startRecordedServer,
} from "@trellis/execution/testing";
import { chatToMessage, textOf } from "@trellis/messages";
import {
  distributedFingerprints,
  MeshCredentials,
  type RunningService,
  runService,
} from "@trellis/platform";
import { createTasksService } from "@trellis/tasks";
import { eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { openDeployment, type TestDeployment } from "@trellis/testkit/deployment";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdaptersService } from "../src/definition.js";
import { meshClients } from "./support/mesh-clients.js";
import { settledTask } from "./support/settled-task.js";
import {
  type AdapterWorkerProcess,
  startAdapterWorkerProcess,
  workerToolsModule,
} from "./worker-support.js";

const meshSecret = `test-mesh-secret-${uniqueName("s")}-0123456789abcdef`;
const clients = meshClients(meshSecret, "worker-test");
let deployment: TestDeployment<Parameters<typeof runService>[0], RunningService>;
let server: RecordedServer;
let adapters: RunningService;
let tasks: RunningService;
const workers: AdapterWorkerProcess[] = [];

function workerEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    NATS_URL: testNatsUrl,
    TRELLIS_NATS_PREFIX: deployment.prefix,
    TRELLIS_WORKER_HEARTBEAT: "200",
    TRELLIS_WORKER_BACKENDS: "harness,scripted",
    OPENAI_API_KEY: "sk-test-recorded",
    OPENAI_BASE_URL: `${server.url}/v1`,
    TRELLIS_HARNESS_TOOLS: workerToolsModule,
    DATABASE_URL: deployment.db.url,
    ...extra,
  };
}

async function startWorker(extra: Record<string, string> = {}): Promise<AdapterWorkerProcess> {
  const worker = await startAdapterWorkerProcess(workerEnv(extra));
  workers.push(worker);
  await worker.ready();
  // The tasks service hears it too (createHarnessAgent waits for that).
  const { registry } = clients(adapters.address.url);
  await eventually(
    async () =>
      (await registry.listBackends({})).backends
        .find((b) => b.backendId === "harness")
        ?.workers.some((w) => worker.workerIds().includes(w.workerId)),
    { timeoutMs: 15_000, what: "the adapters service knows the worker" },
  );
  return worker;
}

beforeAll(async () => {
  process.env.TRELLIS_LOG_LEVEL ??= "error";
  server = await startRecordedServer();
  deployment = await openDeployment("adapter_worker", runService, {
    prefix: "adpworker",
    meshSecret,
    env: {
      TRELLIS_SHUTDOWN_GRACE: "1s",
      TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
      TRELLIS_ADAPTERS_GRACE: "1000",
      TRELLIS_VAULT_KEY: randomBytes(32).toString("base64"),
    },
  });
  adapters = await deployment.start(createAdaptersService());
  // The tasks service reads vaults for remote workers from the adapters service.
  tasks = await deployment.start(createTasksService(), {
    TRELLIS_ADAPTERS_URL: adapters.address.url,
  });
  await startWorker();
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill()));
  await deployment?.close();
  await server?.close();
});

async function createHarnessAgent(name: string, safeToRetry = false): Promise<string> {
  const c = clients(tasks.address.url);
  // The tasks router learns of the worker from its heartbeats; until then the backend is unknown.
  const { agent } = await eventually(
    async () => {
      try {
        return await c.agents.createAgent({
          agent: {
            name,
            backend: "harness",
            safeToRetry,
            definition: {
              provider: "openai",
              model: "gpt-4o-mini",
              system: "You are a helpful assistant.",
              tools: ["get_weather"],
              stream: true,
            },
          },
        });
      } catch (error) {
        if (ConnectError.from(error).code === Code.InvalidArgument) return undefined;
        throw error;
      }
    },
    { timeoutMs: 15_000, what: "the tasks service accepts a harness agent" },
  );
  return agent?.id as string;
}

async function submit(
  agentId: string,
  text: string,
): Promise<{ taskId: string; sessionId: string }> {
  const c = clients(tasks.address.url);
  const sessionId = uniqueName("ses");
  const { task } = await c.tasks.submitTask({
    sessionId,
    agentId,
    createSession: true,
    input: chatToMessage({ role: "user", content: text }),
  });
  return { taskId: task?.id as string, sessionId };
}

function settled(taskId: string): Promise<Task> {
  return settledTask(clients(tasks.address.url).tasks, taskId, {
    timeoutMs: 30_000,
    intervalMs: 100,
  });
}

function summary(messages: readonly Message[]) {
  return messages.map((m) => [
    Role[m.role],
    textOf(m),
    m.toolCalls.map((c) => c.name).join(","),
    m.toolCallId,
  ]);
}

describe("trellis serve adapter-worker", () => {
  it("serves gRPC health and registers its backends with the mesh", async () => {
    const [worker] = workers as [AdapterWorkerProcess];
    expect(await worker.health()).toBe("SERVING");
    const { backends } = await clients(adapters.address.url).registry.listBackends({});
    const harness = backends.find((b) => b.backendId === "harness");
    expect(harness?.inProcess).toBe(false);
    expect(harness?.capabilities?.approvalInterrupts).toBe(ApprovalInterrupts.NATIVE);
    expect(harness?.workers.map((w) => w.workerId)).toEqual(
      worker.workerIds().filter((id) => id.startsWith("harness-")),
    );
  });

  it("runs a harness agent's tool-loop turn through the mesh into the transcript", async () => {
    const [worker] = workers as [AdapterWorkerProcess];
    const agentId = await createHarnessAgent("weather");
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.stream.http"),
      fixture("openai/chat-weather-final.stream.http"),
    );
    const runsBefore = worker.toolRuns("get_weather");
    const { taskId, sessionId } = await submit(agentId, "What's the weather in Paris?");
    const task = await settled(taskId);
    expect(task.status, task.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(server.pending()).toEqual({});
    const { messages } = await clients(tasks.address.url).sessions.listMessages({
      sessionId,
      pageSize: 100,
    });
    const transcript = messages.map((m) => m.message as Message);
    expect(summary(transcript)).toEqual([
      ["USER", "What's the weather in Paris?", "", ""],
      ["ASSISTANT", "", "get_weather", ""],
      ["TOOL", '{"city":"Paris","temperature_c":18,"sky":"sunny"}', "", expect.any(String)],
      ["ASSISTANT", "It's 18°C and sunny in Paris.", "", ""],
    ]);
    expect(transcript[2]?.toolCallId).toBe(transcript[1]?.toolCalls[0]?.id);
    // The tool ran in the worker process, once; the model's usage is recorded.
    expect(worker.toolRuns("get_weather")).toBe(runsBefore + 1);
    expect(transcript[1]?.metadata?.["llm:main:1"]).toMatchObject({
      usage: { prompt_tokens: 82, completion_tokens: 17, total_tokens: 99 },
    });
    // The provider got the deployment's key, never one from the agent.
    expect(server.requests.at(-1)?.headers.authorization).toBe("Bearer sk-test-recorded");
  });

  it("runs the scripted backend for a router that has no in-process one", async () => {
    const routed = createRoutedExecutor({
      mode: "distributed",
      env: {
        NATS_URL: testNatsUrl,
        TRELLIS_NATS_PREFIX: deployment.prefix,
        TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
      },
      adapters: [],
    });
    await routed.start();
    try {
      await eventually(() => routed.registry.backends().some((b) => b.backendId === "scripted"), {
        what: "the router heard the worker's scripted backend",
      });
      const events: string[] = [];
      const result = await routed.router.execute({
        taskId: "tsk_worker_scripted",
        sessionId: "ses_worker_scripted",
        workspaceId: "ws_worker",
        agent: {
          id: "agt_worker_scripted",
          backend: "scripted",
          tools: [],
          definition: {
            entry: "reply",
            nodes: {
              reply: { update: { messages: [{ role: "assistant", content: "hi {{input}}" }] } },
            },
          },
        },
        history: [],
        input: chatToMessage({ role: "user", content: "remote" }),
        signal: new AbortController().signal,
        onEvent: (event) => events.push(event.kind),
      });
      expect(result.status).toBe("completed");
      expect(result.messages.map(textOf)).toEqual(["hi remote"]);
      expect(events[0]).toBe("routed");
    } finally {
      await routed.stop();
    }
  });

  it("never leaves a task WORKING when the worker is killed mid-turn", async () => {
    const [worker] = workers.splice(0, 1) as [AdapterWorkerProcess];
    const agentId = await createHarnessAgent("doomed");
    // The model takes its time: the worker is mid-turn, waiting on the provider.
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-final.stream.http", { delayMs: 60_000 }),
    );
    const requestsBefore = server.requests.length;
    const { taskId } = await submit(agentId, "What's the weather in Paris?");
    await eventually(() => server.requests.length > requestsBefore, {
      timeoutMs: 15_000,
      what: "the worker called the model",
    });
    const { task: running } = await clients(tasks.address.url).tasks.getTask({ taskId });
    expect(running?.status).toBe(TaskStatus.WORKING);
    await worker.kill();
    const task = await settled(taskId);
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("worker_lost");
  });

  it("drains on SIGTERM: the running turn finishes, then the process exits 0", async () => {
    const worker = await startWorker();
    const agentId = await createHarnessAgent("drained");
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-final.stream.http", { delayMs: 3_000 }),
    );
    const requestsBefore = server.requests.length;
    const { taskId } = await submit(agentId, "What's the weather in Paris?");
    await eventually(() => server.requests.length > requestsBefore, {
      timeoutMs: 15_000,
      what: "the worker called the model",
    });
    const exitCode = worker.stop();
    // Draining: no longer ready, while the turn it holds runs on.
    await eventually(async () => (await worker.health()) === "NOT_SERVING", {
      timeoutMs: 5_000,
      what: "NOT_SERVING while draining",
    });
    const { task: draining } = await clients(tasks.address.url).tasks.getTask({ taskId });
    expect(draining?.status).toBe(TaskStatus.WORKING);
    const task = await settled(taskId);
    expect(
      task.status,
      `${task.failure?.category}: ${task.failure?.message}\n${worker.output()}`,
    ).toBe(TaskStatus.COMPLETED);
    expect(task.output.map(textOf)).toEqual(["It's 18°C and sunny in Paris."]);
    expect(await exitCode).toBe(0);
    // It left the mesh: the routers drop it at once, not after missed heartbeats.
    const { backends } = await clients(adapters.address.url).registry.listBackends({});
    const ids = backends.flatMap((b) => b.workers.map((w) => w.workerId));
    for (const id of worker.workerIds()) expect(ids).not.toContain(id);
  });

  it("gives its tools the vault secrets the agent may read, through the router", async () => {
    const worker = await startWorker({
      TRELLIS_HARNESS_TOOLS: fileURLToPath(new URL("./vault-tools.ts", import.meta.url)),
    });
    const allowed = await createHarnessAgent("vault-reader");
    const other = await createHarnessAgent("vault-outsider");
    const value = `remote-vault-${randomBytes(12).toString("hex")}`;
    const { vaults } = clients(adapters.address.url);
    const workspaceId = (await clients(tasks.address.url).agents.getAgent({ agentId: allowed }))
      .agent?.workspaceId as string;
    await vaults.createVault({ vaultId: "vlt_weather", workspaceId, allowedAgentIds: [allowed] });
    await vaults.putSecret({ vaultId: "vlt_weather", name: "WEATHER_API_KEY", value });

    const toolOutput = async (agentId: string) => {
      server.enqueue(
        OPENAI_CHAT,
        fixture("openai/chat-weather-tool-call.stream.http"),
        fixture("openai/chat-weather-final.stream.http"),
      );
      const { taskId, sessionId } = await submit(agentId, "What's the weather in Paris?");
      const task = await settled(taskId);
      expect(task.status, `${task.failure?.message}\n${worker.output()}`).toBe(
        TaskStatus.COMPLETED,
      );
      const { messages } = await clients(tasks.address.url).sessions.listMessages({
        sessionId,
        pageSize: 100,
      });
      const tool = messages.map((m) => m.message as Message).find((m) => m.role === Role.TOOL);
      const json = JSON.stringify(messages, (_k, v) => (typeof v === "bigint" ? 0 : v));
      expect(json).not.toContain(value);
      expect(json).not.toContain(plainHash);
      return tool as Message;
    };
    // The value's plain hash (what records held before fingerprints): nowhere.
    const plainHash = createHash("sha256").update(JSON.stringify(value)).digest("hex");
    // The allowed agent's tool got the value (it answers with its hash).
    const grantedTool = await toolOutput(allowed);
    const granted = textOf(grantedTool);
    expect(granted.startsWith("{"), granted).toBe(true);
    expect(JSON.parse(granted)).toMatchObject({
      key_sha256: createHash("sha256").update(value).digest("hex"),
    });
    // The worker holds no fingerprint key: its record carries the fingerprint
    // the router sent with the secret, the deployment's (from the mesh secret).
    const record = grantedTool.metadata?.["secret:vlt_weather/WEATHER_API_KEY"];
    expect(record).toEqual({
      kind: "secret_value",
      name: "vlt_weather/WEATHER_API_KEY",
      set: true,
      fingerprint: distributedFingerprints({}, new MeshCredentials(meshSecret)).of(value),
      tool_call_id: grantedTool.toolCallId,
    });
    // Another agent's tool is refused, naming the secret, never the value.
    const refused = textOf(await toolOutput(other));
    expect(refused).toContain("secret_denied");
    expect(refused).toContain("vlt_weather/WEATHER_API_KEY");
    await worker.stop();
  });
});
