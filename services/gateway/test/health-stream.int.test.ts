import { harnClient, type Json, poll, type SseReader } from "@trellis/gateway/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import { createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";

// The watchdog sweeps often here, so background enforcement is quick to see.
const modes = gatewayModes({ name: "health", env: { TRELLIS_HEALTH_SWEEP: "200ms" } });

const healthPath = (id: string) => `/v1/ui/sessions/${encodeURIComponent(id)}/health`;

/** Read `health_snapshot` payloads until `stop` holds for one (inclusive). */
async function snapshots(stream: SseReader, stop: (s: Json) => boolean, timeoutMs = 20_000) {
  const frames = await stream.until(
    (f) => f.event === "health_snapshot" && stop(JSON.parse(f.data ?? "{}").payload),
    timeoutMs,
  );
  return frames
    .filter((f) => f.event === "health_snapshot")
    .map((f) => JSON.parse(f.data ?? "{}").payload as Json);
}

describe.each(modes)("session health, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let slowAgent: string;

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    slowAgent = await createScriptedAgent(api, "slow", echoAgent(2500));
  }, 60_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("reports an idle session as healthy, with its policy", async () => {
    const session = await api.post("/v1/sessions", {
      persona_id: slowAgent,
      metadata: { health_policy: { max_tokens: 5000, action: "flag_only" } },
    });
    expect(session.status).toBe(201);
    const health = await api.get(healthPath(session.json.id));
    expect(health.status).toBe(200);
    expect(health.json).toMatchObject({
      object: "session_health",
      session_id: session.json.id,
      score: 100,
      status: "healthy",
      flags: { stuck: false, waiting: false, degraded: false, budget_pressure: false },
      policy: {
        health: { max_tokens: 5000, action: "flag_only", stuck_after_seconds: 120 },
        breaches: [],
        enforcement: null,
      },
    });
  });

  it("keeps answering from the whole log when it is read again after new turns", async () => {
    const fast = await createScriptedAgent(api, "fast", echoAgent(0));
    const session = await api.post("/v1/sessions", { persona_id: fast });
    const id = session.json.id as string;
    const first = await api.get(healthPath(id));
    expect(first.json.metrics.runtime_ms).toBe(0);
    for (const input of ["one", "two"]) {
      const task = await api.post(`/v1/sessions/${id}/tasks`, { input });
      await poll(async () => {
        const t = await api.get(`/v1/tasks/${task.json.id}`);
        return t.json.status === "COMPLETED" ? t.json : undefined;
      });
      // Each read sees every event so far (it reads on from where the last one stopped).
      const events = await api.get(`/v1/sessions/${id}/events?limit=200`);
      const lastId = (events.json.data as Json[]).at(-1)?.id;
      const again = await poll(async () => {
        const health = await api.get(healthPath(id));
        return health.json.last_event_id === lastId ? health.json : undefined;
      });
      expect(again).toMatchObject({ status: "healthy", metrics: { running_task_id: null } });
    }
  });

  it("streams a slow turn as stuck, then healthy again when it completes", async () => {
    const session = await api.post("/v1/sessions", {
      persona_id: slowAgent,
      metadata: { health_policy: { stuck_after_seconds: 1 } },
    });
    const id = session.json.id as string;
    const stream = await api.stream(`${healthPath(id)}/stream`);
    const first = await snapshots(stream, () => true);
    expect(first[0]).toMatchObject({ session_id: id, flags: { stuck: false } });
    const task = await api.post(`/v1/sessions/${id}/tasks`, { input: "hello" });
    expect(task.status).toBe(202);
    const stuck = await snapshots(stream, (s) => s.flags.stuck === true);
    expect(stuck.at(-1)).toMatchObject({
      score: 60,
      metrics: { running_task_id: task.json.id },
      reasons: [expect.objectContaining({ flag: "stuck" })],
    });
    const done = await snapshots(stream, (s) => s.flags.stuck === false);
    stream.close();
    expect(done.at(-1)).toMatchObject({ score: 100, status: "healthy" });
    expect(done.at(-1).metrics.runtime_ms).toBeGreaterThanOrEqual(2000);
    const after = await api.get(`/v1/tasks/${task.json.id}`);
    expect(after.json.status).toBe("COMPLETED");
  }, 30_000);

  it("cancels a turn that crosses the runtime budget (action cancel_turn)", async () => {
    const session = await api.post("/v1/sessions", {
      persona_id: slowAgent,
      // 0.01 minute = 0.6 s, well before the 2.5 s reply.
      metadata: { health_policy: { max_runtime_minutes: 0.01 } },
    });
    const id = session.json.id as string;
    const stream = await api.stream(`${healthPath(id)}/stream`);
    await snapshots(stream, () => true);
    const task = await api.post(`/v1/sessions/${id}/tasks`, { input: "hello" });
    const enforced = await snapshots(stream, (s) => s.policy.enforcement !== null);
    stream.close();
    expect(enforced.at(-1).policy.enforcement).toMatchObject({
      action: "cancel_turn",
      task_id: task.json.id,
      reason: expect.stringMatching(/^health policy: runtime_minutes .* reached the limit 0\.01/),
    });
    const canceled = await poll(
      async () => {
        const t = await api.get(`/v1/tasks/${task.json.id}`);
        return t.json.status === "CANCELED" ? t.json : undefined;
      },
      { what: "the task to be canceled" },
    );
    expect(canceled.status).toBe("CANCELED");
    // The snapshot read later says the same: the enforcement is in the log.
    const health = await api.get(healthPath(id));
    expect(health.json.policy.enforcement.task_id).toBe(task.json.id);
    expect(health.json.policy.breaches).toEqual([
      expect.objectContaining({ metric: "runtime_minutes", limit: 0.01 }),
    ]);
  }, 30_000);

  it("enforces the policy in the background when nobody reads the session's health", async () => {
    const session = await api.post("/v1/sessions", {
      persona_id: slowAgent,
      metadata: { health_policy: { max_runtime_minutes: 0.01 } },
    });
    const id = session.json.id as string;
    const task = await api.post(`/v1/sessions/${id}/tasks`, { input: "hello" });
    expect(task.status).toBe(202);
    // No health read or stream: only the gateway's watchdog can stop it before its 2.5 s reply.
    const canceled = await poll(
      async () => {
        const t = await api.get(`/v1/tasks/${task.json.id}`);
        return ["CANCELED", "COMPLETED", "FAILED"].includes(t.json.status) ? t.json : undefined;
      },
      { what: "the task to end" },
    );
    expect(canceled.status).toBe("CANCELED");
    const events = await api.get(`/v1/sessions/${id}/events?limit=200`);
    const cancel = (events.json.data as Json[]).find((e) => e.event === "task.canceled");
    expect(cancel?.payload.reason).toMatch(/^health policy: runtime_minutes .* reached the limit/);
  }, 30_000);

  it("refuses a malformed policy and an unknown session with typed errors", async () => {
    const session = await api.post("/v1/sessions", {
      persona_id: slowAgent,
      metadata: { health_policy: { max_tokens: "lots" } },
    });
    for (const path of [healthPath(session.json.id), `${healthPath(session.json.id)}/stream`]) {
      const bad = await api.get(path);
      expect(bad.status).toBe(400);
      expect(bad.json.error).toMatchObject({
        code: "invalid_request",
        param: "metadata.health_policy.max_tokens",
      });
    }
    const missing = await api.get(healthPath("ses_missing"));
    expect(missing.status).toBe(404);
    const anonymous = await api.get(healthPath(session.json.id), { key: null });
    expect(anonymous.status).toBe(401);
  });
});
