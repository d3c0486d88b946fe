/**
 * The adapters and tasks services in distributed mode (their own servers on
 * real PostgreSQL and JetStream) with adapter worker processes: the registry
 * and routing RPCs, a task turn run by a remote worker (its degradation in
 * the result), the command adapter as a worker, and a worker killed under a
 * running task (the task fails, never stays WORKING).
 */

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { capabilitiesToProto, eventFromProto, requestToProto } from "@trellis/adapter-sdk";
import {
  ApprovalInterrupts,
  ExecutionRequirementsSchema,
  Requirement,
} from "@trellis/contracts/adapters";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { capabilities } from "@trellis/execution/testing";
import { chatToMessage, textOf } from "@trellis/messages";
import { type RunningService, runService } from "@trellis/platform";
import { errorDetailOf } from "@trellis/runtime";
import { createTasksService } from "@trellis/tasks";
import { eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { openDeployment, type TestDeployment } from "@trellis/testkit/deployment";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdaptersService } from "../src/definition.js";
import { meshClients } from "./support/mesh-clients.js";
import {
  commandWorkerScript,
  echoAgentScript,
  probeWorkerScript,
  startWorkerProcess,
  type WorkerProcess,
} from "./support/processes.js";
import { settledTask } from "./support/settled-task.js";

let deployment: TestDeployment<Parameters<typeof runService>[0], RunningService>;
let adapters: RunningService;
let tasks: RunningService;
const workers: WorkerProcess[] = [];

const workerEnv = (backend: string, extra: Record<string, string> = {}) => ({
  NATS_URL: testNatsUrl,
  TRELLIS_NATS_PREFIX: deployment.prefix,
  TRELLIS_WORKER_HEARTBEAT: "200",
  PROBE_BACKEND: backend,
  ...extra,
});

const meshSecret = `test-mesh-secret-${uniqueName("s")}-0123456789abcdef`;
const clients = meshClients(meshSecret, "adapters-test");

beforeAll(async () => {
  process.env.TRELLIS_LOG_LEVEL ??= "error";
  deployment = await openDeployment("adapters_test", runService, {
    prefix: "adpmesh",
    meshSecret,
    env: {
      TRELLIS_SHUTDOWN_GRACE: "1s",
      TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
      TRELLIS_ADAPTERS_GRACE: "1000",
    },
  });
  [adapters, tasks] = await Promise.all([
    deployment.start(createAdaptersService()),
    deployment.start(createTasksService()),
  ]);
  workers.push(
    ...(await Promise.all([
      startWorkerProcess(probeWorkerScript, workerEnv("remote-probe")),
      startWorkerProcess(probeWorkerScript, workerEnv("doomed")),
      startWorkerProcess(commandWorkerScript, workerEnv("echo-cmd"), [
        "--backend",
        "echo-cmd",
        "--",
        process.execPath,
        echoAgentScript,
      ]),
    ])),
  );
  const { registry } = clients(adapters.address.url);
  await eventually(
    async () => (await registry.listBackends({})).backends.filter((b) => !b.inProcess).length === 3,
    { what: "the workers registered with the adapters service" },
  );
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await deployment?.close();
});

const input = (text: string) => chatToMessage({ role: "user", content: text });

describe("the adapters service (distributed)", () => {
  it("lists in-process and remote backends with their workers", async () => {
    const { registry } = clients(adapters.address.url);
    const { backends } = await registry.listBackends({});
    const byId = new Map(backends.map((b) => [b.backendId, b]));
    expect(byId.get("scripted")).toMatchObject({ inProcess: true });
    expect(byId.get("remote-probe")?.workers.map((w) => w.workerId)).toEqual([
      workers[0]?.workerId,
    ]);
    expect(byId.get("echo-cmd")?.capabilities?.approvalInterrupts).toBe(ApprovalInterrupts.NONE);
  });

  it("negotiates without running, and executes through a worker as a stream", async () => {
    const { routing } = clients(adapters.address.url);
    const request = requestToProto({
      taskId: "tsk_rpc_1",
      sessionId: "ses_rpc",
      workspaceId: "ws_rpc",
      agent: {
        id: "agt_rpc",
        backend: "remote-probe",
        definition: {},
        tools: [],
        routing: { allowedBackends: ["echo-cmd"] },
      },
      history: [],
      input: input("over rpc"),
      requirements: { streaming: "preferred" },
      signal: new AbortController().signal,
    });
    const { decision } = await routing.negotiate({ request });
    expect(decision?.supported).toBe(true);
    expect(decision?.candidates.map((c) => c.backendId).sort()).toEqual([
      "echo-cmd",
      "remote-probe",
    ]);
    const events = [];
    for await (const response of routing.execute({ request })) {
      events.push(eventFromProto(response.event!));
    }
    expect(events[0]).toMatchObject({ kind: "routed", backendId: decision?.backendId });
    const last = events.at(-1);
    expect(last?.kind).toBe("turn_finished");
    if (last?.kind !== "turn_finished") return;
    expect(last.result.status).toBe("completed");
  });

  it("answers bad input with typed errors, never Internal", async () => {
    const { registry, routing } = clients(adapters.address.url);
    const reject = async (call: Promise<unknown>) => {
      try {
        await call;
      } catch (error) {
        const e = ConnectError.from(error);
        return { code: e.code, reason: errorDetailOf(e)?.reason, param: errorDetailOf(e)?.param };
      }
      throw new Error("accepted");
    };
    expect(
      await reject(
        registry.registerBackend({
          worker: {
            workerId: "w 1",
            backendId: "x",
            capabilities: capabilitiesToProto(capabilities()),
            capacity: 1,
            heartbeatIntervalMs: 1000,
          },
        }),
      ),
    ).toEqual({
      code: Code.InvalidArgument,
      reason: "adapter_registration_invalid",
      param: "worker.worker_id",
    });
    expect(
      await reject(
        registry.registerBackend({
          worker: { workerId: "w1", backendId: "x", capacity: 1, heartbeatIntervalMs: 1000 },
        }),
      ),
    ).toMatchObject({
      code: Code.InvalidArgument,
      reason: "execution_contract_invalid",
      param: "worker.capabilities",
    });
    expect(await reject(registry.heartbeat({ workerId: "nobody", inFlight: 0 }))).toMatchObject({
      code: Code.NotFound,
      reason: "adapter_worker_not_found",
    });
    expect(await reject(routing.execute({})[Symbol.asyncIterator]().next())).toMatchObject({
      code: Code.InvalidArgument,
      param: "request",
    });
    const badRequirements = requestToProto({
      taskId: "t",
      sessionId: "s",
      workspaceId: "w",
      agent: { id: "a", backend: "remote-probe", definition: {}, tools: [] },
      history: [],
      input: input("x"),
      signal: new AbortController().signal,
    });
    badRequirements.requirements = create(ExecutionRequirementsSchema, {
      toolUse: Requirement.PREFERRED,
    });
    expect(await reject(routing.negotiate({ request: badRequirements }))).toMatchObject({
      code: Code.InvalidArgument,
      param: "request.requirements.tool_use",
    });
  });

  it("registers a worker over gRPC, shares it with the mesh, and drops it on deregistration", async () => {
    const { registry } = clients(adapters.address.url);
    const { ttlMs } = await registry.registerBackend({
      worker: {
        workerId: "grpc-worker-1",
        backendId: "grpc-backend",
        capabilities: capabilitiesToProto(capabilities({ attachments: true })),
        capacity: 4,
        heartbeatIntervalMs: 1000,
      },
    });
    expect(ttlMs).toBe(3000);
    // The tasks service routes with its own router: it heard the announcement over NATS.
    const tasksClients = clients(tasks.address.url);
    await eventually(
      async () => {
        try {
          await tasksClients.agents.createAgent({
            agent: { name: "g", backend: "grpc-backend", definition: {} },
          });
          return true;
        } catch {
          return false;
        }
      },
      { what: "the tasks router knows grpc-backend" },
    );
    await registry.heartbeat({ workerId: "grpc-worker-1", inFlight: 2 });
    const listed = (await registry.listBackends({})).backends.find(
      (b) => b.backendId === "grpc-backend",
    );
    expect(listed?.workers[0]).toMatchObject({
      workerId: "grpc-worker-1",
      capacity: 4,
      inFlight: 2,
    });
    await registry.deregisterBackend({ workerId: "grpc-worker-1" });
    const after = (await registry.listBackends({})).backends.map((b) => b.backendId);
    expect(after).not.toContain("grpc-backend");
  });
});

describe("tasks routed to remote workers", () => {
  async function submit(
    agent: { backend: string; definition?: object; safeToRetry?: boolean },
    text: string,
  ) {
    const c = clients(tasks.address.url);
    const { agent: created } = await c.agents.createAgent({
      agent: {
        name: `a-${agent.backend}`,
        backend: agent.backend,
        definition: (agent.definition ?? {}) as never,
        safeToRetry: agent.safeToRetry ?? false,
      },
    });
    const { session } = await c.sessions.createSession({ agentId: created?.id ?? "" });
    const { task } = await c.tasks.submitTask({ sessionId: session?.id ?? "", input: input(text) });
    return { c, taskId: task?.id as string };
  }

  const settled = (c: ReturnType<typeof clients>, taskId: string) =>
    settledTask(c.tasks, taskId, { timeoutMs: 20_000 });

  it("runs a task turn on a remote worker", async () => {
    const { c, taskId } = await submit({ backend: "remote-probe" }, "remote hello");
    const task = await settled(c, taskId);
    expect(task.status).toBe(TaskStatus.COMPLETED);
    expect(task.output.map((m) => [m.role, textOf(m)])).toEqual([
      [Role.ASSISTANT, "remote-probe says: remote hello"],
    ]);
    expect(workers[0]?.ran()).toContain(taskId);
  });

  it("runs a task turn through the command adapter worker (any executable)", async () => {
    const { c, taskId } = await submit({ backend: "echo-cmd" }, "from a task");
    const task = await settled(c, taskId);
    expect(task.status).toBe(TaskStatus.COMPLETED);
    expect(task.output.map(textOf)).toEqual(["echo: from a task"]);
  });

  it("fails a turn whose required capability no allowed backend has, with the reason", async () => {
    const { c, taskId } = await submit(
      {
        backend: "remote-probe",
        definition: {
          routing: { backends: ["echo-cmd"], requirements: { approval_interrupts: "required" } },
        },
      },
      "needs approvals",
    );
    const task = await settled(c, taskId);
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("unsupported");
    expect(task.failure?.message).toContain("approval_interrupt_unsupported");
  });

  it("never leaves a task WORKING when its worker is killed mid-turn", async () => {
    const doomed = workers[1] as WorkerProcess;
    const { c, taskId } = await submit({ backend: "doomed" }, "sleep 30000");
    await eventually(() => doomed.ran().includes(taskId), { what: "the worker started the turn" });
    const { task: running } = await c.tasks.getTask({ taskId });
    expect(running?.status).toBe(TaskStatus.WORKING);
    await doomed.kill();
    const task = await settled(c, taskId);
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("worker_lost");
  });
});
