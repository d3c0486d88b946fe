// API keys per workspace: REST create / list / revoke, shown once, stored
// hashed, no escalation, revocation at once; and `trellis keys` through a
// running gateway and straight in the database (real PostgreSQL).

import { harnClient } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { createDatabase } from "@trellis/storage";
import { tasksService } from "@trellis/tasks";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runKeys } from "../../../src/cli/keys.js";
import { gatewayService } from "../src/definition.js";
import { AgentPolicyStore } from "../src/policy/store.js";
import { PostgresKeyStore } from "../src/store/key-store.js";

const ADMIN_KEY = "trellis-keys-test-admin-key-0123456789";

/** Run the CLI, capturing what it prints. */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  let out = "";
  let err = "";
  const code = await runKeys(env, args, {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
  });
  return { code, out, err };
}

describe("API keys over REST", () => {
  let trellis: EmbeddedTrellis;
  let base: string;
  let admin: ReturnType<typeof harnClient>;
  const logLines: string[] = [];

  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [gatewayService, tasksService],
      port: 0,
      logger: createLogger({ service: "test", level: "debug", write: (l) => logLines.push(l) }),
      env: { TRELLIS_API_KEY: ADMIN_KEY, TRELLIS_LOG_LEVEL: "debug" },
    });
    base = trellis.address.url;
    admin = harnClient(base, ADMIN_KEY);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("creates a key shown once, lists it without the secret, stores only its hash", async () => {
    const created = await admin.post("/v1/api-keys", {
      name: "ci",
      scopes: ["sessions:read", "sessions:write"],
      actor_id: "ci-bot",
    });
    expect(created.status).toBe(201);
    expect(created.headers.get("cache-control")).toBe("no-store");
    const key: string = created.json.key;
    expect(key).toMatch(/^trellis_sk_[A-Za-z0-9_-]{43}$/);
    expect(created.json).toMatchObject({
      object: "api_key",
      name: "ci",
      actor_id: "ci-bot",
      workspace_id: "default",
      scopes: ["sessions:read", "sessions:write"],
      revoked_at: null,
      prefix: key.slice(0, "trellis_sk_".length + 4),
    });

    const listed = await admin.get("/v1/api-keys");
    expect(listed.json.data.map((k: { id: string }) => k.id)).toContain(created.json.id);
    expect(listed.text).not.toContain(key);
    const one = await admin.get(`/v1/api-keys/${created.json.id}`);
    expect(one.status).toBe(200);
    expect(one.json.key).toBeUndefined();

    const gateway = trellis.contexts.get("gateway")!;
    const rows = await gateway.db.kysely
      .withSchema("gateway")
      .selectFrom("api_keys" as never)
      .selectAll()
      .execute();
    expect(JSON.stringify(rows)).not.toContain(key);

    // The key works, as the actor it names.
    const api = harnClient(base, key);
    const session = await api.post("/v1/sessions", {});
    expect(session.status).toBe(201);
    expect(logLines.join("\n")).not.toContain(key);
  });

  it("revokes a key: the very next request with it is refused", async () => {
    const created = await admin.post("/v1/api-keys", { name: "short", scopes: ["sessions:read"] });
    const api = harnClient(base, created.json.key);
    expect((await api.get("/v1/sessions")).status).toBe(200);
    const revoked = await admin.post(`/v1/api-keys/${created.json.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.json.revoked_at).not.toBeNull();
    const refused = await api.get("/v1/sessions");
    expect(refused.status).toBe(401);
    expect(refused.json.error.code).toBe("unauthenticated");
    expect(refused.text).not.toContain(created.json.key);
    // Revoking twice is harmless; listings hide revoked keys unless asked.
    expect((await admin.post(`/v1/api-keys/${created.json.id}/revoke`)).status).toBe(200);
    const active = await admin.get("/v1/api-keys");
    expect(active.json.data.map((k: { id: string }) => k.id)).not.toContain(created.json.id);
    const all = await admin.get("/v1/api-keys?include_revoked=true");
    expect(all.json.data.map((k: { id: string }) => k.id)).toContain(created.json.id);
  });

  it("lets a keys:admin key manage its own workspace's keys, without escalation", async () => {
    const manager = await admin.post("/v1/api-keys", {
      name: "manager",
      scopes: ["keys:admin", "sessions:read"],
    });
    const api = harnClient(base, manager.json.key);
    const ok = await api.post("/v1/api-keys", { name: "reader", scopes: ["sessions:read"] });
    expect(ok.status).toBe(201);
    for (const scopes of [["*"], ["tasks:write"], ["sessions:*"]]) {
      const refused = await api.post("/v1/api-keys", { name: "greedy", scopes });
      expect({ scopes, status: refused.status }).toEqual({ scopes, status: 403 });
      expect(refused.json.error.code).toBe("permission_denied");
    }
    // The admin key is out of its reach: it cannot revoke what it could not create.
    const adminRecord = (await admin.get("/v1/api-keys")).json.data.find(
      (k: { name: string }) => k.name === "admin",
    );
    expect((await api.post(`/v1/api-keys/${adminRecord.id}/revoke`)).status).toBe(403);
    expect((await admin.get("/v1/sessions")).status).toBe(200);
    // Other workspaces' keys do not exist for it.
    const elsewhere = await admin.post("/v1/api-keys", {
      name: "elsewhere",
      workspace_id: "w_elsewhere",
      scopes: ["sessions:read"],
    });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.json.workspace_id).toBe("w_elsewhere");
    expect((await api.get(`/v1/api-keys/${elsewhere.json.id}`)).status).toBe(404);
    expect((await api.post(`/v1/api-keys/${elsewhere.json.id}/revoke`)).status).toBe(404);
    expect((await api.get("/v1/api-keys?workspace_id=w_elsewhere")).status).toBe(404);
    expect(
      (
        await api.post("/v1/api-keys", {
          name: "x",
          workspace_id: "w_elsewhere",
          scopes: ["sessions:read"],
        })
      ).status,
    ).toBe(404);
    // Without keys:admin, key management is forbidden.
    const reader = harnClient(base, ok.json.key);
    expect((await reader.get("/v1/api-keys")).status).toBe(403);
  });

  it("refuses malformed requests with the error envelope", async () => {
    const cases: [unknown, string][] = [
      [{ scopes: ["sessions:read"] }, "name"],
      [{ name: "x" }, "scopes"],
      [{ name: "x", scopes: [] }, "scopes"],
      [{ name: "x", scopes: ["sessions:fly"] }, "scopes"],
      [{ name: "x", scopes: "sessions:read" }, "scopes"],
      [{ name: "x".repeat(101), scopes: ["sessions:read"] }, "name"],
      [{ name: "   ", scopes: ["sessions:read"] }, "name"],
      [{ name: "x", scopes: ["sessions:read"], actor_id: "" }, "actor_id"],
    ];
    for (const [body, param] of cases) {
      const response = await admin.post("/v1/api-keys", body);
      expect({ body, status: response.status }).toEqual({ body, status: 400 });
      expect(response.json.error).toMatchObject({ code: "invalid_request", param });
    }
    const notObject = await admin.post("/v1/api-keys", "[1,2]");
    expect(notObject.status).toBe(400);
    expect((await admin.get("/v1/api-keys?include_revoked=maybe")).status).toBe(400);
    expect((await admin.get("/v1/api-keys/key_missing")).status).toBe(404);
  });

  it("trellis keys: create, list and revoke through the gateway", async () => {
    const env = { TRELLIS_URL: base, TRELLIS_API_KEY: ADMIN_KEY };
    const created = await cli(
      ["create", "--name", "cli", "--scopes", "sessions:read tasks:read", "--json"],
      env,
    );
    expect(created).toMatchObject({ code: 0, err: "" });
    const key = JSON.parse(created.out);
    expect(key.key).toMatch(/^trellis_sk_/);
    expect(key.scopes).toEqual(["sessions:read", "tasks:read"]);
    expect((await harnClient(base, key.key).get("/v1/sessions")).status).toBe(200);

    const listed = await cli(["list"], env);
    expect(listed.code).toBe(0);
    expect(listed.out).toContain(key.id);
    expect(listed.out).not.toContain(key.key);

    const revoked = await cli(["revoke", key.id], env);
    expect(revoked.code).toBe(0);
    expect(revoked.out).toContain(`API key ${key.id} revoked`);
    expect((await harnClient(base, key.key).get("/v1/sessions")).status).toBe(401);

    const human = await cli(["create", "--name", "human", "--scopes", "sessions:read"], env);
    expect(human.out).toMatch(/Shown once; keep it safe:\n {2}trellis_sk_/);

    // Restricted to agents: the gateway refuses the others.
    const bot = await cli(
      ["create", "--name", "bot", "--scopes", "agents:read", "--agent-ids", "agent_a agent_b"],
      env,
    );
    expect(bot.code).toBe(0);
    expect(bot.out).toContain("Restricted to agents: agent_a agent_b.");
    const botKey = /trellis_sk_\S+/.exec(bot.out)?.[0] as string;
    const refused = await harnClient(base, botKey).get("/v1/personas/agent_c");
    expect({ status: refused.status, code: refused.json.error.code }).toEqual({
      status: 403,
      code: "permission_denied",
    });
  });

  it("trellis keys: says what is wrong, with exit codes", async () => {
    const env = { TRELLIS_URL: base, TRELLIS_API_KEY: ADMIN_KEY };
    expect((await cli([], env)).code).toBe(2);
    expect((await cli(["rotate"], env)).code).toBe(2);
    const scope = await cli(["create", "--name", "x", "--scopes", "tasks:fly"], env);
    expect(scope.code).toBe(2);
    expect(scope.err).toContain('unknown scope "tasks:fly"');
    expect((await cli(["create", "--scopes", "tasks:read"], env)).code).toBe(2);
    expect((await cli(["revoke"], env)).code).toBe(2);
    const missing = await cli(["revoke", "key_missing"], env);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("404 resource_not_found");
    const wrongKey = await cli(["list"], {
      TRELLIS_URL: base,
      TRELLIS_API_KEY: "wrong-key-0123456789",
    });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.err).not.toContain("wrong-key-0123456789");
    const nowhere = await cli(["list"], {
      TRELLIS_URL: "http://127.0.0.1:9",
      TRELLIS_API_KEY: ADMIN_KEY,
    });
    expect(nowhere.code).toBe(2);
    expect(nowhere.err).toContain("cannot reach Trellis");
    for (const agents of ["", "agent a/b"]) {
      const bad = await cli(
        ["create", "--name", "x", "--scopes", "tasks:read", "--agent-ids", agents],
        env,
      );
      expect(bad.code).toBe(2);
      expect(bad.err).toContain("--agent-ids");
    }
    const noKey = await cli(["list"], { TRELLIS_URL: base, TRELLIS_DATA_DIR: "/nonexistent" });
    expect(noKey.code).toBe(2);
    expect(noKey.err).toContain("no API key");
  });
});

describe("trellis keys --database-url (real PostgreSQL)", () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase("trellis_keys_cli");
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** `trellis keys <command> --database-url <the test database> …rest`. */
  const onDatabase = (command: string, ...rest: string[]) =>
    cli([command, "--database-url", db.url, ...rest]);
  /** `trellis keys create …flags --json` on the test database, which succeeds: the key printed. */
  const createOnDatabase = async (...flags: string[]) => {
    const created = await onDatabase("create", ...flags, "--json");
    expect(created.code).toBe(0);
    return JSON.parse(created.out);
  };

  it("manages keys in the gateway's schema, even before the gateway first started", async () => {
    const key = await createOnDatabase(
      "--name",
      "recovery",
      "--workspace",
      "w_ops",
      "--scopes",
      "*",
    );
    expect(key).toMatchObject({ workspace_id: "w_ops", scopes: ["*"], actor_id: "recovery" });

    // What the gateway will see.
    const database = await createDatabase({ kind: "postgres", url: db.url });
    try {
      const store = new PostgresKeyStore(database, "gateway");
      expect(await store.authenticate(key.key)).toMatchObject({ id: key.id, workspaceId: "w_ops" });
      const stored = await database.kysely
        .withSchema("gateway")
        .selectFrom("api_keys" as never)
        .selectAll()
        .execute();
      expect(JSON.stringify(stored)).not.toContain(key.key);

      const listed = await onDatabase("list", "--workspace", "w_ops", "--json");
      expect(JSON.parse(listed.out).map((k: { id: string }) => k.id)).toEqual([key.id]);
      const revoked = await onDatabase("revoke", key.id);
      expect(revoked.code).toBe(0);
      expect(await store.authenticate(key.key)).toBeUndefined();
      expect((await onDatabase("revoke", "key_missing")).code).toBe(1);

      // --agent-ids in the database: the policy the gateway reads.
      const botKey = await createOnDatabase(
        "--name",
        "bot",
        "--scopes",
        "agents:read",
        "--agent-ids",
        "agent_a,agent_b",
      );
      expect(botKey.agent_ids).toEqual(["agent_a", "agent_b"]);
      const policies = new AgentPolicyStore(database, "gateway");
      expect(await policies.get(`api_key:${botKey.id}`)).toEqual({
        agentIds: ["agent_a", "agent_b"],
      });
    } finally {
      await database.close();
    }
    const unreachable = await cli([
      "list",
      "--database-url",
      "postgres://postgres@127.0.0.1:9/none",
    ]);
    expect(unreachable.code).toBe(2);
  }, 60_000);
});
