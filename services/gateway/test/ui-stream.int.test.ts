import { harnClient } from "@trellis/gateway/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import {
  confirmation,
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
  readUiFrames,
  type UiStreamFrame,
} from "./support/ui-fixtures.js";

const modes = gatewayModes({ name: "ui", receipts: true, env: { TRELLIS_SSE_HEARTBEAT: "200ms" } });

const streamPath = (sessionId: string, query = "") =>
  `/v1/ui/sessions/${encodeURIComponent(sessionId)}/events/stream${query}`;

describe.each(modes)("the UI event stream, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let gatedAgent: string;
  // The recorded session: its id and the frames read live while it ran.
  let sessionId: string;
  let live: UiStreamFrame[];

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    gatedAgent = await createScriptedAgent(api, "gated", gatedToolAgent());

    // Record a session while watching it live: a tool call, a gated tool,
    // the approval, the end of the turn, and its receipt.
    const session = await api.post("/v1/sessions", { persona_id: gatedAgent });
    sessionId = session.json.id;
    const stream = await api.stream(streamPath(sessionId));
    const head = await readUiFrames(stream, (f) => f.type === "session_state");
    const task = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "Paris" });
    expect(task.status).toBe(202);
    const waiting = await readUiFrames(stream, (f) => f.type === "approval_required");
    const approved = await api.post(
      `/v1/tasks/${waiting.at(-1)!.payload.request_id}/messages`,
      confirmation(true),
    );
    expect(approved.status).toBe(201);
    const rest = await readUiFrames(stream, (f) => f.type === "turn_end");
    // Receipts come from a durable consumer, after the turn: the approval's and the task's.
    const receipts = await readUiFrames(
      stream,
      (f) => f.type === "receipt" && f.payload.subject?.object === "task",
    );
    stream.close();
    live = [...head, ...waiting, ...rest, ...receipts];
  }, 90_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("projects the recorded session: tool rows by tool_call_id, the approval, the turn's end", () => {
    expect(live[0]).toMatchObject({ id: undefined, type: "session" });
    expect(live[0]!.payload).toMatchObject({ session_id: sessionId, tier: "default" });
    const tools = live.filter((f) => f.type.startsWith("tool_"));
    expect(tools.map((f) => [f.type, f.payload.tool_call_id, f.payload.status ?? null])).toEqual([
      ["tool_call", "call_1", null],
      ["tool_result", "call_1", null],
      ["tool_outcome", "call_1", "ok"],
      ["tool_call", "call_2", null],
      ["tool_result", "call_2", null],
      ["tool_outcome", "call_2", "ok"],
    ]);
    const required = live.find((f) => f.type === "approval_required")!.payload;
    expect(required).toMatchObject({ tool_call_id: "call_2", tool_name: "write_file" });
    expect(live.find((f) => f.type === "approval_applied")!.payload.decision).toBe("approved");
    const turnEnd = live.find((f) => f.type === "turn_end")!.payload;
    expect(turnEnd).toMatchObject({ status: "completed" });
    expect(typeof turnEnd.elapsed_ms).toBe("number");
    expect(live.filter((f) => f.type === "response").map((f) => f.payload.text)).toEqual([
      "Checking the weather for Paris.",
      "It is sunny. May I write the forecast to a file?",
      "Done: the forecast is in forecast.txt.",
    ]);
    // The default tier carries no debug type and no debug field.
    for (const frame of live) {
      expect(["turn_start", "usage", "raw_event"]).not.toContain(frame.type);
      expect(frame.payload).not.toHaveProperty("arguments");
      expect(frame.payload).not.toHaveProperty("source_event_id");
    }
    const ids = live.flatMap((f) => (f.id ? [f.id] : []));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("replays the recorded session from the log identically to what was read live", async () => {
    const replay = await api.stream(streamPath(sessionId));
    const lastId = live.at(-1)!.id;
    const frames = await readUiFrames(replay, (f) => f.id === lastId);
    replay.close();
    expect(frames.map((f) => [f.id, f.type, f.data])).toEqual(
      live.map((f) => [f.id, f.type, f.data]),
    );
  });

  it("resumes after a cursor (Last-Event-ID, ?cursor=, inside an event, a bare event id)", async () => {
    const withIds = live.filter((f) => f.id !== undefined);
    const lastId = live.at(-1)!.id;
    const withCursor = (frames: UiStreamFrame[]) => frames.filter((f) => f.id !== undefined);

    const k = Math.floor(withIds.length / 2);
    const fromHeader = await api.stream(streamPath(sessionId), {
      headers: { "last-event-id": withIds[k]!.id! },
    });
    const resumed = await readUiFrames(fromHeader, (f) => f.id === lastId);
    fromHeader.close();
    expect(resumed[0]!.type).toBe("session");
    expect(resumed[0]!.payload.resume_cursor).toBe(withIds[k]!.id);
    expect(withCursor(resumed).map((f) => f.data)).toEqual(withIds.slice(k + 1).map((f) => f.data));

    // task.completed projects to several envelopes: resume between two of them.
    const completed = withIds.findIndex((f) => f.type === "completed");
    const inside = withIds[completed]!.id!;
    const fromQuery = await api.stream(
      streamPath(sessionId, `?cursor=${encodeURIComponent(inside)}`),
    );
    const rest = await readUiFrames(fromQuery, (f) => f.id === lastId);
    fromQuery.close();
    expect(withCursor(rest).map((f) => f.id)).toEqual(
      withIds.slice(completed + 1).map((f) => f.id),
    );
    expect(withCursor(rest)[0]!.id!.split(":")[0]).toBe(inside.split(":")[0]);

    // A bare event id (e.g. from the Harn event stream): after all of that event.
    const eventId = inside.split(":")[0]!;
    const bare = await api.stream(streamPath(sessionId, `?cursor=${eventId}`));
    const afterEvent = await readUiFrames(bare, (f) => f.id === lastId);
    bare.close();
    expect(withCursor(afterEvent).every((f) => !f.id!.startsWith(`${eventId}:`))).toBe(true);
    expect(withCursor(afterEvent).map((f) => f.id)).toEqual(
      withIds.filter((f, i) => i > completed && !f.id!.startsWith(`${eventId}:`)).map((f) => f.id),
    );
  });

  it("serves the debug tier with the debug types and fields", async () => {
    const debug = await api.stream(streamPath(sessionId, "?tier=debug"));
    const lastId = live.at(-1)!.id;
    const frames = await readUiFrames(debug, (f) => f.id === lastId);
    debug.close();
    expect(frames.map((f) => f.type)).toContain("turn_start");
    const call = frames.find((f) => f.type === "tool_call" && f.payload.tool_call_id === "call_1");
    expect(call?.payload.arguments).toEqual({ city: "Paris" });
    expect(typeof call?.payload.source_event_id).toBe("string");
    // Same cursors for the envelopes both tiers carry.
    const defaultIds = new Set(live.flatMap((f) => (f.id ? [f.id] : [])));
    const debugIds = new Set(frames.flatMap((f) => (f.id ? [f.id] : [])));
    for (const id of defaultIds) expect(debugIds.has(id)).toBe(true);
  });

  it("ends the stream after `until` (a branch's inherited history)", async () => {
    const firstResponse = live.find((f) => f.type === "response")!;
    const eventId = firstResponse.id!.split(":")[0]!;
    const stream = await api.stream(streamPath(sessionId, `?until=${eventId}`));
    const frames = await readUiFrames(stream, () => false, 10_000);
    expect(stream.ended).toBe(true);
    expect(frames.at(-1)!.id!.startsWith(`${eventId}:`)).toBe(true);
    const lastOfEvent = live.map((f) => f.id?.startsWith(`${eventId}:`) ?? false).lastIndexOf(true);
    expect(frames.map((f) => f.data)).toEqual(live.slice(0, lastOfEvent + 1).map((f) => f.data));
  });

  it("follows a branch: forked at an event, it starts with a resume_seed naming the parent", async () => {
    const firstResponse = live.find((f) => f.type === "response")!;
    const eventId = firstResponse.id!.split(":")[0]!;
    const fork = await api.post(`/v1/sessions/${sessionId}/fork`, { at_event_id: eventId });
    expect(fork.status).toBe(201);
    const stream = await api.stream(streamPath(fork.json.id));
    const frames = await readUiFrames(stream, (f) => f.type === "session_checkpoint");
    stream.close();
    expect(frames[0]!.payload).toMatchObject({
      session_id: fork.json.id,
      parent_session_id: sessionId,
      branch_source_event_id: eventId,
    });
    expect(frames.at(-1)!.payload).toMatchObject({
      checkpoint_type: "resume_seed",
      parent_session_id: sessionId,
      resume_cursor: eventId,
    });
  });

  it("streams a turn started after the stream opened, and only once", async () => {
    const echo = await createScriptedAgent(api, "echo", echoAgent());
    const session = await api.post("/v1/sessions", { persona_id: echo });
    const stream = await api.stream(streamPath(session.json.id));
    await readUiFrames(stream, (f) => f.type === "session_state");
    await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "hello" });
    const frames = await readUiFrames(stream, (f) => f.type === "turn_end");
    await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "again" });
    const second = await readUiFrames(stream, (f) => f.type === "turn_end");
    stream.close();
    const responses = [...frames, ...second].filter((f) => f.type === "response");
    expect(responses.map((f) => f.payload.text)).toEqual(["Echo: hello", "Echo: again"]);
    const ids = [...frames, ...second].flatMap((f) => (f.id ? [f.id] : []));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("refuses bad input with the error envelope, never a 500", async () => {
    const bogusTier = await api.get(streamPath(sessionId, "?tier=verbose"));
    expect(bogusTier.status).toBe(400);
    expect(bogusTier.json.error).toMatchObject({ code: "invalid_request", param: "tier" });

    const unknownCursor = await api.get(streamPath(sessionId, "?cursor=evt_nope:0"));
    expect(unknownCursor.status).toBe(400);
    expect(unknownCursor.json.error).toMatchObject({ code: "invalid_request", param: "cursor" });

    const malformed = await api.get(streamPath(sessionId), {
      headers: { "last-event-id": "evt:x:y z" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.param).toBe("cursor");

    const until = await api.get(streamPath(sessionId, "?until=evt_elsewhere"));
    expect(until.status).toBe(400);
    expect(until.json.error).toMatchObject({ code: "invalid_request", param: "until" });

    const missing = await api.get(streamPath("ses_missing"));
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("resource_not_found");

    const anonymous = await api.get(streamPath(sessionId), { key: null });
    expect(anonymous.status).toBe(401);
    const noVersion = await api.get(streamPath(sessionId), { version: null });
    expect(noVersion.status).toBe(426);
  });

  it("lists the types the stream can carry and those it cannot yet", async () => {
    const types = await api.get("/v1/ui/event-types");
    expect(types.status).toBe(200);
    const names = types.json.types.map((t: { type: string }) => t.type);
    expect(names).toContain("tool_outcome");
    expect(types.json.types.find((t: { type: string }) => t.type === "usage").tier).toBe("debug");
    const missing = types.json.not_emitted.map((t: { type: string }) => t.type);
    expect(missing).toContain("policy_decision");
    expect(names).not.toContain("policy_decision");
    // Recorded by the tasks service's compactor (services/tasks/src/compaction).
    expect(names).toContain("context_compacted");
    expect(missing).not.toContain("context_compacted");
  });
});
