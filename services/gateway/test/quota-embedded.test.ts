// Embedded, the gateway is the only replica, so its write counters are held
// in memory and written behind (TRELLIS_RATE_LIMIT_WRITES_FLUSH): limits stay
// exact, failed submissions are refunded, the quota report sees unwritten
// units, and what was counted survives a restart.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-embedded-quota-admin-key-0123456789";
const ACTOR_LIMIT = 6;
const TASKS_PER_DAY = 3;

describe("write limits embedded (counted write-behind)", () => {
  let dataDir: string;
  let trellis: EmbeddedTrellis;

  const start = () =>
    startGatewayWithTasks(
      ADMIN_KEY,
      {
        TRELLIS_RATE_LIMIT_ACTOR: `${ACTOR_LIMIT}/1h`,
        TRELLIS_QUOTA_TASKS_PER_DAY: String(TASKS_PER_DAY),
        // Long enough that nothing is written during the test unless asked.
        TRELLIS_RATE_LIMIT_WRITES_FLUSH: "10s",
      },
      { dataDir },
    );

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "trellis-quota-embedded-"));
    trellis = await start();
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await rm(dataDir, { recursive: true, force: true });
  });

  async function newKey(): Promise<string> {
    const made = await harnClient(trellis.address.url, ADMIN_KEY).post("/v1/api-keys", {
      name: `writer-${Math.random().toString(36).slice(2, 8)}`,
      scopes: ["sessions:read", "sessions:write", "tasks:write"],
    });
    expect(made.status).toBe(201);
    return made.json.key;
  }

  it("grants an actor exactly its limit of concurrent writes", async () => {
    const writer = harnClient(trellis.address.url, await newKey());
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => writer.post("/v1/sessions", {})),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(ACTOR_LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10 - ACTOR_LIMIT);
  });

  it("keeps the daily task quota exact, refunds failures and keeps the count over a restart", async () => {
    const client = harnClient(trellis.address.url, await newKey());
    const session = await client.post("/v1/sessions", {});
    expect(session.status).toBe(201);
    const missing = await client.post("/v1/sessions/ses_missing/tasks", { input: "hi" });
    expect(missing.status).toBe(404);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await client.post(`/v1/sessions/${session.json.id}/tasks`, { input: `t${i}` });
      statuses.push(r.status);
    }
    // The 404 used a unit of the actor's write rate but gave its quota unit back.
    expect(statuses).toEqual([202, 202, 202]);
    const daily = async () =>
      (await harnClient(trellis.address.url, ADMIN_KEY).get("/v1/quotas")).json.data.find(
        (q: { hard_limit: boolean }) => q.hard_limit,
      );
    expect(await daily()).toMatchObject({ usage: { tasks_per_day: TASKS_PER_DAY } });
    const other = harnClient(trellis.address.url, await newKey());
    // Another actor (writes left) meets the workspace's daily quota.
    const over = await other.post(`/v1/sessions/${session.json.id}/tasks`, { input: "more" });
    expect(over.status).toBe(422);
    expect(over.json.error).toMatchObject({
      code: "policy_violation",
      details: { reason: "quota_exceeded", limit: TASKS_PER_DAY, used: TASKS_PER_DAY },
    });

    // Stopping writes what is held; the restarted gateway still refuses.
    await trellis.close({ graceMs: 500 });
    trellis = await start();
    expect(await daily()).toMatchObject({ usage: { tasks_per_day: TASKS_PER_DAY } });
    const after = harnClient(trellis.address.url, await newKey());
    const again = await after.post(`/v1/sessions/${session.json.id}/tasks`, { input: "again" });
    expect(again.status).toBe(422);
  }, 60_000);
});
