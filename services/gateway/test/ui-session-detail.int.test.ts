// Session detail (`GET /v1/ui/sessions/{id}`, spec 003 "Session Detail And
// Resume Contract"), in both modes: a session with three gated turns (each
// approved and completed, the third compacted), two artifacts and a task
// delegated to another session, read back section by section; then a branch
// from returned resume cursors holds the history up to each.

import { harnClient, type Json, poll } from "@trellis/gateway/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import {
  confirmation,
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
} from "./support/ui-fixtures.js";

const modes = gatewayModes({ name: "uidetail" });

const detailPath = (id: string, query = "") => `/v1/ui/sessions/${encodeURIComponent(id)}${query}`;

const TURN_TEXTS = [
  "Checking the weather for Paris.",
  "It is sunny. May I write the forecast to a file?",
  "Done: the forecast is in forecast.txt.",
];

/** The texts of a session's transcript, in order. */
async function transcript(api: ReturnType<typeof harnClient>, sessionId: string) {
  const messages = await api.get(`/v1/sessions/${sessionId}/messages?limit=200`);
  expect(messages.status).toBe(200);
  return (messages.json.data as Json[]).map((m) => ({
    role: m.role,
    text: (m.parts as Json[])
      .map((p) => (p.type === "text" ? p.text : p.type === "tool_result" ? p.output : ""))
      .join(""),
  }));
}

describe.each(modes)("session detail, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let agentId: string;
  let sessionId: string;
  let childSessionId: string;
  let childTaskId: string;
  const turns: string[] = [];
  // The detail once every turn, the compaction and the child's end are in it.
  let detail: Json;

  async function status(taskId: string, wanted: string) {
    return poll(
      async () => {
        const task = await api.get(`/v1/tasks/${taskId}`);
        return task.json.status === wanted ? task.json : undefined;
      },
      { timeoutMs: 30_000, what: `task ${taskId} to be ${wanted}` },
    );
  }

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    // Any history passes this budget: from the third turn on, older turns are summarised.
    agentId = await createScriptedAgent(api, "gated-compacting", {
      ...gatedToolAgent(),
      context: { budget_tokens: 10, keep_recent_turns: 1, strategy: "deterministic" },
    });
    const echo = await createScriptedAgent(api, "echo", echoAgent());
    const session = await api.post("/v1/sessions", { persona_id: agentId });
    expect(session.status).toBe(201);
    sessionId = session.json.id;

    for (let i = 0; i < 3; i++) {
      const task = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "Paris" });
      expect(task.status).toBe(202);
      turns.push(task.json.id);
      await status(task.json.id, "INPUT_REQUIRED");
      const approved = await api.post(`/v1/tasks/${task.json.id}/messages`, confirmation(true));
      expect(approved.status).toBe(201);
      await status(task.json.id, "COMPLETED");
    }

    for (const name of ["plan.md", "forecast.txt"]) {
      const artifact = await api.post("/v1/artifacts", {
        session_id: sessionId,
        task_id: turns[0],
        kind: "file",
        name,
        mime_type: "text/plain",
        content: `contents of ${name}`,
      });
      expect(artifact.status).toBe(201);
    }

    // Work the first turn delegated, run by another agent in its own session.
    const child = await api.post("/v1/sessions", { persona_id: echo });
    childSessionId = child.json.id;
    const delegated = await api.post(`/v1/sessions/${childSessionId}/tasks`, {
      input: "summarise the forecast",
      parent_task_id: turns[0],
    });
    expect(delegated.status).toBe(202);
    childTaskId = delegated.json.id;
    await status(childTaskId, "COMPLETED");

    // Events reach the log asynchronously (the relay, in distributed mode).
    detail = await poll(
      async () => {
        const r = await api.get(detailPath(sessionId, "?envelopes=1000"));
        expect(r.status).toBe(200);
        const points = r.json.resume_points as Json[];
        const done = points.filter((p) => p.kind === "turn_completed").length === 3;
        const compacted = points.some((p) => p.checkpoint_type === "context_compacted");
        return done && compacted ? r.json : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: "the whole session in its detail" },
    );
  }, 120_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("renders the session as GET /v1/sessions/{id} does", async () => {
    const plain = await api.get(`/v1/sessions/${sessionId}`);
    expect(detail.object).toBe("session_detail");
    expect(detail.session).toMatchObject({
      id: sessionId,
      object: "session",
      persona_id: agentId,
      created_at: plain.json.created_at,
    });
  });

  it("lists resume points from approvals, completed turns and the compaction, in log order", () => {
    const points = detail.resume_points as Json[];
    const order = (detail.channel.envelopes as Json[]).map((e) => e.id);
    const positions = points.map((p) => order.indexOf(p.event_id));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    for (const point of points) {
      expect(point.resume_cursor).toBe(point.event_id);
      expect(typeof point.created_at).toBe("string");
      expect(point.summary.length).toBeGreaterThan(0);
    }

    const perTurn = (kind: string) => points.filter((p) => p.kind === kind);
    expect(perTurn("approval_request").map((p) => [p.task_id, p.tool_name])).toEqual(
      turns.map((t) => [t, "write_file"]),
    );
    expect(perTurn("approval_resolution").map((p) => [p.task_id, p.decision])).toEqual(
      turns.map((t) => [t, "approved"]),
    );
    const completed = perTurn("turn_completed");
    expect(completed.map((p) => p.task_id)).toEqual(turns);
    expect(completed[0].summary).toBe(`turn completed: ${TURN_TEXTS[2]}`);
    // Each turn: requested, resolved, completed — in that order.
    for (const turn of turns) {
      expect(
        points.filter((p) => p.task_id === turn && p.kind !== "checkpoint").map((p) => p.kind),
      ).toEqual(["approval_request", "approval_resolution", "turn_completed"]);
    }
    // Recorded once for the turn, though it ran twice (before and after its approval).
    const compactions = points.filter((p) => p.checkpoint_type === "context_compacted");
    expect(compactions).toHaveLength(1);
    const compaction = compactions[0];
    expect(compaction).toMatchObject({ kind: "checkpoint", task_id: turns[2] });
    expect(compaction.summary).toMatch(/^context compacted/);
  });

  it("lists the delegated task with its status and timestamps", () => {
    expect(detail.subagents).toEqual([
      expect.objectContaining({
        object: "subagent",
        task_id: childTaskId,
        parent_task_id: turns[0],
        session_id: childSessionId,
        status: "COMPLETED",
        created_at: expect.any(String),
        started_at: expect.any(String),
        completed_at: expect.any(String),
        canceled_at: null,
      }),
    ]);
  });

  it("lists typed artifacts, newest first", () => {
    expect(
      (detail.artifacts as Json[]).map((a) => [
        a.name,
        a.kind,
        a.mime_type,
        a.size_bytes,
        a.task_id,
      ]),
    ).toEqual([
      ["forecast.txt", "file", "text/plain", "contents of forecast.txt".length, turns[0]],
      ["plan.md", "file", "text/plain", "contents of plan.md".length, turns[0]],
    ]);
  });

  it("carries the health snapshot", () => {
    expect(detail.health).toMatchObject({
      object: "session_health",
      session_id: sessionId,
      flags: { waiting: false },
    });
  });

  it("projects the log into a channel: participants and routed envelopes", async () => {
    const channel = detail.channel;
    expect(channel.channel_id).toBe(`session:${sessionId}`);
    const participants = channel.participants as Json[];
    const ids = participants.map((p) => p.id);
    expect(ids.slice(0, 2)).toEqual(["runtime", `agent:${agentId}`]);
    expect(ids).toEqual(expect.arrayContaining(["tool:weather", "tool:write_file"]));
    const operators = participants.filter((p) => p.kind === "operator").map((p) => p.id);
    expect(operators.length).toBeGreaterThan(0);

    const envelopes = channel.envelopes as Json[];
    const log = await api.get(`/v1/sessions/${sessionId}/events?limit=200`);
    expect(envelopes.map((e) => e.id)).toEqual((log.json.data as Json[]).map((e) => e.id));
    const byPoint = (kind: string) =>
      envelopes.find(
        (e) => e.id === detail.resume_points.find((p: Json) => p.kind === kind).event_id,
      );
    // Approvals route through the operator: the request to them, the decision from them.
    const request = byPoint("approval_request");
    expect(request.event_type).toBe("task.input_required");
    expect(request.recipient_ids).toEqual(operators);
    const resolution = byPoint("approval_resolution");
    expect(operators).toContain(resolution.sender_id);
    expect(resolution.recipient_ids).toEqual([`agent:${agentId}`]);
    expect(resolution.payload.payload).toMatchObject({ approved: true, kind: "tool_confirmation" });
    // The agent calls its tools; the tools answer the agent.
    const call = envelopes.find((e) => e.summary.includes("calls weather"));
    expect(call).toMatchObject({ sender_id: `agent:${agentId}`, recipient_ids: ["tool:weather"] });
    const result = envelopes.find((e) => e.sender_id === "tool:weather");
    expect(result.recipient_ids).toEqual([`agent:${agentId}`]);
    expect(result.summary).toBe("weather: ok");

    // A window keeps the latest envelopes and the same participants.
    const small = await api.get(detailPath(sessionId, "?envelopes=5"));
    expect(small.json.channel.envelopes.map((e: Json) => e.id)).toEqual(
      envelopes.slice(-5).map((e) => e.id),
    );
    expect(small.json.channel.participants).toEqual(participants);
    expect(small.json.channel.truncated).toBe(true);
    // The same log gives the same projection.
    expect(small.json.resume_points).toEqual(detail.resume_points);
  });

  it("branches from a returned resume cursor with the history up to it", async () => {
    const parent = await transcript(api, sessionId);
    const points = detail.resume_points as Json[];
    const firstTurnDone = points.find((p) => p.kind === "turn_completed");
    const firstGate = points.find((p) => p.kind === "approval_request");

    const atTurn = await api.post(`/v1/sessions/${sessionId}/fork`, {
      at_cursor: firstTurnDone.resume_cursor,
    });
    expect(atTurn.status).toBe(201);
    expect(atTurn.json.parent_session_id).toBe(sessionId);
    const afterTurn = await transcript(api, atTurn.json.id);
    // The whole first turn, up to its final reply.
    const turnEnd = parent.findIndex((m) => m.text === TURN_TEXTS[2]);
    expect(turnEnd).toBeGreaterThan(0);
    expect(afterTurn).toEqual(parent.slice(0, turnEnd + 1));
    expect(afterTurn.at(-1)).toEqual({ role: "assistant", text: TURN_TEXTS[2] });

    const atGate = await api.post(`/v1/sessions/${sessionId}/fork`, {
      at_event_id: firstGate.resume_cursor,
    });
    expect(atGate.status).toBe(201);
    const beforeApproval = await transcript(api, atGate.json.id);
    const gate = parent.findIndex((m) => m.text === TURN_TEXTS[1]);
    expect(gate).toBeGreaterThan(0);
    expect(beforeApproval).toEqual(parent.slice(0, gate + 1));
    expect(beforeApproval.at(-1)).toEqual({ role: "assistant", text: TURN_TEXTS[1] });

    // The branch's own detail starts with its seed checkpoint.
    const branch = await api.get(detailPath(atTurn.json.id));
    expect(branch.json.resume_points[0]).toMatchObject({
      kind: "checkpoint",
      checkpoint_type: "resume_seed",
    });
  });

  it("reads on from the last read: new events appear, the rest is as a whole-log read gives it", async () => {
    const before = await api.get(detailPath(sessionId, "?envelopes=1000"));
    const task = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "Paris" });
    await status(task.json.id, "INPUT_REQUIRED");
    const after = await poll(
      async () => {
        const r = await api.get(detailPath(sessionId, "?envelopes=1000"));
        const last = (r.json.resume_points as Json[]).at(-1);
        return last?.kind === "approval_request" && last.task_id === task.json.id
          ? r.json
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: "the new turn's approval request in the detail" },
    );
    // What was there before is unchanged; the new turn's events follow it.
    expect((after.resume_points as Json[]).slice(0, before.json.resume_points.length)).toEqual(
      before.json.resume_points,
    );
    const ids = (after.channel.envelopes as Json[]).map((e) => e.id);
    expect(ids.slice(0, before.json.channel.envelopes.length)).toEqual(
      (before.json.channel.envelopes as Json[]).map((e) => e.id),
    );
    const log = await api.get(`/v1/sessions/${sessionId}/events?limit=200`);
    expect(log.status).toBe(200);
    expect(ids).toEqual((log.json.data as Json[]).map((e) => e.id));
    expect(after.health).toMatchObject({ flags: { waiting: true } });
    await api.post(`/v1/tasks/${task.json.id}/cancel`, {});
  });

  it("is refused to other workspaces and scopes once this gateway keeps the session", async () => {
    expect((await api.get(detailPath(sessionId))).status).toBe(200);
    const keyFor = async (workspace: string, scopes: string[]) => {
      const created = await api.post("/v1/api-keys", {
        name: "detail",
        workspace_id: workspace,
        scopes,
      });
      expect(created.status).toBe(201);
      return harnClient(trellis.url, created.json.key);
    };
    const elsewhere = await keyFor("ws_elsewhere", ["events:read", "sessions:read"]);
    const hidden = await elsewhere.get(detailPath(sessionId));
    expect(hidden.status).toBe(404);
    expect(hidden.text).not.toContain(TURN_TEXTS[2]);
    const unscoped = await keyFor("default", ["sessions:read"]);
    expect((await unscoped.get(detailPath(sessionId))).status).toBe(403);
  });

  it("refuses a bad window and an unknown session with typed errors", async () => {
    const tooMany = await api.get(detailPath(sessionId, "?envelopes=1001"));
    expect(tooMany.status).toBe(400);
    expect(tooMany.json.error).toMatchObject({ code: "invalid_request", param: "envelopes" });
    const notNumber = await api.get(detailPath(sessionId, "?envelopes=lots"));
    expect(notNumber.status).toBe(400);
    const missing = await api.get(detailPath("ses_missing"));
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("resource_not_found");
  });
});
