// A Trellis agent whose backend is a remote A2A agent (a test agent built
// with @a2a-js/sdk), in both modes: turns complete with the remote reply,
// streamed into the task's events; the credential comes from a vault; the
// remote task id is in the events and the receipt; an input-required pause
// resumes with the next input; cancel reaches the remote agent; and a
// requirement the card does not declare is refused by negotiation.

import { harnClient, type Json, poll } from "@trellis/gateway/testing";
import { type A2aTestAgent, startA2aTestAgent } from "@trellis/testkit/a2a-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";

const TOKEN = "remote-a2a-token";

const modes = gatewayModes({
  name: "a2abk",
  adapters: true,
  receipts: true,
  meshEnv: { TRELLIS_A2A_ALLOW_PRIVATE: "1" },
});

describe.each(modes)("A2A backend through Trellis, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let remote: A2aTestAgent;
  let plain: A2aTestAgent;
  let agentId: string;
  let strictAgentId: string;

  async function status(taskId: string, wanted: string): Promise<Json> {
    return poll(
      async () => {
        const task = await api.get(`/v1/tasks/${taskId}`);
        return task.json.status === wanted ? task.json : undefined;
      },
      { timeoutMs: 30_000, what: `task ${taskId} to be ${wanted}` },
    );
  }

  async function events(taskId: string): Promise<Json[]> {
    return (await api.get(`/v1/tasks/${taskId}/events?limit=200`)).json.data as Json[];
  }

  async function turn(
    input: string,
    agent = agentId,
  ): Promise<{ sessionId: string; taskId: string }> {
    const session = await api.post("/v1/sessions", { persona_id: agent });
    expect(session.status).toBe(201);
    const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input });
    expect(task.status).toBe(202);
    return { sessionId: session.json.id, taskId: task.json.id };
  }

  /** The session's transcript, as text. */
  async function transcript(sessionId: string): Promise<string> {
    const messages = await api.get(`/v1/sessions/${sessionId}/messages?limit=200`);
    expect(messages.status).toBe(200);
    return (messages.json.data as Json[])
      .flatMap((m) => (m.parts as Json[]).map((p) => (p.type === "text" ? p.text : "")))
      .join("\n");
  }

  beforeAll(async () => {
    remote = await startA2aTestAgent({ token: TOKEN });
    plain = await startA2aTestAgent({ token: TOKEN, streaming: false });
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    const vault = await api.post("/v1/vaults", {
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: [],
    });
    expect(vault.status).toBe(201);
    const put = await api.request("PUT", `/v1/vaults/${vault.json.id}/secrets/token`, {
      body: { value: TOKEN },
    });
    expect(put.status).toBeLessThan(300);
    const create = async (name: string, definition: Json) => {
      const persona = await api.post("/v1/personas", { name, entry_workflow: "a2a", definition });
      if (persona.status !== 201) throw new Error(`creating ${name} failed: ${persona.text}`);
      return persona.json.id as string;
    };
    agentId = await create("remote-weather", {
      card_url: remote.cardUrl,
      credential: `${vault.json.id}/token`,
    });
    strictAgentId = await create("remote-needs-streaming", {
      card_url: plain.cardUrl,
      credential: `${vault.json.id}/token`,
      routing: { requirements: { streaming: "required" } },
    });
    const allowed = await api.post(`/v1/vaults/${vault.json.id}`, {
      allowed_agent_ids: [agentId, strictAgentId],
    });
    expect(allowed.status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    await trellis?.close();
    await remote?.close();
    await plain?.close();
  });

  it("completes a turn, streams it, and records the remote task id", async () => {
    const { sessionId, taskId } = await turn("hello remote");
    await status(taskId, "COMPLETED");
    expect(await transcript(sessionId)).toContain("Echo: hello remote");
    expect(remote.authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);
    const log = await poll(
      async () => {
        const all = await events(taskId);
        return all.some((e) => e.event === "tool.completed") ? all : undefined;
      },
      { timeoutMs: 15_000, what: "the remote call's events" },
    );
    const deltas = log.filter((e) => e.event === "agent.text_delta");
    // Streamed (deltas close together may be merged into one event).
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.map((e) => e.payload.text).join("")).toBe("Echo: hello remote");
    const use = log.find((e) => e.event === "agent.tool_use");
    const callId = String(use?.payload?.tool_call_id ?? JSON.stringify(use));
    expect(callId).toMatch(/^a2a:.+/);
    const receipts = await poll(
      async () => {
        const r = await api.get(`/v1/tasks/${taskId}/receipts`);
        return r.status === 200 && (r.json.data as Json[]).length > 0 ? r.json.data : undefined;
      },
      { timeoutMs: 20_000, what: "the task's receipt" },
    );
    expect(JSON.stringify(receipts)).toContain(callId);
  });

  it("resumes a remote input-required pause with the next input", async () => {
    const { sessionId, taskId } = await turn("ask about the weather");
    await status(taskId, "INPUT_REQUIRED");
    const answer = await api.post(`/v1/tasks/${taskId}/messages`, {
      kind: "input",
      message: { role: "user", parts: [{ type: "text", text: "Lyon" }] },
    });
    expect(answer.status).toBe(201);
    await status(taskId, "COMPLETED");
    const text = await transcript(sessionId);
    expect(text).toContain("Which city?");
    expect(text).toContain("Forecast for Lyon: sunny");
    expect(remote.received).toContain("Lyon");
  });

  it("cancels a long turn on the remote agent", async () => {
    const { taskId } = await turn("slow remote work");
    const use = await poll(
      async () => (await events(taskId)).find((e) => e.event === "agent.tool_use"),
      { timeoutMs: 15_000, what: "the remote call to start" },
    );
    const remoteId = String(use.payload.tool_call_id).slice("a2a:".length);
    const cancel = await api.post(`/v1/tasks/${taskId}/cancel`, { reason: "enough" });
    expect(cancel.status).toBe(200);
    await status(taskId, "CANCELED");
    await poll(async () => remote.canceled.includes(remoteId) || undefined, {
      timeoutMs: 10_000,
      what: "the remote agent to get the cancel",
    });
  });

  it("refuses a requirement the card does not declare", async () => {
    const { taskId } = await turn("hello", strictAgentId);
    const task = await status(taskId, "FAILED");
    expect(JSON.stringify(task.failure ?? task)).toMatch(/unsupported|streaming/);
    expect(plain.received).not.toContain("hello");
  });
});
