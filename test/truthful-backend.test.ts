// When routing moves a turn off the agent's own backend, every record names
// the backend that actually ran it: the task (assigned_backend), its events
// (agent.routed) and its receipt (model_route). The agent's backend "plain"
// cannot pause for approvals; its policy requires them and allows
// "scripted", which can — so the router runs the turn on "scripted".
import { Code, ConnectError } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { defineAdapter } from "@trellis/adapter-sdk";
import { Requirement } from "@trellis/contracts/adapters";
import { BlockingReasonsSchema, ErrorDetailSchema, TaskStatus } from "@trellis/contracts/core";
import { ReceiptService } from "@trellis/contracts/receipts";
import {
  AgentService,
  EventService,
  ReceiptPolicy,
  SessionService,
  TaskService,
} from "@trellis/contracts/tasks";
import {
  createRoutedExecutor,
  createScriptedAdapter,
  SCRIPTED_CAPABILITIES,
} from "@trellis/execution";
import { chatToMessage } from "@trellis/messages";
import {
  createMeshClientInterceptor,
  type EmbeddedTrellis,
  processMeshCredentials,
  startEmbedded,
} from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createClients, createLogger } from "@trellis/runtime";
import { createTasksService } from "@trellis/tasks";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** A backend that cannot pause for approvals; it never gets to run here. */
const plain = defineAdapter({
  backendId: "plain",
  capabilities: { ...SCRIPTED_CAPABILITIES, approvalInterrupts: "none" },
  validateDefinition() {},
  async run() {
    return {
      status: "failed",
      messages: [],
      category: "internal_error",
      message: "ran",
      retryable: false,
    };
  },
});

/** Clients of the deployment's services, calling as a mesh peer. */
function clientsOf(trellis: EmbeddedTrellis) {
  const transport = createGrpcTransport({
    baseUrl: trellis.address.url,
    interceptors: [createMeshClientInterceptor(processMeshCredentials(), "test")],
  });
  return createClients(transport, {
    agents: AgentService,
    sessions: SessionService,
    tasks: TaskService,
    events: EventService,
    receipts: ReceiptService,
  });
}

/** Submit "go" in a new session of the agent; the task once it has `status`. */
async function runUntil(
  { sessions, tasks }: ReturnType<typeof clientsOf>,
  agentId: string,
  status: TaskStatus,
) {
  const { session } = await sessions.createSession({ agentId });
  const submitted = await tasks.submitTask({
    sessionId: session?.id ?? "",
    input: chatToMessage({ role: "user", content: "go" }),
  });
  const taskId = submitted.task?.id ?? "";
  return eventually(async () => {
    const { task } = await tasks.getTask({ taskId });
    expect(task?.status).toBe(status);
    return task;
  });
}

describe("records name the backend that ran the turn", () => {
  let trellis: EmbeddedTrellis;
  const routed = createRoutedExecutor({
    mode: "embedded",
    env: {},
    adapters: [createScriptedAdapter(), plain],
  });

  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [createTasksService({ executor: routed.router }), receiptsService],
      port: 0,
      logger: createLogger({ service: "truthful-backend", level: "error", write: () => {} }),
      env: {},
    });
  }, 60_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 100 });
  });

  it("task, events and receipt say scripted, not the agent's plain", async () => {
    const c = clientsOf(trellis);
    const { agents, events, receipts } = c;

    const { agent } = await agents.createAgent({
      agent: {
        name: "moved",
        backend: "plain",
        receiptPolicy: ReceiptPolicy.REQUIRED,
        definition: {
          entry: "reply",
          nodes: { reply: { update: { messages: [{ role: "assistant", content: "done" }] } } },
          routing: {
            backends: ["plain", "scripted"],
            requirements: { approval_interrupts: "required" },
          },
        },
      },
    });
    const task = await runUntil(c, agent?.id ?? "", TaskStatus.COMPLETED);
    const taskId = task?.id ?? "";
    expect(task?.output.length).toBe(1);
    expect(task?.assignedBackend).toBe("scripted");

    const { events: log } = await events.listEvents({ taskId, limit: 1000 });
    const routedEvents = log.filter((e) => e.kind === "agent.routed");
    expect(routedEvents).toHaveLength(1);
    const data = routedEvents[0]?.payload?.kind;
    expect(data?.case).toBe("data");
    expect(data?.case === "data" ? data.value.backend_id : undefined).toBe("scripted");

    const receipt = await eventually(async () => {
      const { receipts: issued } = await receipts.listTaskReceipts({ taskId });
      const found = issued.find((r) => r.subject?.object === "task");
      expect(found).toBeDefined();
      return found;
    });
    const document = JSON.parse(receipt?.documentJson ?? "{}");
    expect(document.model_route.chosen_model).toEqual({ provider: "trellis", model: "scripted" });
  });

  it("a refused turn's blocking reasons arrive typed (backend, capability, code), summarised", async () => {
    const c = clientsOf(trellis);
    const { agents, events } = c;
    // "plain" cannot pause for approvals; twenty more allowed backends have no worker.
    const ghosts = Array.from({ length: 20 }, (_, i) => `ghost-${i}`);
    const { agent } = await agents.createAgent({
      agent: {
        name: "refused",
        backend: "plain",
        definition: {
          routing: {
            backends: ["plain", ...ghosts],
            requirements: { approval_interrupts: "required" },
          },
        },
      },
    });
    const task = await runUntil(c, agent?.id ?? "", TaskStatus.FAILED);
    const taskId = task?.id ?? "";
    expect(task?.failure?.category).toBe("unsupported");
    // The failure itself carries them typed (the proto a client in any language decodes).
    const typed = task?.failure?.blocking;
    expect(typed?.category).toBe("unsupported");
    expect(typed?.reasons).toHaveLength(16);
    expect(typed?.omitted).toBe(5);
    expect(typed?.reasons.find((r) => r.backendId === "plain")).toMatchObject({
      code: "approval_interrupt_unsupported",
      capability: "approval_interrupts",
      severity: "blocking",
    });

    const { events: log } = await events.listEvents({ taskId, limit: 1000 });
    const kinds = log.map((e) => e.kind);
    const blockedAt = kinds.indexOf("agent.blocked");
    expect(blockedAt, kinds.join(",")).toBeGreaterThanOrEqual(0);
    // Before the failure it explains.
    expect(blockedAt).toBeLessThan(kinds.indexOf("task.failed"));
    const payload = log[blockedAt]?.payload?.kind;
    const data = (payload?.case === "data" ? payload.value : {}) as Record<string, unknown>;
    expect(data.category).toBe("unsupported");
    expect(data.retryable).toBe(false);
    const reasons = data.reasons as Record<string, unknown>[];
    // 21 blocking reasons: 16 listed, 5 counted.
    expect(reasons).toHaveLength(16);
    expect(data.omitted).toBe(5);
    expect(reasons).toContainEqual(
      expect.objectContaining({
        backend_id: "plain",
        code: "approval_interrupt_unsupported",
        capability: "approval_interrupts",
        severity: "blocking",
      }),
    );
    expect(reasons).toContainEqual(
      expect.objectContaining({
        backend_id: "ghost-0",
        code: "backend_unavailable",
        capability: "",
      }),
    );
  });
});

// The relational store and the session owner (TRELLIS_TASKS_JOURNAL=owner)
// write and read a task's requirements on different paths: both are checked.
describe.each([
  { store: "relational", env: {} },
  { store: "owner", env: { TRELLIS_TASKS_JOURNAL: "owner" } },
])("per-request requirements ($store store)", ({ env }) => {
  let trellis: EmbeddedTrellis;
  beforeAll(async () => {
    const routed = createRoutedExecutor({
      mode: "embedded",
      env: {},
      adapters: [createScriptedAdapter(), plain],
    });
    trellis = await startEmbedded({
      services: [createTasksService({ executor: routed.router })],
      port: 0,
      logger: createLogger({ service: "truthful-backend", level: "error", write: () => {} }),
      env,
    });
  }, 60_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 100 });
  });

  const clients = () => clientsOf(trellis);
  const approvals = { approvalInterrupts: Requirement.REQUIRED };
  const graph = {
    entry: "reply",
    nodes: { reply: { update: { messages: [{ role: "assistant", content: "done" }] } } },
  };

  it("narrow the agent's, are stored with the task and honoured when it runs later", async () => {
    const { agents, sessions, tasks } = clients();
    // No requirement of its own: its turns run on "plain" (which fails them).
    const { agent } = await agents.createAgent({
      agent: {
        name: "narrowed",
        backend: "plain",
        definition: { ...graph, routing: { backends: ["plain", "scripted"] } },
      },
    });
    const { session } = await sessions.createSession({ agentId: agent?.id ?? "" });
    const sessionId = session?.id ?? "";
    const input = chatToMessage({ role: "user", content: "go" });
    // The first runs at once; the second waits in the mailbox, and is claimed
    // from its stored row: its requirement must come from there.
    const first = await tasks.submitTask({ sessionId, input });
    const second = await tasks.submitTask({ sessionId, input, requirements: approvals });
    const settled = async (taskId: string) =>
      eventually(async () => {
        const { task } = await tasks.getTask({ taskId });
        expect([TaskStatus.COMPLETED, TaskStatus.FAILED]).toContain(task?.status);
        return task;
      });
    const plainRun = await settled(first.task?.id ?? "");
    expect(plainRun?.assignedBackend).toBe("plain");
    expect(plainRun?.status).toBe(TaskStatus.FAILED);
    const narrowedRun = await settled(second.task?.id ?? "");
    expect(narrowedRun?.status).toBe(TaskStatus.COMPLETED);
    expect(narrowedRun?.assignedBackend).toBe("scripted");
    // A replay reruns it under the source task's requirements, not the
    // agent's alone (on "plain" it would fail).
    const replay = await tasks.replayTask({ taskId: narrowedRun?.id ?? "" });
    const replayRun = await settled(replay.task?.id ?? "");
    expect(replayRun?.parentTaskId).toBe(narrowedRun?.id);
    expect(replayRun?.assignedBackend).toBe("scripted");
    expect(replayRun?.status, JSON.stringify(replayRun?.failure)).toBe(TaskStatus.COMPLETED);
  });

  it("that no allowed backend meets refuse the submit with typed details; nothing is stored", async () => {
    const { agents, sessions, tasks } = clients();
    const { agent } = await agents.createAgent({
      agent: { name: "only-plain", backend: "plain", definition: {} },
    });
    const { session } = await sessions.createSession({ agentId: agent?.id ?? "" });
    const sessionId = session?.id ?? "";
    const error = await tasks
      .submitTask({
        sessionId,
        input: chatToMessage({ role: "user", content: "go" }),
        requirements: approvals,
      })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).toBe(Code.FailedPrecondition);
    expect(error?.findDetails(ErrorDetailSchema)[0]?.reason).toBe("agent_blocked");
    const [blocking] = error?.findDetails(BlockingReasonsSchema) ?? [];
    expect(blocking?.category).toBe("unsupported");
    expect(blocking?.reasons).toEqual([
      expect.objectContaining({
        backendId: "plain",
        capability: "approval_interrupts",
        code: "approval_interrupt_unsupported",
        severity: "blocking",
      }),
    ]);
    const { tasks: stored } = await tasks.listTasks({ sessionId });
    expect(stored).toHaveLength(0);
  });

  it("that contradict the agent's are InvalidArgument naming the field", async () => {
    const { agents, sessions, tasks } = clients();
    const { agent } = await agents.createAgent({
      agent: {
        name: "no-tools",
        backend: "scripted",
        definition: { ...graph, routing: { requirements: { tool_use: "forbidden" } } },
      },
    });
    const { session } = await sessions.createSession({ agentId: agent?.id ?? "" });
    const error = await tasks
      .submitTask({
        sessionId: session?.id ?? "",
        input: chatToMessage({ role: "user", content: "go" }),
        requirements: { toolUse: Requirement.REQUIRED },
      })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    expect(error?.code).toBe(Code.InvalidArgument);
    expect(error?.findDetails(ErrorDetailSchema)[0]?.param).toBe("requirements.tool_use");
    expect(error?.rawMessage).toMatch(/requires forbidden/);
  });
});
