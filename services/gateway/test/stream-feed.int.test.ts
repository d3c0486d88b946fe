/**
 * Harn event streams on the session's shared feed (src/feed/): SSE and
 * WebSocket streams joined at different times and cursors each see exactly
 * the log after their cursor (no gap, no duplicate, log order); task-scoped
 * streams see only their task; and an open stream ends when its credential
 * is revoked or its access token expires.
 */

import {
  harnClient,
  type Json,
  poll,
  type SseReader,
  TestIdentityProvider,
} from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { startGatewayWithTasks } from "./support/embedded.js";
import { gatewayModes, type Running } from "./support/modes.js";
import { allEvents, createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";
import { openWs, type WsClient } from "./support/ws-client.js";

const modes = gatewayModes({ name: "feed", env: { TRELLIS_SSE_HEARTBEAT: "200ms" } });
const terminal = new Set(["COMPLETED", "FAILED", "CANCELED"]);

/** Event ids of an SSE stream until (and including) `last`. */
async function sseIdsUntil(stream: SseReader, last: string): Promise<string[]> {
  const frames = await stream.until((f) => f.id === last || f.event === "error", 30_000);
  expect(frames.filter((f) => f.event === "error")).toEqual([]);
  return frames.map((f) => f.id as string);
}

/** Event ids of a WebSocket's event frames until (and including) `last`. */
async function wsIdsUntil(ws: WsClient, last: string): Promise<string[]> {
  await ws.waitFor((f) => f.type === "event" && f.cursor === last, 30_000);
  return ws.frames.filter((f) => f.type === "event").map((f) => f.cursor as string);
}

describe.each(modes)("Harn streams on the shared feed, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let echo: string;

  const allIds = async (sessionId: string): Promise<string[]> =>
    (await allEvents(api, sessionId)).map((e) => e.id as string);

  async function submit(sessionId: string, text: string): Promise<string> {
    const task = await api.post(`/v1/sessions/${sessionId}/tasks`, {
      input: { role: "user", parts: [{ type: "text", text }] },
    });
    expect(task.status).toBe(202);
    return task.json.id as string;
  }

  async function settled(taskId: string): Promise<void> {
    await poll(
      async () => {
        const task = await api.get(`/v1/tasks/${taskId}`);
        return terminal.has(task.json.status) ? true : undefined;
      },
      { timeoutMs: 30_000, what: `task ${taskId} to end` },
    );
  }

  /** Append a user message and return the id of its event (the session's newest). */
  async function mark(sessionId: string, text: string): Promise<string> {
    const posted = await api.post(`/v1/sessions/${sessionId}/messages`, {
      message: { role: "user", parts: [{ type: "text", text }] },
    });
    expect(posted.status).toBeLessThan(300);
    return poll(
      async () =>
        (await allEvents(api, sessionId)).find((e) => JSON.stringify(e.payload).includes(text))
          ?.id as string | undefined,
      { timeoutMs: 15_000, what: `the event of message ${text}` },
    );
  }

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    echo = await createScriptedAgent(api, "echo-feed", echoAgent(50));
  }, 90_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("gives every SSE and WebSocket stream exactly the log after its cursor, however it joined", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const sessionId = session.json.id as string;
    const wsUrl = (query = "") => `${trellis.url}/v1/sessions/${sessionId}/ws${query}`;
    const first = await submit(sessionId, "before anyone listens");
    await settled(first);

    // Streams opened before, during and after more work, some with cursors.
    type Joined = { cursor: string; ids: (last: string) => Promise<string[]>; close(): void };
    const joined: Joined[] = [];
    const join = async (cursor: string) => {
      const sse = await api.stream(
        `/v1/sessions/${sessionId}/events/stream`,
        cursor ? { headers: { "last-event-id": cursor } } : {},
      );
      joined.push({ cursor, ids: (last) => sseIdsUntil(sse, last), close: () => sse.close() });
      const ws = await openWs(wsUrl(cursor ? `?cursor=${cursor}` : ""), ADMIN_KEY);
      joined.push({ cursor, ids: (last) => wsIdsUntil(ws, last), close: () => ws.socket.close() });
    };
    await join("");
    const early = await allIds(sessionId);
    await join(early[1]!);
    // Join while a burst of tasks appends events.
    const running = [submit(sessionId, "one"), submit(sessionId, "two")];
    for (let i = 0; i < 4; i++) {
      const now = await allIds(sessionId);
      await join(now.at(-1)!);
      await join(now[Math.floor(now.length / 2)]!);
    }
    for (const task of await Promise.all(running)) await settled(task);
    await join((await allIds(sessionId)).at(-1)!);
    const last = await mark(sessionId, "the end marker");
    const log = await allIds(sessionId);
    expect(log.at(-1)).toBe(last);

    for (const stream of joined) {
      const expected = stream.cursor ? log.slice(log.indexOf(stream.cursor) + 1) : log;
      expect(await stream.ids(last)).toEqual(expected);
      stream.close();
    }
  });

  it("keeps task-scoped streams to their task", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const sessionId = session.json.id as string;
    const task = await submit(sessionId, "mine");
    const other = submit(sessionId, "not mine");
    const ws = await openWs(`${trellis.url}/v1/tasks/${task}/stream`, ADMIN_KEY);
    const sse = await api.stream(`/v1/tasks/${task}/stream`);
    const frames = await sse.until(() => false, 30_000);
    expect(sse.ended).toBe(true);
    expect(["task.completed", "task.failed"]).toContain(frames.at(-1)?.event);
    await settled(await other);
    const taskEvents = (await api.get(`/v1/tasks/${task}/events?limit=200`)).json.data.map(
      (e: Json) => e.id,
    );
    expect(frames.map((f) => f.id)).toEqual(taskEvents);
    await ws.waitFor((f) => f.type === "event" && f.cursor === taskEvents.at(-1), 30_000);
    const wsEvents = ws.frames.filter((f) => f.type === "event");
    expect(wsEvents.map((f) => f.cursor)).toEqual(taskEvents);
    await ws.close();
  });

  it("ends open SSE and WebSocket streams when their API key is revoked", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const sessionId = session.json.id as string;
    const key = await api.post("/v1/api-keys", { name: "watcher", scopes: ["events:read"] });
    expect(key.status).toBe(201);
    const sse = await api.stream(`/v1/sessions/${sessionId}/events/stream`, {
      key: key.json.key,
    });
    const ws = await openWs(`${trellis.url}/v1/sessions/${sessionId}/ws`, key.json.key);
    await ws.until((f) => f.type === "replay_complete");
    // Still valid across heartbeats: events keep flowing.
    const before = await mark(sessionId, "still allowed");
    await sse.until((f) => f.id === before, 15_000);
    await ws.waitFor((f) => f.type === "event" && f.cursor === before);

    expect((await api.post(`/v1/api-keys/${key.json.id}/revoke`, {})).status).toBe(200);
    const refused = await ws.waitFor((f) => f.type === "error", 15_000);
    expect(refused).toMatchObject({ status: 401, error: { code: "unauthenticated" } });
    expect((await ws.closed).code).toBe(4401);
    const frames = await sse.until((f) => f.event === "error", 15_000);
    const error = JSON.parse(frames.at(-1)!.data!);
    expect(error.error.code).toBe("unauthenticated");
    expect(await sse.next(15_000)).toBeUndefined();
    expect(sse.ended).toBe(true);
  });
});

describe("Harn streams opened with an access token", () => {
  let idp: TestIdentityProvider;
  let trellis: EmbeddedTrellis;
  let admin: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    idp = await TestIdentityProvider.start();
    trellis = await startGatewayWithTasks(ADMIN_KEY, {
      TRELLIS_SSE_HEARTBEAT: "200ms",
      TRELLIS_OAUTH_ISSUER: "https://trellis.example.test",
      TRELLIS_OAUTH_EXTERNAL_ISSUER: idp.issuer,
      TRELLIS_OAUTH_EXTERNAL_JWKS_URL: idp.jwksUrl,
    });
    admin = harnClient(trellis.address.url, ADMIN_KEY);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await idp?.close();
  });

  it("ends open SSE and WebSocket streams when the token expires", async () => {
    const session = await admin.post("/v1/sessions", { workspace_id: "default" });
    expect(session.status).toBe(201);
    const sessionId = session.json.id as string;
    // Past its `exp`, but inside the verifier's 30 s clock leeway for ~10 s more.
    const token = await idp.token(
      { sub: "svc-watcher", aud: "trellis", workspace: "default", scope: "events:read" },
      { expiresInSec: -20 },
    );
    const api = harnClient(trellis.address.url, token);
    const sse = await api.stream(`/v1/sessions/${sessionId}/events/stream`);
    expect(sse.response.status).toBe(200);
    const ws = await openWs(`${trellis.address.url}/v1/sessions/${sessionId}/ws`, token);
    await ws.until((f) => f.type === "replay_complete");

    const refused = await ws.waitFor((f) => f.type === "error", 30_000);
    expect(refused).toMatchObject({ status: 401, error: { code: "unauthenticated" } });
    expect(refused.error.message).toContain("expired");
    expect((await ws.closed).code).toBe(4401);
    const frames = await sse.until((f) => f.event === "error", 30_000);
    expect(JSON.parse(frames.at(-1)!.data!).error.code).toBe("unauthenticated");
    expect(await sse.next(15_000)).toBeUndefined();
  });
});
