/**
 * Replay and fork over REST (Harn `POST /v1/tasks/{id}/replay`,
 * `POST /v1/sessions/{id}/fork`), black-box: plain `fetch` against an
 * embedded gateway and tasks service.
 */

import { harnClient, type Json, poll } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-replay-admin-key-0123456789";

/** Greets, waits for an approval, then confirms with what the signal said. */
const approvalGraph = {
  entry: "greet",
  nodes: {
    greet: { update: { messages: [{ role: "assistant", content: "Hello {{input}}" }] } },
    wait: { suspend: { signal_id: "approval" } },
    done: { update: { messages: [{ role: "assistant", content: "approved: {{signal}}" }] } },
  },
  edges: [
    { from: "greet", to: "wait" },
    { from: "wait", to: "done" },
    { from: "done", to: "END" },
  ],
};

function expectEnvelope(res: { status: number; json: Json }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  expect(Object.keys(res.json)).toEqual(["error"]);
  expect(res.json.error.code).toBe(code);
}

describe("replay and fork over REST", () => {
  let trellis: EmbeddedTrellis;
  let admin: ReturnType<typeof harnClient>;
  let outsider: ReturnType<typeof harnClient>;
  let sessionId: string;
  let source: Json;

  async function settled(taskId: string): Promise<Json> {
    return poll(
      async () => {
        const res = await admin.get(`/v1/tasks/${taskId}`);
        expect(res.status).toBe(200);
        return ["COMPLETED", "FAILED", "CANCELED", "INPUT_REQUIRED"].includes(res.json.status)
          ? res.json
          : undefined;
      },
      { what: `task ${taskId}`, timeoutMs: 20_000 },
    );
  }

  async function texts(session: string): Promise<string[]> {
    const res = await admin.get(`/v1/sessions/${session}/messages?limit=200`);
    expect(res.status).toBe(200);
    return res.json.data.map((m: Json) =>
      m.parts.map((p: Json) => (p.type === "text" ? p.text : "")).join(""),
    );
  }

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY);
    admin = harnClient(trellis.address.url, ADMIN_KEY);
    const key = await admin.post("/v1/api-keys", {
      name: "outsider",
      workspace_id: "w_replay_outsider",
      scopes: ["tasks:read", "tasks:write", "sessions:read", "sessions:write"],
    });
    expect(key.status).toBe(201);
    outsider = harnClient(trellis.address.url, key.json.key);

    const persona = await admin.post("/v1/personas", {
      name: "approver",
      entry_workflow: "scripted",
      definition: approvalGraph,
    });
    expect(persona.status).toBe(201);
    const session = await admin.post("/v1/sessions", {
      workspace_id: "default",
      persona_id: persona.json.id,
    });
    sessionId = session.json.id;
    const task = await admin.post(`/v1/sessions/${sessionId}/tasks`, { input: "world" });
    expect(task.status).toBe(202);
    const waiting = await settled(task.json.id);
    expect(waiting.status).toBe("INPUT_REQUIRED");
    const answer = await admin.post(`/v1/tasks/${task.json.id}/messages`, {
      kind: "input",
      message: { role: "user", parts: [{ type: "text", text: "go ahead" }] },
    });
    expect(answer.status).toBe(201);
    source = await poll(
      async () => {
        const t = await admin.get(`/v1/tasks/${task.json.id}`);
        return t.json.status === "COMPLETED" ? t.json : undefined;
      },
      { what: "the source task", timeoutMs: 20_000 },
    );
  });

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("replays a task (202): a new task with parent_task_id, the same transcript in a forked session", async () => {
    const res = await admin.post(`/v1/tasks/${source.id}/replay`, {});
    expect(res.status, JSON.stringify(res.json)).toBe(202);
    expect(res.json).toMatchObject({ object: "task", parent_task_id: source.id });
    expect(res.json.session_id).not.toBe(sessionId);
    const done = await settled(res.json.id);
    expect(done.status).toBe("COMPLETED");
    expect(await texts(res.json.session_id)).toEqual(await texts(sessionId));
    const session = await admin.get(`/v1/sessions/${res.json.session_id}`);
    expect(session.json).toMatchObject({
      parent_session_id: sessionId,
      root_session_id: sessionId,
    });
    // Replayed events are marked.
    const events = await admin.get(`/v1/tasks/${res.json.id}/events`);
    const kinds = events.json.data.map((e: Json) => e.event);
    expect(kinds).toContain("replay.started");
    const replayed = events.json.data.find((e: Json) => e.event === "agent.message");
    expect(replayed.payload.message.metadata.replay).toMatchObject({
      source_task_id: source.id,
      replay_task_id: res.json.id,
      mode: "exact",
    });
    expect(replayed.payload.message.metadata.replay.original_event_id).toMatch(/^evt_/);
    expect(replayed.replayed).toBe(true);
    expect(replayed.replay).toMatchObject({
      source_task_id: source.id,
      replay_task_id: res.json.id,
      mode: "exact",
      override_key: null,
    });
    expect(replayed.replay.replay_cursor).toMatch(new RegExp(`^${source.id}:\\d+$`));
    const started = events.json.data.find((e: Json) => e.event === "task.started");
    expect(started.replayed).toBe(false);
  });

  it("answers a replay with the same Idempotency-Key with the same task", async () => {
    const headers = { "idempotency-key": "replay-once" };
    const first = await admin.post(`/v1/tasks/${source.id}/replay`, { reason: "x" }, { headers });
    const again = await admin.post(`/v1/tasks/${source.id}/replay`, { reason: "x" }, { headers });
    expect(first.status).toBe(202);
    expect(again.json.id).toBe(first.json.id);
  });

  it("refuses bad replay requests with the error envelope, never a 500", async () => {
    const badMode = await admin.post(`/v1/tasks/${source.id}/replay`, { mode: "rewind" });
    expectEnvelope(badMode, 400, "invalid_request");
    expect(badMode.json.error.param).toBe("mode");
    const noCheckpoint = await admin.post(`/v1/tasks/${source.id}/replay`, {
      mode: "from_checkpoint",
    });
    expectEnvelope(noCheckpoint, 400, "invalid_request");
    const noDependency = await admin.post(`/v1/tasks/${source.id}/replay`, {
      mode: "with_overrides",
      override: {
        "llm:main:1": {
          kind: "llm_provider_response",
          value: { choices: [{ message: { role: "assistant", content: "Done." } }] },
        },
      },
    });
    expectEnvelope(noDependency, 400, "invalid_request");
    expect(noDependency.json.error.param).toBe("overrides.llm:main:1");
    const badOverride = await admin.post(`/v1/tasks/${source.id}/replay`, {
      mode: "with_overrides",
      override: { "time:now": "noon" },
    });
    expectEnvelope(badOverride, 400, "invalid_request");
    expect(badOverride.json.error.param).toBe("override.time:now");
    // A checkpoint the source never had: 410, naming what is missing.
    const gone = await admin.post(`/v1/tasks/${source.id}/replay`, {
      mode: "from_checkpoint",
      checkpoint_id: "chk_never",
    });
    expectEnvelope(gone, 410, "cursor_expired");
    expect(gone.json.error.details.metadata).toMatchObject({
      missing: "checkpoint:chk_never",
      source_task_id: source.id,
    });
  });

  it("replays from a checkpoint named by its event", async () => {
    const events = await admin.get(`/v1/tasks/${source.id}/events`);
    const boundary = events.json.data.find((e: Json) => e.event === "task.input_required");
    const res = await admin.post(`/v1/tasks/${source.id}/replay`, {
      mode: "from_checkpoint",
      checkpoint_event_id: boundary.id,
    });
    expect(res.status, JSON.stringify(res.json)).toBe(202);
    expect((await settled(res.json.id)).status).toBe("COMPLETED");
    expect(await texts(res.json.session_id)).toEqual(await texts(sessionId));
  });

  it("forks at a message id, with the lineage on the session", async () => {
    const messages = await admin.get(`/v1/sessions/${sessionId}/messages`);
    const at = messages.json.data[1];
    const fork = await admin.post(`/v1/sessions/${sessionId}/fork`, { at_message_id: at.id });
    expect(fork.status, JSON.stringify(fork.json)).toBe(201);
    expect(fork.json).toMatchObject({ parent_session_id: sessionId, root_session_id: sessionId });
    expect(fork.json.transcript).toMatchObject({
      message_count: 2,
      forked_from_message_id: at.id,
      forked_message_count: 2,
    });
    expect(await texts(fork.json.id)).toEqual((await texts(sessionId)).slice(0, 2));
    const unknown = await admin.post(`/v1/sessions/${sessionId}/fork`, { at_message_id: "msg_x" });
    expectEnvelope(unknown, 400, "invalid_request");
    expect(unknown.json.error.param).toBe("at_message_id");
  });

  it("answers fork and replay of another workspace's resources with 404", async () => {
    const replay = await outsider.post(`/v1/tasks/${source.id}/replay`, {});
    expectEnvelope(replay, 404, "resource_not_found");
    const fork = await outsider.post(`/v1/sessions/${sessionId}/fork`, {});
    expectEnvelope(fork, 404, "resource_not_found");
    expect(replay.text).not.toContain(sessionId);
  });
});
