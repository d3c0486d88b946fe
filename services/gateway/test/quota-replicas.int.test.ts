// Rate limits and hard quotas counted across two gateway replicas that share
// one PostgreSQL database (and a tasks service on real JetStream): the limit
// holds for the sum of both, refusals carry the error envelope, a 429 has
// Retry-After, a submission that fails gives its quota unit back.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Role } from "@trellis/contracts/core";
import { TaskService } from "@trellis/contracts/tasks";
import { harnClient } from "@trellis/gateway/testing";
import { errorDetailOf } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { parseRate } from "../src/quota/config.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";
import { createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";

const ACTOR_LIMIT = 6;
const TASKS_PER_DAY = 3;

describe("quotas and rate limits across two gateway replicas (PostgreSQL, JetStream)", () => {
  let deployment: TestDeployment;
  let a: ReturnType<typeof harnClient>;
  let b: ReturnType<typeof harnClient>;
  let urls: [string, string];
  let sessionId: string;

  beforeAll(async () => {
    deployment = await openDeployment("trellis_quota", { prefix: "quota" });
    const tasks = await deployment.start(tasksService);
    const gatewayEnv = {
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_TASKS_URL: tasks.address.url,
      TRELLIS_RATE_LIMIT_ACTOR: `${ACTOR_LIMIT}/1h`,
      TRELLIS_RATE_LIMIT_WORKSPACE: "off",
      TRELLIS_RATE_LIMIT_AGENT: "off",
      TRELLIS_QUOTA_TASKS_PER_DAY: String(TASKS_PER_DAY),
    };
    // Two replicas, one after the other (the second finds the schema migrated).
    const first = await deployment.start(gatewayService, gatewayEnv);
    const second = await deployment.start(gatewayService, gatewayEnv);
    urls = [first.address.url, second.address.url];
    const adminA = harnClient(urls[0], ADMIN_KEY);
    // The admin's writes: the agent, the session, three keys (5 of its 6).
    const agent = await createScriptedAgent(adminA, "echo", echoAgent());
    const session = await adminA.post("/v1/sessions", { persona_id: agent });
    expect(session.status).toBe(201);
    sessionId = session.json.id;
    const keyFor = async (name: string) => {
      const created = await adminA.post("/v1/api-keys", {
        name,
        scopes: ["sessions:write", "sessions:read", "tasks:write", "workspaces:read"],
      });
      expect(created.status).toBe(201);
      return created.json.key as string;
    };
    const k1 = await keyFor("rate-tester");
    const k2 = await keyFor("quota-tester");
    keys.k3 = await keyFor("rpc-tester");
    a = harnClient(urls[0], k1);
    b = harnClient(urls[1], k1);
    // Kept for the quota test.
    keys.k2 = k2;
  }, 60_000);
  const keys: { k2?: string; k3?: string } = {};

  afterAll(async () => {
    await deployment?.close();
  });

  it("lets one actor make exactly its limit of writes across both replicas, then 429 with Retry-After", async () => {
    const attempts = 10;
    const responses = await Promise.all(
      Array.from({ length: attempts }, (_, i) => (i % 2 === 0 ? a : b).post("/v1/sessions", {})),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(ACTOR_LIMIT);
    const refused = responses.filter((r) => r.status === 429);
    expect(refused).toHaveLength(attempts - ACTOR_LIMIT);
    for (const r of refused) {
      expect(r.json.error).toMatchObject({
        code: "rate_limited",
        type: "rate_limit_error",
        details: { scope: "actor", limit: ACTOR_LIMIT, window_seconds: 3600 },
      });
      const retryAfter = Number(r.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(3600);
    }
    // Reads are not rate limited.
    expect((await a.get("/v1/sessions")).status).toBe(200);
  });

  it("enforces the daily task quota across replicas with 422 policy_violation, refunding failed submissions", async () => {
    const k2 = keys.k2!;
    const qa = harnClient(urls[0], k2);
    const qb = harnClient(urls[1], k2);
    // A submission that fails (no such session) does not use the quota.
    const missing = await qa.post("/v1/sessions/ses_missing/tasks", { input: "hi" });
    expect(missing.status).toBe(404);
    const results = [];
    for (let i = 0; i < 5; i++) {
      results.push(
        await (i % 2 === 0 ? qa : qb).post(`/v1/sessions/${sessionId}/tasks`, { input: `t${i}` }),
      );
    }
    expect(results.map((r) => r.status)).toEqual([202, 202, 202, 422, 422]);
    expect(results[3]!.json.error).toMatchObject({
      code: "policy_violation",
      details: { reason: "quota_exceeded", limit: TASKS_PER_DAY, used: TASKS_PER_DAY },
    });
    // The quota resource reports the same usage from either replica.
    for (const client of [qa, qb]) {
      const quotas = await client.get("/v1/quotas");
      expect(quotas.status).toBe(200);
      const daily = quotas.json.data.find((q: { hard_limit: boolean }) => q.hard_limit);
      expect(daily).toMatchObject({
        object: "quota",
        scope: "workspace",
        limits: { tasks_per_day: TASKS_PER_DAY },
        usage: { tasks_per_day: TASKS_PER_DAY },
        exhaustion_reason: "quota_exceeded",
      });
      const one = await client.get(`/v1/quotas/${daily.id}`);
      expect(one.json.id).toBe(daily.id);
    }
    expect((await qa.get("/v1/quotas/quota_tasks_per_day_elsewhere")).status).toBe(404);

    // The same counters hold over gRPC (the gateway's Connect routes), on either replica:
    // k2 has used its 6 writes over REST; k3 has writes left but the workspace has no tasks left.
    const submit = (url: string, key: string) =>
      createClient(TaskService, createGrpcTransport({ baseUrl: url }))
        .submitTask(
          {
            sessionId,
            input: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "rpc" } } }] },
          },
          { headers: { authorization: `Bearer ${key}` } },
        )
        .then(
          () => undefined,
          (error: unknown) => ConnectError.from(error),
        );
    for (const url of urls) {
      const limited = await submit(url, k2);
      expect(limited?.code).toBe(Code.ResourceExhausted);
      expect(errorDetailOf(limited!)).toMatchObject({
        reason: "rate_limited",
        metadata: { scope: "actor" },
      });
      expect(Number(errorDetailOf(limited!)?.metadata.retry_after_seconds)).toBeGreaterThan(0);
      const overQuota = await submit(url, keys.k3!);
      expect(overQuota?.code).toBe(Code.FailedPrecondition);
      expect(errorDetailOf(overQuota!)?.reason).toBe("policy_violation");
    }
  });

  it("parses limit settings and refuses bad ones", () => {
    expect(parseRate("X", "120/1m")).toEqual({ limit: 120, periodMs: 60_000 });
    expect(parseRate("X", "10 / 30s")).toEqual({ limit: 10, periodMs: 30_000 });
    expect(parseRate("X", "off")).toBeUndefined();
    expect(() => parseRate("X", "fast")).toThrow(/X must be/);
    expect(() => parseRate("X", "0/1m")).toThrow(/X must be/);
  });
});
