import { harnClient, type Json, VERSION } from "@trellis/gateway/testing";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import {
  allEvents,
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
} from "./support/ui-fixtures.js";
import { openWs, refusedUpgrade } from "./support/ws-client.js";

const modes = gatewayModes({ name: "ws", env: { TRELLIS_SSE_HEARTBEAT: "200ms" } });

const isTerminal = (taskId: string) => (f: Json) =>
  f.type === "event" &&
  f.event.task_id === taskId &&
  ["task.completed", "task.failed", "task.canceled"].includes(f.event.event);

describe.each(modes)("the WebSocket profile, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let echo: string;
  let gated: string;
  let wsUrl: (sessionId: string, query?: string) => string;

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    echo = await createScriptedAgent(api, "echo", echoAgent(100));
    gated = await createScriptedAgent(api, "gated", gatedToolAgent());
    wsUrl = (sessionId, query = "") => `${trellis.url}/v1/sessions/${sessionId}/ws${query}`;
  }, 90_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("resumes after a drop with its cursor: no event missed, none twice, history marked replayed", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const sessionId = session.json.id as string;

    const first = await openWs(wsUrl(sessionId), ADMIN_KEY);
    const opening = await first.until((f) => f.type === "replay_complete");
    expect(opening[0]).toMatchObject({ type: "ready", session_id: sessionId, resume_cursor: null });
    // Without a cursor the whole (short) history is replayed, marked.
    const history = opening.filter((f) => f.type === "event");
    expect(history.length).toBeGreaterThan(0);
    expect(history.every((f) => f.replayed === true)).toBe(true);

    // A user message over the socket submits a task; its events arrive live.
    first.send({ type: "message", id: "m1", input: "one", idempotency_key: "ws-k1" });
    const [result] = (await first.until((f) => f.id === "m1")).filter((f) => f.id === "m1");
    expect(result).toMatchObject({ type: "result", command: "message", status: 202 });
    const task1 = result.data.id as string;
    // Its events may arrive before the command's result frame: look at all frames.
    await first.waitFor(isTerminal(task1));
    const liveEvents = first.frames.filter((f) => f.type === "event" && f.event.task_id === task1);
    expect(liveEvents.length).toBeGreaterThan(0);
    expect(liveEvents.every((f) => f.replayed === false)).toBe(true);

    // The same key again: the same task, replayed, not a second one.
    first.send({ type: "message", id: "m1-again", input: "one", idempotency_key: "ws-k1" });
    const [again] = (await first.until((f) => f.id === "m1-again")).slice(-1);
    expect(again).toMatchObject({ type: "result", status: 202, idempotent_replayed: true });
    expect(again.data.id).toBe(task1);
    // The same key with another command: refused.
    first.send({ type: "message", id: "m1-other", input: "two", idempotency_key: "ws-k1" });
    const [reused] = (await first.until((f) => f.id === "m1-other")).slice(-1);
    expect(reused).toMatchObject({ type: "error", status: 409 });
    expect(reused.error.code).toBe("idempotency_key_reused");

    // Drop the connection, remembering the cursor of the last frame seen.
    const seenFirst = first.frames.filter((f) => f.type === "event");
    const cursor = seenFirst.at(-1).cursor as string;
    await first.close();

    // While disconnected, another task runs (over REST).
    const missed = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "while away" });
    expect(missed.status).toBe(202);
    await eventually(async () => {
      const task = await api.get(`/v1/tasks/${missed.json.id}`);
      expect(task.json.status).toBe("COMPLETED");
      return true;
    });

    const second = await openWs(
      wsUrl(sessionId, `?cursor=${encodeURIComponent(cursor)}`),
      ADMIN_KEY,
    );
    const resumed = await second.until((f) => f.type === "replay_complete");
    expect(resumed[0]).toMatchObject({ type: "ready", resume_cursor: cursor });
    const replayed = resumed.filter((f) => f.type === "event");
    expect(replayed.length).toBeGreaterThan(0);
    expect(replayed.every((f) => f.replayed === true)).toBe(true);
    expect(replayed.some((f) => f.event.task_id === missed.json.id)).toBe(true);

    // Live again after the replay.
    second.send({ type: "message", id: "m3", input: "three" });
    const [third] = (await second.until((f) => f.id === "m3")).slice(-1);
    const task3 = third.data.id as string;
    await second.waitFor(isTerminal(task3));
    const live3 = second.frames.filter((f) => f.type === "event" && f.event.task_id === task3);
    expect(live3.length).toBeGreaterThan(0);
    expect(live3.every((f) => f.replayed === false)).toBe(true);
    await second.close();

    // Together the two connections saw every event of the session exactly once, in order.
    const seen = [...seenFirst, ...second.frames.filter((f) => f.type === "event")].map(
      (f) => f.event.id,
    );
    const logged = (await allEvents(api, sessionId)).map((e) => e.id);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(logged.slice(0, seen.length));
    expect(seen.length).toBe(logged.length);
  }, 60_000);

  it("answers bad frames with an error envelope and keeps the connection; heartbeats flow", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const client = await openWs(wsUrl(session.json.id), ADMIN_KEY);
    await client.until((f) => f.type === "replay_complete");
    client.send("{not json");
    client.send({ type: "explode", id: "x1" });
    client.send({ type: "cancel", id: "x2" });
    client.send({ type: "truncate", id: "x3", keep_turns: "many" });
    client.send({ type: "approve", id: "x4", task_id: "task_missing", approved: true });
    client.send([1, 2, 3]);
    client.send({ type: "ping", id: "p1" });
    // Frames that are not valid commands are answered at once, in order.
    const frames = await client.until((f) => f.type === "pong");
    const shapeErrors = frames.filter((f) => f.type === "error");
    expect(shapeErrors.map((f) => [f.id, f.status, f.error.code, f.error.param])).toEqual([
      [null, 400, "invalid_request", null],
      ["x1", 400, "invalid_request", "type"],
      ["x2", 400, "invalid_request", "task_id"],
      [null, 400, "invalid_request", null],
    ]);
    expect(frames.at(-1)).toMatchObject({ type: "pong", id: "p1" });
    // Commands the route refuses get the route's envelope, in submission order.
    const commandErrors = (await client.until((f) => f.id === "x4")).filter(
      (f) => f.type === "error",
    );
    expect(commandErrors.map((f) => [f.id, f.command, f.status, f.error.code])).toEqual([
      ["x3", "truncate", 400, "invalid_request"],
      ["x4", "approve", 404, "resource_not_found"],
    ]);
    for (const e of [...shapeErrors, ...commandErrors]) {
      expect(e.error.request_id).toEqual(expect.any(String));
      expect(e.error.type).toBe(e.status === 404 ? "not_found_error" : "request_error");
      expect(e.error.message).toEqual(expect.any(String));
    }
    // Heartbeat frames keep coming (TRELLIS_SSE_HEARTBEAT=200ms) and the socket is up.
    const beat = await client.until((f) => f.type === "heartbeat", 5_000);
    expect(beat.at(-1).at).toEqual(expect.any(String));
    expect(client.socket.readyState).toBe(client.socket.OPEN);

    // A flood: past 100 frames a second, frames are refused (once told), then accepted again.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    for (let i = 0; i < 150; i++) client.send({ type: "ping", id: `f${i}` });
    const flood = await client.until((f) => f.type === "error" && f.error.code === "rate_limited");
    expect(flood.at(-1)).toMatchObject({ status: 429, retry_after: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    client.send({ type: "ping", id: "after-flood" });
    await client.until((f) => f.id === "after-flood");
    const pongs = client.frames.filter((f) => f.type === "pong" && f.id.startsWith("f"));
    expect(pongs.length).toBeGreaterThan(0);
    expect(pongs.length).toBeLessThanOrEqual(100);
    expect(client.frames.filter((f) => f.error?.code === "rate_limited")).toHaveLength(1);
    await client.close();
  });

  it("delivers approval requests and takes approvals, cancels and truncations as commands", async () => {
    const session = await api.post("/v1/sessions", { persona_id: gated });
    const sessionId = session.json.id as string;
    const client = await openWs(wsUrl(sessionId), ADMIN_KEY);
    await client.until((f) => f.type === "replay_complete");
    client.send({ type: "message", id: "g1", input: "Paris" });
    const [submitted] = (await client.until((f) => f.id === "g1")).slice(-1);
    const taskId = submitted.data.id as string;
    const request = await client.waitFor((f) => f.type === "approval_request");
    expect(request).toMatchObject({
      replayed: false,
      task_id: taskId,
      tool_call_id: "call_2",
      tool_name: "write_file",
    });
    client.send({
      type: "approve",
      id: "a1",
      task_id: taskId,
      approved: true,
      idempotency_key: "approve-1",
    });
    const [approved] = (await client.until((f) => f.id === "a1")).slice(-1);
    expect(approved).toMatchObject({ type: "result", command: "approve", status: 201 });
    await client.waitFor(isTerminal(taskId));
    expect((await api.get(`/v1/tasks/${taskId}`)).json.status).toBe("COMPLETED");

    // Cancel a slow task from the socket.
    const slow = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "wait" });
    client.send({ type: "cancel", id: "c1", task_id: slow.json.id, reason: "changed my mind" });
    const [cancel] = (await client.until((f) => f.id === "c1")).slice(-1);
    expect(cancel).toMatchObject({ type: "result", command: "cancel", status: 200 });
    await eventually(async () => {
      expect((await api.get(`/v1/tasks/${slow.json.id}`)).json.status).toBe("CANCELED");
      return true;
    });

    client.send({ type: "truncate", id: "t1", keep_turns: 1 });
    const [truncated] = (await client.until((f) => f.id === "t1")).slice(-1);
    expect(truncated).toMatchObject({ type: "result", command: "truncate", status: 200 });
    expect(truncated.data.id).toBe(sessionId);
    await client.waitFor((f) => f.type === "event" && f.event.event === "session.truncated");
    await client.close();

    // The SSE path of a task upgrades too (the OpenAPI x-websocket-path): that task's events.
    const taskSocket = await openWs(`${trellis.url}/v1/tasks/${taskId}/stream`, ADMIN_KEY);
    const history = await taskSocket.until((f) => f.type === "replay_complete");
    expect(history[0]).toMatchObject({ type: "ready", session_id: sessionId, task_id: taskId });
    const taskEvents = history.filter((f) => f.type === "event");
    expect(taskEvents.length).toBeGreaterThan(0);
    expect(taskEvents.every((f) => f.replayed === true && f.event.task_id === taskId)).toBe(true);
    // Commands without task_id act on that task: cancelling a completed one is refused.
    taskSocket.send({ type: "cancel", id: "c-done" });
    const [late] = (await taskSocket.until((f) => f.id === "c-done")).slice(-1);
    expect(late).toMatchObject({ type: "error", command: "cancel" });
    expect(late.status).toBeGreaterThanOrEqual(400);
    expect(late.status).toBeLessThan(500);
    await taskSocket.close();
  }, 60_000);

  it("authenticates the upgrade like REST and hides other workspaces' sessions", async () => {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const url = wsUrl(session.json.id);
    const noKey = await refusedUpgrade(url, null);
    expect(noKey.status).toBe(401);
    expect(noKey.body.error.code).toBe("unauthenticated");
    expect((await refusedUpgrade(url, "not-a-key")).status).toBe(401);
    const noVersion = await refusedUpgrade(url, ADMIN_KEY, {
      "harn-agents-protocol-version": "1999",
    });
    expect(noVersion.status).toBe(426);
    expect((await refusedUpgrade(wsUrl("ses_missing"), ADMIN_KEY)).status).toBe(404);

    // A key of another workspace sees no such session; a read-only key cannot send commands.
    const workspace = await api.post("/v1/workspaces", { name: "other" });
    expect(workspace.status).toBe(201);
    const other = workspace.json.id as string;
    const foreign = await api.post("/v1/api-keys", {
      name: "foreign",
      workspace_id: other,
      scopes: ["events:read"],
    });
    expect((await refusedUpgrade(url, foreign.json.key)).status).toBe(404);
    const reader = await api.post("/v1/api-keys", { name: "reader", scopes: ["events:read"] });
    const client = await openWs(url, reader.json.key);
    await client.until((f) => f.type === "replay_complete");
    client.send({ type: "message", id: "r1", input: "hi" });
    const [denied] = (await client.until((f) => f.id === "r1")).slice(-1);
    expect(denied).toMatchObject({
      type: "error",
      status: 403,
      error: { code: "permission_denied" },
    });
    // Revoking the key stops commands on the open socket too.
    expect((await api.post(`/v1/api-keys/${reader.json.id}/revoke`, {})).status).toBe(200);
    client.send({ type: "message", id: "r2", input: "hi" });
    // The command is refused, unless a heartbeat's credential check closed the socket first.
    const [revoked] = (
      await client.until((f) => f.id === "r2" || (f.type === "error" && f.status === 401))
    ).slice(-1);
    expect(revoked).toMatchObject({ type: "error", status: 401 });
    expect((await client.closed).code).toBe(4401);
    // A browser offers the credential as a subprotocol (and the version in the query).
    const browser = await openWs(`${url}?protocol_version=${VERSION}`, null, {}, [
      "harn.v1",
      `bearer.${ADMIN_KEY}`,
    ]);
    expect(browser.socket.protocol).toBe("harn.v1");
    expect((await browser.until((f) => f.type === "ready"))[0].session_id).toBe(session.json.id);
    await browser.close();
    const badBearer = await openWs(`${url}?protocol_version=${VERSION}`, null, {}, [
      "harn.v1",
      "bearer.nope",
    ]).catch((error: { status?: number }) => error);
    expect(badBearer).toMatchObject({ status: 401 });
    // A plain GET is told to upgrade.
    const plain = await api.get(`/v1/sessions/${session.json.id}/ws`);
    expect(plain.status).toBe(400);
    expect(plain.json.error.param).toBe("Upgrade");
  });
});
