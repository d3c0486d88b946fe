/**
 * Chat keeps no state of its own (distributed mode): a chat process killed
 * (SIGKILL) while a Send is in flight loses nothing. The turn runs on in the
 * tasks service and its reply lands in the history; the client's retry with
 * the same idempotency key, to a restarted chat, is the same turn (same task
 * id) and the transcript holds exactly one reply.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { TaskStatus } from "@trellis/contracts/core";
import { AgentService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { chatToMessage, messageToChat } from "@trellis/messages";
import {
  createMeshClientInterceptor,
  processMeshCredentials,
  type RunningService,
  runService,
} from "@trellis/platform";
import { tasksService } from "@trellis/tasks";
import { eventually, freePort, untilPrinted } from "@trellis/testkit";
import { openDeployment, type TestDeployment } from "@trellis/testkit/deployment";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replyGraph, scriptedAgent } from "./support.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));

// Direct calls, as another mesh service would make them (service credentials;
// the chat processes get the secret from this process's environment).
const asMeshPeer = createMeshClientInterceptor(processMeshCredentials(), "test");

let deployment: TestDeployment<Parameters<typeof runService>[0], RunningService>;
let tasks: RunningService;
let env: Record<string, string>;
const children = new Set<ChildProcess>();

/** Start `services/chat/src/main.ts` as its own process; resolves once it listens. */
async function spawnChat(): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "services/chat/src/main.ts"], {
    cwd: root,
    env: { ...process.env, ...env, PORT: String(port), TRELLIS_LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  child.on("exit", () => children.delete(child));
  await untilPrinted(child, /"msg":"listening"/, "chat", 30_000);
  return { child, url: `http://127.0.0.1:${port}` };
}

function killed(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

beforeAll(async () => {
  deployment = await openDeployment("trellis_chat_kill", runService, { prefix: "chatkill" });
  tasks = await deployment.start(tasksService);
  env = { ...deployment.env, TRELLIS_TASKS_URL: tasks.address.url };
});

afterAll(async () => {
  await Promise.all([...children].map(killed));
  await deployment?.close();
});

describe("chat process killed mid-Send (distributed mode)", () => {
  it("the turn completes anyway and a retried Send is the same turn, replied once", async () => {
    const tasksTransport = createGrpcTransport({
      baseUrl: tasks.address.url,
      interceptors: [asMeshPeer],
    });
    const agents = createClient(AgentService, tasksTransport);
    const sessions = createClient(SessionService, tasksTransport);
    const taskClient = createClient(TaskService, tasksTransport);
    const agentId = await scriptedAgent({ agents }, "slow", {
      ...replyGraph([{ role: "assistant", content: "slow reply to {{input}}" }]),
      nodes: {
        reply: {
          update: {
            messages: [{ role: "assistant", content: "slow reply to {{input}}" }],
            delay_ms: 1000,
          },
        },
      },
    });
    const sessionId = `ses_kill_${Date.now().toString(36)}`;
    const request = {
      sessionId,
      agentId,
      message: chatToMessage({ role: "user", content: "hello" }),
      idempotencyKey: `idem-${sessionId}`,
    };

    const first = await spawnChat();
    const chat = createClient(
      ChatService,
      createGrpcTransport({ baseUrl: first.url, interceptors: [asMeshPeer] }),
    );
    const inFlight = chat.send(request).then(
      () => "answered" as const,
      () => "failed" as const,
    );
    // The turn is submitted and running (its session exists) before the kill.
    const running = await eventually(async () => {
      const { tasks: list } = await taskClient.listTasks({ sessionId });
      const task = list[0];
      if (task?.status !== TaskStatus.WORKING) throw new Error("not running yet");
      return task;
    });
    await killed(first.child);
    expect(await inFlight).toBe("failed");

    // The turn finishes without chat, and its reply is in the history.
    const transcript = async () =>
      (await sessions.listMessages({ sessionId })).messages.map((m) => ({
        task: m.taskId,
        ...messageToChat(m.message!),
      }));
    await eventually(async () => {
      const { task } = await taskClient.getTask({ taskId: running.id });
      if (task?.status !== TaskStatus.COMPLETED) throw new Error(`task is ${task?.status}`);
      return true;
    });
    expect(await transcript()).toEqual([
      { task: running.id, role: "user", content: "hello" },
      { task: running.id, role: "assistant", content: "slow reply to hello" },
    ]);

    // The client retries with the same key, to a restarted chat.
    const second = await spawnChat();
    const retried = await createClient(
      ChatService,
      createGrpcTransport({ baseUrl: second.url, interceptors: [asMeshPeer] }),
    ).send(request);
    expect(retried.outcome?.taskId).toBe(running.id);
    expect(retried.outcome?.kind.case).toBe("completed");
    const replies =
      retried.outcome?.kind.case === "completed" ? retried.outcome.kind.value.replies : [];
    expect(replies.map((m) => messageToChat(m))).toEqual([
      { role: "assistant", content: "slow reply to hello" },
    ]);
    const after = await transcript();
    expect(after.filter((m) => m.role === "assistant")).toHaveLength(1);
    expect(after).toHaveLength(2);
    await killed(second.child);
  });
});
