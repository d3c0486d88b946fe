/**
 * The Harn Core conformance suite of the gateway, black-box: plain `fetch`
 * against an embedded Trellis, knowing only the OpenAPI document and the
 * narrative spec. Run against the real tasks service and against an
 * in-memory stand-in (which isolates gateway faults from tasks faults).
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import { SessionService } from "@trellis/contracts/tasks";
import { harnClient, type Json, poll, VERSION } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, type ServiceDefinition, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../../src/definition.js";
import { gatewayKeyStore } from "./embedded.js";

/** How to drive the backend's agents. */
export interface SuiteBackend {
  services(): ServiceDefinition[];
  /** A task input that keeps the task WORKING until canceled, in a session the hook may prepare. */
  slowTask(api: ReturnType<typeof harnClient>): Promise<{ sessionId: string; input: Json }>;
  /** A task input that suspends for input (undefined when the backend has none). */
  waitingTask?(api: ReturnType<typeof harnClient>): Promise<{ sessionId: string; input: Json }>;
}

export const ADMIN_KEY = "trellis-test-admin-key-0123456789";
const terminal = new Set(["COMPLETED", "FAILED", "CANCELED"]);
const allowed: Record<string, string[]> = {
  SUBMITTED: ["WORKING", "CANCELED", "FAILED"],
  WORKING: ["INPUT_REQUIRED", "AUTH_REQUIRED", "COMPLETED", "FAILED", "CANCELED"],
  INPUT_REQUIRED: ["WORKING", "FAILED", "CANCELED"],
  AUTH_REQUIRED: ["WORKING", "FAILED", "CANCELED"],
};

/** States reachable from `from` through the allowed transitions. */
function reachable(from: string): string[] {
  const out = new Set<string>();
  const todo = [...(allowed[from] ?? [])];
  while (todo.length > 0) {
    const next = todo.pop()!;
    if (out.has(next)) continue;
    out.add(next);
    todo.push(...(allowed[next] ?? []));
  }
  return [...out];
}

/** The fields of a Harn error, in the spec's order. */
const ERROR_FIELDS = ["code", "message", "type", "param", "request_id", "details"];

function expectErrorEnvelope(body: Json, code: string, requestId: string | null): void {
  expect(Object.keys(body)).toEqual(["error"]);
  expect(Object.keys(body.error)).toEqual(ERROR_FIELDS);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  if (requestId !== null) expect(body.error.request_id).toBe(requestId);
}

/** Register the suite. */
export function describeHarnCore(name: string, backend: SuiteBackend): void {
  describe(name, () => {
    let trellis: EmbeddedTrellis;
    let api: ReturnType<typeof harnClient>;
    let base: string;

    beforeAll(async () => {
      trellis = await startEmbedded({
        services: [gatewayService, ...backend.services()],
        port: 0,
        env: {
          TRELLIS_API_KEY: ADMIN_KEY,
          TRELLIS_SSE_HEARTBEAT: "150ms",
          TRELLIS_LOG_LEVEL: "error",
        },
        logger: createLogger({ service: "test", level: "error" }),
      });
      base = trellis.address.url;
      api = harnClient(base, ADMIN_KEY);
    });
    afterAll(async () => {
      await trellis?.close({ graceMs: 500 });
    });

    async function newSession(): Promise<string> {
      const res = await api.post("/v1/sessions", { workspace_id: "default" });
      expect(res.status).toBe(201);
      return res.json.id as string;
    }

    async function waitTask(
      id: string,
      until: (t: Json) => boolean,
      seen: string[] = [],
    ): Promise<Json> {
      return poll(
        async () => {
          const res = await api.get(`/v1/tasks/${id}`);
          expect(res.status).toBe(200);
          if (seen.at(-1) !== res.json.status) seen.push(res.json.status);
          return until(res.json) ? res.json : undefined;
        },
        { what: `task ${id}`, timeoutMs: 20_000 },
      );
    }

    it("discovery needs no key and no version, and tells the truth", async () => {
      const res = await api.get("/v1", { key: null, version: null });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).toBeTruthy();
      expect(res.json).toEqual({
        object: "protocol_discovery",
        protocol_family: "harn_agents_protocol",
        current_version: VERSION,
        supported_versions: [VERSION],
        capabilities: { rest: true, sse: true, websocket: true, receipts: false, replay: true },
      });
    });

    it("serves the agent card with a nested A2A card", async () => {
      const res = await api.get("/v1/agent-card", { key: null, version: null });
      expect(res.status).toBe(200);
      const card = res.json;
      expect(card).toMatchObject({
        object: "harn_agent_card",
        name: "Trellis",
        protocol_version: VERSION,
      });
      for (const field of ["id", "created_at", "updated_at", "metadata", "description", "skills"]) {
        expect(card).toHaveProperty(field);
      }
      // The A2A card of the default agent (`/.well-known/agent-card.json`).
      expect(card.a2a_card.supportedInterfaces[0]).toMatchObject({
        url: `${base}/a2a/agent_echo`,
        protocolBinding: "JSONRPC",
      });
      for (const field of [
        "name",
        "description",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
      ]) {
        expect(card.a2a_card).toHaveProperty(field);
      }
      expect(card.signature).toBeNull();
    });

    it("requires the protocol version (426) before anything else", async () => {
      const missing = await api.get("/v1/sessions", { version: null });
      expect(missing.status).toBe(426);
      expectErrorEnvelope(
        missing.json,
        "unsupported_protocol_version",
        missing.headers.get("x-request-id"),
      );
      expect(missing.json.error.details.supported_versions).toEqual([VERSION]);
      const wrong = await api.get("/v1/tasks/anything", { version: "agents-protocol-1999-01-01" });
      expect(wrong.status).toBe(426);
      expect(wrong.json.error.type).toBe("request_error");
      // Version is checked before authentication.
      const neither = await api.get("/v1/sessions", { version: null, key: null });
      expect(neither.status).toBe(426);
    });

    it("requires an API key (401) and never echoes it", async () => {
      const none = await api.get("/v1/sessions", { key: null });
      expect(none.status).toBe(401);
      expectErrorEnvelope(none.json, "unauthenticated", none.headers.get("x-request-id"));
      expect(none.json.error.type).toBe("auth_error");
      const badKey = "sk-definitely-wrong-but-secret-777";
      const bad = await api.get("/v1/sessions", { key: badKey });
      expect(bad.status).toBe(401);
      expect(bad.text).not.toContain(badKey);
      expect(JSON.stringify([...bad.headers])).not.toContain(badKey);
      const malformed = await api.get("/v1/sessions", {
        key: null,
        headers: { authorization: `Basic ${badKey}` },
      });
      expect(malformed.status).toBe(401);
      expect(malformed.text).not.toContain(badKey);
      const good = await api.get("/v1/sessions");
      expect(good.status).toBe(200);
      expect(good.text).not.toContain(ADMIN_KEY);
    });

    it("answers unknown routes with 404 and wrong methods with 405, in the envelope", async () => {
      const unknown = await api.get("/v1/no-such-thing");
      expect(unknown.status).toBe(404);
      expectErrorEnvelope(unknown.json, "resource_not_found", unknown.headers.get("x-request-id"));
      const wrongMethod = await api.request("DELETE", "/v1/sessions");
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get("allow")).toBe("GET, POST");
      expectErrorEnvelope(
        wrongMethod.json,
        "invalid_request",
        wrongMethod.headers.get("x-request-id"),
      );
    });

    it("carries the request id on every response and in every error", async () => {
      const mine = await api.get("/v1/tasks/task_missing", {
        headers: { "x-request-id": "req-from-client-1" },
      });
      expect(mine.status).toBe(404);
      expect(mine.headers.get("x-request-id")).toBe("req-from-client-1");
      expectErrorEnvelope(mine.json, "resource_not_found", "req-from-client-1");
      expect(mine.json.error.type).toBe("not_found_error");
      const ok = await api.get("/v1");
      expect(ok.headers.get("x-request-id")).toMatch(/.+/);
    });

    it("refuses malformed bodies with 400 and the offending param, ignoring unknown fields", async () => {
      const sessionId = await newSession();
      const notJson = await api.post(`/v1/sessions/${sessionId}/tasks`, "{not json");
      expect(notJson.status).toBe(400);
      expectErrorEnvelope(notJson.json, "invalid_request", notJson.headers.get("x-request-id"));
      const wrongType = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: { role: "user", parts: [{ type: "text", text: 42 }] },
      });
      expect(wrongType.status).toBe(400);
      expect(wrongType.json.error.param).toBe("input.parts[0].text");
      const noSession = await api.post("/v1/tasks", { input: { role: "user", parts: [] } });
      expect(noSession.status).toBe(400);
      expect(noSession.json.error.param).toBe("session_id");
      const noInput = await api.post(`/v1/sessions/${sessionId}/tasks`, {});
      expect(noInput.status).toBe(400);
      expect(noInput.json.error.param).toBe("input");
      const missing = await api.post(`/v1/sessions/${sessionId}/messages`, { nothing: true });
      expect(missing.status).toBe(400);
      expect(missing.json.error.param).toBe("message");
      const extra = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: {
          role: "user",
          parts: [{ type: "text", text: "hi", visibility: "public", future: 1 }],
        },
        some_future_field: { x: 1 },
      });
      expect(extra.status).toBe(202);
    });

    it("runs the session and task lifecycle, observable by polling", async () => {
      const created = await api.post("/v1/sessions", {
        workspace_id: "default",
        metadata: { purpose: "test" },
      });
      expect(created.status).toBe(201);
      const session = created.json;
      expect(session).toMatchObject({
        object: "session",
        workspace_id: "default",
        state: "ACTIVE",
        metadata: { purpose: "test" },
      });
      expect(session.transcript).toBeTruthy();
      expect((await api.get(`/v1/sessions/${session.id}`)).json.id).toBe(session.id);

      const submitted = await api.post(`/v1/sessions/${session.id}/tasks`, {
        input: {
          role: "user",
          parts: [{ type: "text", text: "hello there", visibility: "public" }],
        },
      });
      expect(submitted.status).toBe(202);
      const task = submitted.json;
      expect(task).toMatchObject({
        object: "task",
        session_id: session.id,
        workspace_id: "default",
      });
      expect(["SUBMITTED", "WORKING", "COMPLETED"]).toContain(task.status);
      expect(task.input).toMatchObject({ object: "message", role: "user" });
      expect(task.created_by).toBeTruthy();
      expect(Date.parse(task.created_at)).not.toBeNaN();
      expect(task.created_at).toMatch(/Z$/);

      const seen: string[] = [task.status];
      const done = await waitTask(task.id, (t) => terminal.has(t.status), seen);
      expect(done.status).toBe("COMPLETED");
      // Polling may skip states, never go against the lifecycle.
      for (let i = 1; i < seen.length; i++) expect(reachable(seen[i - 1]!)).toContain(seen[i]);
      expect(done.completed_at).toMatch(/Z$/);
      expect(done.canceled_at).toBeNull();

      const messages = await api.get(`/v1/sessions/${session.id}/messages`);
      expect(messages.status).toBe(200);
      expect(messages.json).toMatchObject({ object: "list", page: { has_more: false } });
      const roles = messages.json.data.map((m: Json) => m.role);
      expect(roles).toContain("user");
      expect(roles).toContain("assistant");
      const reply = messages.json.data.find((m: Json) => m.role === "assistant");
      expect(reply.parts[0]).toMatchObject({ type: "text", visibility: "public" });
      const one = await api.get(`/v1/messages/${reply.id}`);
      expect(one.status).toBe(200);
      expect(one.json).toMatchObject({ id: reply.id, object: "message", session_id: session.id });

      const tasks = await api.get(`/v1/sessions/${session.id}/tasks`);
      expect(tasks.json.data.map((t: Json) => t.id)).toContain(task.id);
      const listed = await api.get(`/v1/tasks?session_id=${session.id}`);
      expect(listed.json.data.map((t: Json) => t.id)).toContain(task.id);

      if (done.outcome_id) {
        const outcome = await api.get(`/v1/outcomes/${done.outcome_id}`);
        expect(outcome.status).toBe(200);
        expect(outcome.json).toMatchObject({
          object: "outcome",
          task_id: task.id,
          status: "SUCCEEDED",
        });
      }
      const outcomes = await api.get(`/v1/outcomes?task_id=${task.id}`);
      expect(outcomes.status).toBe(200);
      expect(outcomes.json.object).toBe("list");

      const closed = await api.post(`/v1/sessions/${session.id}/close`);
      expect(closed.status).toBe(200);
      expect(closed.json.state).toBe("CLOSED");
    });

    it("submits through /v1/tasks with the session in the body", async () => {
      const sessionId = await newSession();
      const res = await api.post("/v1/tasks", {
        session_id: sessionId,
        input: { role: "user", parts: [{ type: "text", text: "top-level" }] },
      });
      expect(res.status).toBe(202);
      expect(res.json.session_id).toBe(sessionId);
      await waitTask(res.json.id, (t) => terminal.has(t.status));
    });

    it("cancels a working task; canceled stays canceled", async () => {
      const { sessionId, input } = await backend.slowTask(api);
      const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, { input });
      expect(submitted.status).toBe(202);
      await waitTask(submitted.json.id, (t) => t.status === "WORKING");
      const canceled = await api.post(`/v1/tasks/${submitted.json.id}/cancel`, { reason: "test" });
      expect(canceled.status).toBe(200);
      expect(canceled.json.status).toBe("CANCELED");
      expect(canceled.json.canceled_at).toMatch(/Z$/);
      expect(canceled.json.completed_at).toBeNull();
      const later = await api.get(`/v1/tasks/${submitted.json.id}`);
      expect(later.json.status).toBe("CANCELED");
      const events = await api.get(`/v1/tasks/${submitted.json.id}/events`);
      expect(events.json.data.map((e: Json) => e.event)).toContain("task.canceled");
    });

    it("makes writes idempotent: same key + body → same resource; other body → 409", async () => {
      const sessionId = await newSession();
      const body = { input: { role: "user", parts: [{ type: "text", text: "once" }] } };
      const headers = { "idempotency-key": "idem-1" };
      const first = await api.post(`/v1/sessions/${sessionId}/tasks`, body, { headers });
      expect(first.status).toBe(202);
      const again = await api.post(`/v1/sessions/${sessionId}/tasks`, { ...body }, { headers });
      expect(again.status).toBe(202);
      expect(again.json.id).toBe(first.json.id);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      // Same JSON value, other key order and spacing: still equivalent.
      const reordered = await api.post(
        `/v1/sessions/${sessionId}/tasks`,
        '{ "input": { "parts": [ { "text": "once", "type": "text" } ], "role": "user" } }',
        { headers },
      );
      expect(reordered.json.id).toBe(first.json.id);
      const other = await api.post(
        `/v1/sessions/${sessionId}/tasks`,
        { input: { role: "user", parts: [{ type: "text", text: "twice" }] } },
        { headers },
      );
      expect(other.status).toBe(409);
      expectErrorEnvelope(other.json, "idempotency_key_reused", other.headers.get("x-request-id"));
      expect(other.json.error.type).toBe("conflict_error");

      const sessionA = await api.post(
        "/v1/sessions",
        { workspace_id: "default" },
        { headers: { "idempotency-key": "ses-1" } },
      );
      const sessionB = await api.post(
        "/v1/sessions",
        { workspace_id: "default" },
        { headers: { "idempotency-key": "ses-1" } },
      );
      expect(sessionA.status).toBe(201);
      expect(sessionB.status).toBe(201);
      expect(sessionB.json.id).toBe(sessionA.json.id);

      const tasks = await api.get(`/v1/sessions/${sessionId}/tasks`);
      expect(tasks.json.data.filter((t: Json) => t.input.parts[0]?.text === "once")).toHaveLength(
        1,
      );
    });

    it("never duplicates a write under concurrent retries", async () => {
      const sessionId = await newSession();
      const body = { input: { role: "user", parts: [{ type: "text", text: "concurrent" }] } };
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          api.post(`/v1/sessions/${sessionId}/tasks`, body, {
            headers: { "idempotency-key": "burst-1" },
          }),
        ),
      );
      const ids = new Set(results.filter((r) => r.status === 202).map((r) => r.json.id));
      expect(ids.size).toBe(1);
      for (const r of results) expect([202, 409]).toContain(r.status);
      const tasks = await api.get(`/v1/sessions/${sessionId}/tasks`);
      expect(
        tasks.json.data.filter((t: Json) => t.input.parts[0]?.text === "concurrent"),
      ).toHaveLength(1);
    });

    it("streams session events over SSE with id / event / data framing", async () => {
      const sessionId = await newSession();
      const stream = await api.stream(`/v1/sessions/${sessionId}/events/stream`);
      expect(stream.response.status).toBe(200);
      expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: { role: "user", parts: [{ type: "text", text: "stream me" }] },
      });
      const frames = await stream.until(
        (f) => f.event === "task.completed" || f.event === "task.failed",
      );
      stream.close();
      expect(frames.at(-1)?.event).toBe("task.completed");
      for (const frame of frames) {
        const event = JSON.parse(frame.data!);
        expect(event.object).toBe("event");
        expect(event.id).toBe(frame.id);
        expect(event.event).toBe(frame.event);
        expect(Number.isInteger(event.sequence)).toBe(true);
        expect(event.resource).toHaveProperty("object");
        expect(event.resource).toHaveProperty("id");
        expect(typeof event.payload).toBe("object");
      }
      const kinds = frames.map((f) => f.event);
      expect(kinds).toContain("task.submitted");
      // Per-resource sequences are consecutive.
      const byResource = new Map<string, number[]>();
      for (const f of frames) {
        const e = JSON.parse(f.data!);
        const key = `${e.resource.object}/${e.resource.id}`;
        byResource.set(key, [...(byResource.get(key) ?? []), e.sequence]);
      }
      const taskSeqs = byResource.get(`task/${submitted.json.id}`) ?? [];
      expect(taskSeqs.length).toBeGreaterThan(1);
      for (let i = 1; i < taskSeqs.length; i++) expect(taskSeqs[i]).toBe(taskSeqs[i - 1]! + 1);
    });

    it("resumes an SSE stream from Last-Event-ID with no gap and no duplicate", async () => {
      const sessionId = await newSession();
      const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: { role: "user", parts: [{ type: "text", text: "resume" }] },
      });
      await waitTask(submitted.json.id, (t) => terminal.has(t.status));
      const all = (await api.get(`/v1/sessions/${sessionId}/events?limit=200`)).json.data.map(
        (e: Json) => e.id,
      );
      expect(all.length).toBeGreaterThanOrEqual(3);
      const cut = Math.floor(all.length / 2);
      const stream = await api.stream(`/v1/sessions/${sessionId}/events/stream`, {
        headers: { "last-event-id": all[cut - 1] },
      });
      const rest: string[] = [];
      for (let i = cut; i < all.length; i++) rest.push((await stream.nextEvent())!.id!);
      // Then a new event arrives live, with nothing replayed twice.
      await api.post(`/v1/sessions/${sessionId}/messages`, {
        message: { role: "user", parts: [{ type: "text", text: "live" }] },
      });
      const live = await stream.nextEvent();
      stream.close();
      expect(rest).toEqual(all.slice(cut));
      expect(all).not.toContain(live!.id);
      // The query parameter works the same way.
      const viaQuery = await api.stream(
        `/v1/sessions/${sessionId}/events/stream?after_event_id=${all[0]}`,
      );
      expect((await viaQuery.nextEvent())!.id).toBe(all[1]);
      viaQuery.close();
    });

    it("ends a stream with an explicit error event when the cursor is unknown", async () => {
      const sessionId = await newSession();
      const stream = await api.stream(`/v1/sessions/${sessionId}/events/stream`, {
        headers: { "last-event-id": "evt_does_not_exist" },
      });
      expect(stream.response.status).toBe(200);
      const frame = await stream.nextEvent();
      expect(frame?.event).toBe("error");
      const body = JSON.parse(frame!.data!);
      expect(Object.keys(body.error)).toEqual(ERROR_FIELDS);
      expect(["cursor_expired", "invalid_request", "resource_not_found"]).toContain(
        body.error.code,
      );
      expect(body.error.request_id).toBe(stream.response.headers.get("x-request-id"));
      expect(await stream.next()).toBeUndefined();
      expect(stream.ended).toBe(true);
    });

    it("keeps idle streams alive with heartbeat comments", async () => {
      const sessionId = await newSession();
      const stream = await api.stream(`/v1/sessions/${sessionId}/events/stream`);
      const comments: string[] = [];
      const deadline = Date.now() + 3000;
      while (!comments.includes("ping") && Date.now() < deadline) {
        const frame = await stream.next(3000);
        if (frame?.comment) comments.push(frame.comment);
      }
      stream.close();
      expect(comments).toContain("ping");
      expect(stream.raw).toContain(": ping\n\n");
    });

    it("streams a task and ends after its terminal event", async () => {
      const sessionId = await newSession();
      const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: { role: "user", parts: [{ type: "text", text: "task stream" }] },
      });
      const stream = await api.stream(`/v1/tasks/${submitted.json.id}/stream`);
      const frames = await stream.until(() => false, 10_000);
      expect(stream.ended).toBe(true);
      expect(frames.at(-1)?.event).toBe("task.completed");
      expect(frames.every((f) => JSON.parse(f.data!).task_id === submitted.json.id)).toBe(true);
      // A terminal task's stream replays what is left and ends.
      const again = await api.stream(`/v1/tasks/${submitted.json.id}/stream`);
      const replay = await again.until(() => false, 5000);
      expect(replay.map((f) => f.id)).toEqual(frames.map((f) => f.id));
    });

    it("reads event ranges deterministically", async () => {
      const sessionId = await newSession();
      const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, {
        input: { role: "user", parts: [{ type: "text", text: "det" }] },
      });
      await waitTask(submitted.json.id, (t) => terminal.has(t.status));
      const a = await api.get(`/v1/sessions/${sessionId}/events?limit=200`);
      const b = await api.get(`/v1/sessions/${sessionId}/events?limit=200`);
      expect(a.status).toBe(200);
      expect(b.text).toBe(a.text);
      const ids = a.json.data.map((e: Json) => e.id);
      const first = await api.get(`/v1/sessions/${sessionId}/events?limit=2`);
      expect(first.json.data.map((e: Json) => e.id)).toEqual(ids.slice(0, 2));
      expect(first.json.page).toEqual({ next_cursor: ids[1], has_more: true });
      const next = await api.get(
        `/v1/sessions/${sessionId}/events?after_event_id=${ids[1]}&limit=200`,
      );
      expect(next.json.data.map((e: Json) => e.id)).toEqual(ids.slice(2));
      const again = await api.get(
        `/v1/sessions/${sessionId}/events?after_event_id=${ids[1]}&limit=200`,
      );
      expect(again.text).toBe(next.text);
      const global = await api.get(`/v1/events?session_id=${sessionId}&limit=200`);
      expect(global.text).toBe(a.text);
      const one = await api.get(`/v1/events/${ids[0]}`);
      expect(one.status).toBe(200);
      expect(one.text).toBe(JSON.stringify(a.json.data[0]));
      const taskEvents = await api.get(`/v1/tasks/${submitted.json.id}/events`);
      expect(taskEvents.json.data.length).toBeGreaterThan(0);
      const badLimit = await api.get(`/v1/sessions/${sessionId}/events?limit=0`);
      expect(badLimit.status).toBe(400);
      expect(badLimit.json.error.param).toBe("limit");
    });

    it("registers artifacts with content and serves them back", async () => {
      const res = await api.post("/v1/artifacts", {
        kind: "log",
        mime_type: "text/plain",
        visibility: "public",
        name: "run.log",
        content: "hello artifact",
      });
      expect(res.status).toBe(201);
      expect(res.json).toMatchObject({
        object: "artifact",
        kind: "log",
        mime_type: "text/plain",
        visibility: "public",
      });
      expect(res.json.sha256).toMatch(/^[0-9a-f]{64}$/);
      const got = await api.get(`/v1/artifacts/${res.json.id}`);
      expect(got.json.id).toBe(res.json.id);
      const content = await fetch(`${base}/v1/artifacts/${res.json.id}/content`, {
        headers: { authorization: `Bearer ${ADMIN_KEY}`, "harn-agents-protocol-version": VERSION },
      });
      expect(content.status).toBe(200);
      expect(content.headers.get("content-type")).toMatch(/^text\/plain/);
      expect(await content.text()).toBe("hello artifact");
      const list = await api.get("/v1/artifacts");
      expect(list.json.data.map((a: Json) => a.id)).toContain(res.json.id);
      const bad = await api.post("/v1/artifacts", {
        kind: "log",
        content: "x",
        sha256: "0".repeat(64),
      });
      expect(bad.status).toBe(400);
      expect(bad.json.error.param).toBe("sha256");
    });

    it("lists personas and workspaces", async () => {
      const personas = await api.get("/v1/personas");
      expect(personas.status).toBe(200);
      expect(personas.json.object).toBe("list");
      for (const p of personas.json.data) expect(p).toMatchObject({ object: "persona" });
      const workspaces = await api.get("/v1/workspaces");
      expect(workspaces.json.data.map((w: Json) => w.id)).toContain("default");
      const ws = await api.get("/v1/workspaces/default");
      expect(ws.json).toMatchObject({
        id: "default",
        object: "workspace",
        default_branch_id: null,
      });
    });

    if (backend.waitingTask) {
      const waiting = backend.waitingTask;
      it("resumes a task waiting for input with a task message", async () => {
        const { sessionId, input } = await waiting(api);
        const submitted = await api.post(`/v1/sessions/${sessionId}/tasks`, { input });
        await waitTask(submitted.json.id, (t) => t.status === "INPUT_REQUIRED");
        const reply = await api.post(`/v1/tasks/${submitted.json.id}/messages`, {
          kind: "input",
          message: { role: "user", parts: [{ type: "text", text: "here you go" }] },
        });
        expect(reply.status).toBe(201);
        expect(reply.json).toMatchObject({
          object: "message",
          role: "user",
          task_id: submitted.json.id,
        });
        const done = await waitTask(submitted.json.id, (t) => terminal.has(t.status));
        expect(done.status).toBe("COMPLETED");
      });
    }

    it("binds keys to a workspace and scopes", async () => {
      const keys = gatewayKeyStore(trellis);
      const reader = await keys.create({
        name: "reader",
        actorId: "reader",
        workspaceId: "default",
        scopes: ["sessions:read", "tasks:read"],
      });
      const outsider = await keys.create({
        name: "outsider",
        actorId: "outsider",
        workspaceId: "elsewhere",
        scopes: ["*:read", "sessions:*"],
      });
      const sessionId = await newSession();
      const asReader = harnClient(base, reader.key);
      expect((await asReader.get(`/v1/sessions/${sessionId}`)).status).toBe(200);
      const denied = await asReader.post(`/v1/sessions/${sessionId}/tasks`, { input: "no" });
      expect(denied.status).toBe(403);
      expectErrorEnvelope(denied.json, "permission_denied", denied.headers.get("x-request-id"));
      const asOutsider = harnClient(base, outsider.key);
      expect((await asOutsider.get(`/v1/sessions/${sessionId}`)).status).toBe(404);
      // Another workspace is absent to it, never forbidden (no hint that it exists).
      expect((await asOutsider.get("/v1/sessions?workspace_id=default")).status).toBe(404);
      await keys.revoke(reader.record.id);
    });

    it("authenticates gRPC on the same port", async () => {
      const transport = createGrpcTransport({ baseUrl: base });
      const sessions = createClient(SessionService, transport);
      const sessionId = await newSession();
      await expect(sessions.getSession({ sessionId })).rejects.toMatchObject({ code: 16 });
      await expect(
        sessions.getSession(
          { sessionId },
          { headers: { authorization: "Bearer wrong-key-123456" } },
        ),
      ).rejects.toMatchObject({ code: 16 });
      const got = await sessions.getSession(
        { sessionId },
        { headers: { authorization: `Bearer ${ADMIN_KEY}` } },
      );
      expect(got.session?.id).toBe(sessionId);
      // Identity comes from the key, never from headers a client sends.
      const outsider = await gatewayKeyStore(trellis).create({
        name: "spoofer",
        actorId: "spoofer",
        workspaceId: "elsewhere",
        scopes: ["sessions:read"],
      });
      await expect(
        sessions.getSession(
          { sessionId },
          {
            headers: {
              authorization: `Bearer ${outsider.key}`,
              "x-trellis-actor": "admin",
              "x-trellis-workspace": "default",
              "x-trellis-scopes": "*",
            },
          },
        ),
      ).rejects.toMatchObject({ code: 5 });
      await expect(
        sessions.getSession(
          { sessionId },
          {
            headers: {
              "x-trellis-actor": "admin",
              "x-trellis-workspace": "default",
              "x-trellis-scopes": "*",
            },
          },
        ),
      ).rejects.toMatchObject({ code: 16 });
      // Probes need no key.
      const probe = await createClient(health.Health, transport).check({ service: "" });
      expect(probe.status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    });
  });
}
