/**
 * Conformance flows of the work itself: core, streaming (SSE), lifecycle and
 * idempotency. Each starts by creating a workspace and works in it.
 */
import { describe, expect, it } from "vitest";
import type { HarnClient, Json } from "./client.js";
import {
  expectError,
  newPersona,
  newSession,
  newWorkspace,
  submit,
  TERMINAL,
  textInput,
  waitTask,
} from "./steps.js";

/** Allowed task transitions (Harn v1 "Task lifecycle"). */
const NEXT: Record<string, string[]> = {
  SUBMITTED: ["WORKING", "CANCELED", "FAILED"],
  WORKING: ["INPUT_REQUIRED", "AUTH_REQUIRED", "COMPLETED", "FAILED", "CANCELED"],
  INPUT_REQUIRED: ["WORKING", "FAILED", "CANCELED"],
  AUTH_REQUIRED: ["WORKING", "FAILED", "CANCELED"],
};

function reachable(from: string): Set<string> {
  const out = new Set<string>();
  const todo = [...(NEXT[from] ?? [])];
  for (let state = todo.pop(); state !== undefined; state = todo.pop()) {
    if (out.has(state)) continue;
    out.add(state);
    todo.push(...(NEXT[state] ?? []));
  }
  return out;
}

export function coreFlows(api: () => HarnClient): void {
  describe("core", () => {
    it("discovers the protocol without credentials", async () => {
      const discovery = await api().get("/v1", { key: null, version: null });
      expect(discovery.status).toBe(200);
      expect(discovery.json).toMatchObject({
        object: "protocol_discovery",
        current_version: "agents-protocol-2026-04-25",
      });
      const card = await api().get("/v1/agent-card", { key: null, version: null });
      expect(card.status).toBe(200);
      expect(card.json.object).toBe("harn_agent_card");
    });

    it("creates, lists, reads and updates a workspace with the admin key", async () => {
      const id = await newWorkspace(api(), "core-ws");
      const listed = await api().get("/v1/workspaces?limit=200");
      expect(listed.status).toBe(200);
      expect(listed.json.data.map((w: Json) => w.id)).toContain(id);
      const got = await api().get(`/v1/workspaces/${id}`);
      expect(got.status).toBe(200);
      expect(got.json).toMatchObject({ id, object: "workspace", name: "core-ws" });
      const patched = await api().patch(`/v1/workspaces/${id}`, {
        name: "core-ws-renamed",
        metadata: { team: "conformance" },
      });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.json).toMatchObject({
        id,
        name: "core-ws-renamed",
        metadata: { team: "conformance" },
      });
      expect((await api().get(`/v1/workspaces/${id}`)).json.name).toBe("core-ws-renamed");
      expectError(await api().get("/v1/workspaces/ws_never_made"), 404, "resource_not_found");
    });

    it("archives a workspace: still readable, no new sessions", async () => {
      const id = await newWorkspace(api(), "core-archive");
      const sessionId = await newSession(api(), id);
      const archived = await api().post(`/v1/workspaces/${id}/archive`);
      expect(archived.status, archived.text).toBe(200);
      expect(archived.json.archived_at).toEqual(expect.any(String));
      const again = await api().post(`/v1/workspaces/${id}/archive`);
      expect(again.json.archived_at).toBe(archived.json.archived_at);
      expect((await api().get(`/v1/sessions/${sessionId}`)).status).toBe(200);
      expectError(await api().post("/v1/sessions", { workspace_id: id }), 409, "conflict");
      expectError(await api().post("/v1/workspaces/default/archive"), 409, "conflict");
    });

    it("runs a session and a task to completion in the new workspace", async () => {
      const workspaceId = await newWorkspace(api(), "core-run");
      const sessionId = await newSession(api(), workspaceId);
      const sessions = await api().get(`/v1/sessions?workspace_id=${workspaceId}`);
      expect(sessions.json.data.map((s: Json) => s.id)).toEqual([sessionId]);

      const task = await submit(api(), sessionId, "hello from conformance");
      expect(task.workspace_id).toBe(workspaceId);
      const done = await waitTask(api(), task.id);
      expect(done.status).toBe("COMPLETED");
      expect(done.completed_at).toEqual(expect.any(String));

      const messages = await api().get(`/v1/sessions/${sessionId}/messages`);
      expect(messages.status).toBe(200);
      const roles = messages.json.data.map((m: Json) => m.role);
      expect(roles).toEqual(expect.arrayContaining(["user", "assistant"]));
      const reply = messages.json.data.find((m: Json) => m.role === "assistant");
      expect((await api().get(`/v1/messages/${reply.id}`)).json.session_id).toBe(sessionId);

      const tasks = await api().get(`/v1/tasks?workspace_id=${workspaceId}`);
      expect(tasks.json.data.map((t: Json) => t.id)).toContain(task.id);
      const events = await api().get(`/v1/sessions/${sessionId}/events?limit=200`);
      const kinds = events.json.data.map((e: Json) => e.event);
      expect(kinds).toEqual(expect.arrayContaining(["task.submitted", "task.completed"]));

      const artifact = await api().post("/v1/artifacts", {
        workspace_id: workspaceId,
        session_id: sessionId,
        kind: "file",
        name: "notes.txt",
        mime_type: "text/plain",
        content: "conformance artifact",
      });
      expect(artifact.status, artifact.text).toBe(201);
      expect(artifact.json.workspace_id).toBe(workspaceId);
      const content = await fetch(`${api().baseUrl}/v1/artifacts/${artifact.json.id}/content`, {
        headers: api().headersOf(),
      });
      expect(await content.text()).toBe("conformance artifact");

      const closed = await api().post(`/v1/sessions/${sessionId}/close`);
      expect(closed.json.state).toBe("CLOSED");
    });

    it("answers unknown paths 404 and protocol operations it does not serve 501", async () => {
      expectError(await api().get("/v1/no-such-resource"), 404, "resource_not_found");
      // Extended resources: served (a list) or declared not implemented, never a bare 404.
      for (const path of ["/v1/connectors", "/v1/skills", "/v1/memories"]) {
        const reply = await api().get(path);
        if (reply.status === 200) expect(reply.json.object).toBe("list");
        else expectError(reply, 501, "not_implemented");
      }
    });
  });
}

export function streamingFlows(api: () => HarnClient): void {
  describe("streaming", () => {
    it("streams a session's events live over SSE, in order, then resumes from Last-Event-ID", async () => {
      const workspaceId = await newWorkspace(api(), "streaming");
      const sessionId = await newSession(api(), workspaceId);
      const stream = await api().stream(`/v1/sessions/${sessionId}/events/stream`);
      expect(stream.response.status).toBe(200);
      expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const task = await submit(api(), sessionId, "stream me");
      const frames = await stream.until((f) => f.event === "task.completed", 20_000);
      stream.close();
      expect(frames.at(-1)?.event).toBe("task.completed");
      for (const frame of frames) {
        const event = JSON.parse(frame.data!);
        expect(frame.id).toBe(event.id);
        expect(frame.event).toBe(event.event);
      }
      const kinds = frames.map((f) => f.event);
      expect(kinds.indexOf("task.submitted")).toBeLessThan(kinds.indexOf("task.completed"));
      expect(frames.some((f) => JSON.parse(f.data!).task_id === task.id)).toBe(true);

      // Resume after the first frame: exactly the rest, no gap, no duplicate.
      const resumed = await api().stream(`/v1/sessions/${sessionId}/events/stream`, {
        headers: { "last-event-id": frames[0]!.id! },
      });
      const again = await resumed.until((f) => f.id === frames.at(-1)!.id, 20_000);
      resumed.close();
      expect(again.map((f) => f.id)).toEqual(frames.slice(1).map((f) => f.id));
    });

    it("streams one task and ends after its terminal event", async () => {
      const workspaceId = await newWorkspace(api(), "streaming-task");
      const sessionId = await newSession(api(), workspaceId);
      const task = await submit(api(), sessionId, "task stream");
      const stream = await api().stream(`/v1/tasks/${task.id}/stream`);
      const frames = await stream.until(() => false, 20_000);
      expect(stream.ended).toBe(true);
      expect(frames.at(-1)?.event).toBe("task.completed");
      expect(frames.every((f) => JSON.parse(f.data!).task_id === task.id)).toBe(true);
    });
  });
}

export function lifecycleFlows(api: () => HarnClient): void {
  describe("lifecycle", () => {
    it("moves SUBMITTED → WORKING → COMPLETED along allowed transitions only", async () => {
      const workspaceId = await newWorkspace(api(), "lifecycle");
      const sessionId = await newSession(api(), workspaceId);
      const task = await submit(api(), sessionId, "walk the lifecycle");
      const seen = [task.status];
      const done = await waitTask(api(), task.id, (t) => TERMINAL.has(t.status), seen);
      expect(done.status).toBe("COMPLETED");
      for (let i = 1; i < seen.length; i++) expect(reachable(seen[i - 1]!)).toContain(seen[i]);
      const events = await api().get(`/v1/tasks/${task.id}/events`);
      const kinds: string[] = events.json.data.map((e: Json) => e.event);
      expect(kinds[0]).toBe("task.submitted");
      expect(kinds).toContain("task.started");
      expect(kinds.at(-1)).toBe("task.completed");
      // A terminal task cannot be moved again.
      const cancel = await api().post(`/v1/tasks/${task.id}/cancel`, { reason: "too late" });
      if (cancel.status === 200) expect(cancel.json.status).toBe("COMPLETED");
      else expect([400, 409]).toContain(cancel.status);
      expect((await api().get(`/v1/tasks/${task.id}`)).json.status).toBe("COMPLETED");
    });

    it("cancels a working task for good", async () => {
      const workspaceId = await newWorkspace(api(), "lifecycle-cancel");
      const personaId = await newPersona(api(), workspaceId, "slow");
      const sessionId = await newSession(api(), workspaceId, personaId);
      const task = await submit(api(), sessionId, "take your time");
      await waitTask(api(), task.id, (t) => t.status === "WORKING");
      const canceled = await api().post(`/v1/tasks/${task.id}/cancel`, { reason: "conformance" });
      expect(canceled.status, canceled.text).toBe(200);
      expect(canceled.json.status).toBe("CANCELED");
      expect(canceled.json.canceled_at).toEqual(expect.any(String));
      const later = await api().get(`/v1/tasks/${task.id}`);
      expect(later.json.status).toBe("CANCELED");
      const kinds = (await api().get(`/v1/tasks/${task.id}/events`)).json.data.map(
        (e: Json) => e.event,
      );
      expect(kinds).toContain("task.canceled");
      expect(kinds).not.toContain("task.completed");
    });

    it("asks for input (INPUT_REQUIRED) and resumes with a message", async () => {
      const workspaceId = await newWorkspace(api(), "lifecycle-input");
      const personaId = await newPersona(api(), workspaceId, "asker");
      const sessionId = await newSession(api(), workspaceId, personaId);
      const task = await submit(api(), sessionId, "ask me");
      await waitTask(api(), task.id, (t) => t.status === "INPUT_REQUIRED");
      const answered = await api().post(`/v1/tasks/${task.id}/messages`, {
        kind: "input",
        message: textInput("here is more"),
      });
      expect([200, 201, 202], answered.text).toContain(answered.status);
      const done = await waitTask(api(), task.id);
      expect(done.status).toBe("COMPLETED");
    });
  });
}

export function idempotencyFlows(api: () => HarnClient): void {
  describe("idempotency", () => {
    it("same key and body: same resource; same key, other body: 409 idempotency_key_reused", async () => {
      const workspaceId = await newWorkspace(api(), "idempotency");
      const sessionId = await newSession(api(), workspaceId);
      const key = { headers: { "idempotency-key": `conf-${Date.now()}` } };
      const body = { input: textInput("exactly once") };
      const first = await api().post(`/v1/sessions/${sessionId}/tasks`, body, key);
      expect(first.status, first.text).toBe(202);
      const again = await api().post(`/v1/sessions/${sessionId}/tasks`, body, key);
      expect(again.status).toBe(202);
      expect(again.json.id).toBe(first.json.id);
      const other = await api().post(
        `/v1/sessions/${sessionId}/tasks`,
        { input: textInput("something else") },
        key,
      );
      expectError(other, 409, "idempotency_key_reused");
      await waitTask(api(), first.json.id);
      const tasks = await api().get(`/v1/sessions/${sessionId}/tasks`);
      expect(tasks.json.data).toHaveLength(1);

      const sessionKey = { headers: { "idempotency-key": `ses-${Date.now()}` } };
      const a = await api().post("/v1/sessions", { workspace_id: workspaceId }, sessionKey);
      const b = await api().post("/v1/sessions", { workspace_id: workspaceId }, sessionKey);
      expect(a.status).toBe(201);
      expect(b.json.id).toBe(a.json.id);
    });

    it("creates a workspace once per key", async () => {
      const key = { headers: { "idempotency-key": `ws-${Date.now()}` } };
      const body = { name: "idempotent-ws", root: "/conformance/idempotent" };
      const first = await api().post("/v1/workspaces", body, key);
      expect(first.status, first.text).toBe(201);
      const again = await api().post("/v1/workspaces", body, key);
      expect(again.json.id).toBe(first.json.id);
      const other = await api().post("/v1/workspaces", { ...body, name: "other" }, key);
      expectError(other, 409, "idempotency_key_reused");
    });

    it("never duplicates a message under concurrent retries", async () => {
      const workspaceId = await newWorkspace(api(), "idempotency-race");
      const sessionId = await newSession(api(), workspaceId);
      const key = { headers: { "idempotency-key": `msg-${Date.now()}` } };
      const body = { message: textInput("once only") };
      const replies = await Promise.all(
        [1, 2, 3, 4].map(() => api().post(`/v1/sessions/${sessionId}/messages`, body, key)),
      );
      const ids = new Set(replies.filter((r) => r.status < 300).map((r) => r.json.id));
      expect(ids.size).toBe(1);
      const messages = await api().get(`/v1/sessions/${sessionId}/messages`);
      const once = messages.json.data.filter((m: Json) => m.parts[0]?.text === "once only");
      expect(once).toHaveLength(1);
    });
  });
}
