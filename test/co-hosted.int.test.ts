// Chat in the tasks process (`trellis serve tasks,chat`, the default of
// `trellis mesh`): the two services in one distributed process on the real
// Postgres and NATS, reached through the gateway as in any mesh. Turns
// complete and keep their order, the process answers for both services, and
// a kill -9 of it loses no answered turn: after a restart the session goes on.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { bearer, uniqueName } from "@trellis/testkit";
import { testGround } from "@trellis/testkit/ground";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth, type Mesh, startMesh } from "../src/mesh.js";

const apiKey = "trellis-cohosted-admin-key-0123456789";
const graph = {
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
};

describe("chat hosted in the tasks process", () => {
  let mesh: Mesh;
  const ground = testGround("cohost");

  beforeAll(async () => {
    mesh = await startMesh({
      ...(await ground.prepare()),
      together: [["tasks", "chat"]],
      env: { TRELLIS_API_KEY: apiKey, TRELLIS_LOG_LEVEL: "warn" },
    });
  }, 120_000);

  afterAll(async () => {
    await mesh?.stop();
    await ground.remove();
  });

  const clients = () => {
    const transport = createGrpcTransport({
      baseUrl: mesh.urls.gateway as string,
      interceptors: [bearer(apiKey)],
    });
    return {
      chat: createClient(ChatService, transport),
      agents: createClient(AgentService, transport),
    };
  };

  const say = (sessionId: string, agentId: string, text: string) =>
    clients().chat.send({
      sessionId,
      agentId,
      message: { role: Role.USER, parts: [{ kind: { case: "text", value: { text } } }] },
    });

  it("runs one process for both, at one address, SERVING", async () => {
    expect(mesh.urls.chat).toBe(mesh.urls.tasks);
    expect(Object.keys(mesh.pids()).sort()).toEqual(["adapters", "gateway", "receipts", "tasks"]);
    expect(await checkHealth(mesh.urls.chat as string)).toBe("SERVING");
  });

  it("completes chat turns in order, and goes on after a kill -9 of the process", async () => {
    const { agents, chat } = clients();
    const { agent } = await agents.createAgent({
      agent: {
        workspaceId: "default",
        name: "cohost-zero",
        backend: "scripted",
        definition: graph,
      },
    });
    const agentId = agent?.id ?? "";
    const sessionId = `ses_${uniqueName("c")}`;
    for (const text of ["one", "two", "three"]) {
      const { outcome } = await say(sessionId, agentId, text);
      expect(outcome?.kind.case).toBe("completed");
    }

    // Killing "chat" kills the process that hosts it, tasks with it.
    await mesh.kill("chat");
    await expect(checkHealth(mesh.urls.tasks as string, 500)).rejects.toThrow();
    await mesh.restart("chat");
    expect(Object.keys(mesh.pids()).sort()).toEqual(["adapters", "gateway", "receipts", "tasks"]);
    const { outcome } = await say(sessionId, agentId, "four");
    expect(outcome?.kind.case).toBe("completed");

    const { messages } = await chat.getHistory({ sessionId });
    const said = messages
      .filter((m) => m.role === Role.USER)
      .map((m) => (m.parts[0]?.kind.case === "text" ? m.parts[0].kind.value.text : ""));
    expect(said).toEqual(["one", "two", "three", "four"]);
    expect(messages.filter((m) => m.role === Role.ASSISTANT)).toHaveLength(4);
  }, 90_000);
});
