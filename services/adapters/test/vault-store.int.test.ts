/**
 * Vaults on a real PostgreSQL, as the adapters service runs them in
 * distributed mode: the key from TRELLIS_VAULT_KEY / _FILE (or none: metadata
 * works, secret writes are refused with config_invalid), values sealed at
 * rest, the access policy (workspace, tenant-global, allowed agents, the
 * read capability), a wrong key never opening anything, and the embedded
 * data-directory key file.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { VaultService } from "@trellis/contracts/adapters";
import { adaptersMigrations, loadVaultBox, VAULT_KEY_FILE, VaultStore } from "@trellis/execution";
import { errorDetailOf } from "@trellis/runtime";
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { callFailure, createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withErrorDetails } from "../src/handlers/errors.js";
import { createVaultHandlers } from "../src/index.js";

const SCHEMA = "adapters_vaults";
const KEY = randomBytes(32).toString("base64");
let testDb: TestDatabase;
let db: Database;
let dir: string;

beforeAll(async () => {
  testDb = await createTestDatabase("vaults");
  db = await createDatabase({ kind: "postgres", url: testDb.url });
  await migrate(db, { schema: SCHEMA, migrations: adaptersMigrations });
  dir = await mkdtemp(join(tmpdir(), "trellis-vault-"));
});

afterAll(async () => {
  await db?.close();
  await testDb?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function storeWith(env: Record<string, string>): Promise<VaultStore> {
  return new VaultStore(db, SCHEMA, await loadVaultBox({ mode: "distributed", env, db }));
}

/** The VaultService over `store`, called as `caller` (x-trellis-* headers; none: internal). */
function serviceFor(store: VaultStore, caller?: { workspace: string; scopes: string }) {
  const transport = createRouterTransport(({ service }) => {
    service(VaultService, withErrorDetails(VaultService, createVaultHandlers(store)));
  });
  const headers: Record<string, string> = caller
    ? {
        "x-trellis-actor": "tester",
        "x-trellis-workspace": caller.workspace,
        "x-trellis-scopes": caller.scopes,
      }
    : {};
  const client = createClient(VaultService, transport);
  return { client, options: { headers } };
}

describe("vaults in distributed mode", () => {
  it("without a key: vault metadata works, storing a secret is config_invalid", async () => {
    const store = await storeWith({});
    expect(store.canWriteSecrets).toBe(false);
    const { client, options } = serviceFor(store, { workspace: "w1", scopes: "vaults:write" });
    const { vault } = await client.createVault({ provider: "trellis" }, options);
    expect(vault?.workspaceId).toBe("w1");
    const refused = await callFailure(
      client.putSecret({ vaultId: vault?.id ?? "", name: "K", value: "v" }, options),
    );
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(errorDetailOf(refused)?.reason).toBe("config_invalid");
    expect(refused.message).toContain("TRELLIS_VAULT_KEY");
    expect((await client.listVaults({}, options)).vaults.map((v) => v.id)).toContain(vault?.id);
  });

  it("refuses a key that is not 32 bytes of base64, and reads one from a file", async () => {
    for (const bad of ["short", Buffer.alloc(16).toString("base64"), "not base64 at all!!"]) {
      const error = (await loadVaultBox({
        mode: "distributed",
        env: { TRELLIS_VAULT_KEY: bad },
        db,
      }).then(
        () => {
          throw new Error(`key ${bad} was accepted`);
        },
        (e: unknown) => e,
      )) as { reason?: string; message: string };
      expect(error).toMatchObject({ reason: "config_invalid" });
      expect(error.message).not.toContain(bad);
    }
    const file = join(dir, "key.b64");
    await writeFile(file, `${KEY}\n`);
    const fromFile = await loadVaultBox({
      mode: "distributed",
      env: { TRELLIS_VAULT_KEY_FILE: file },
      db,
    });
    const fromEnv = await loadVaultBox({
      mode: "distributed",
      env: { TRELLIS_VAULT_KEY: KEY },
      db,
    });
    expect(fromEnv.open(fromFile.seal("same key"))).toBe("same key");
    const missing = await loadVaultBox({
      mode: "distributed",
      env: { TRELLIS_VAULT_KEY_FILE: join(dir, "absent") },
      db,
    }).catch((e: unknown) => e);
    expect(missing).toMatchObject({ reason: "config_invalid" });
  });

  it("seals values at rest; a wrong key opens nothing", async () => {
    const store = await storeWith({ TRELLIS_VAULT_KEY: KEY });
    const value = `pg-secret-${randomBytes(12).toString("hex")}`;
    const vault = await store.create({
      workspaceId: "w_rest",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowedAgentIds: ["agent_1"],
      metadata: {},
      createdBy: "test",
    });
    await store.putSecret(vault, "TOKEN", value);
    const rows = await sql<{
      sealed_value: string;
    }>`select * from ${sql.id(SCHEMA, "vault_secrets")} where vault_id = ${vault.id}`.execute(
      db.kysely,
    );
    expect(rows.rows).toHaveLength(1);
    expect(JSON.stringify(rows.rows)).not.toContain(value);
    expect(rows.rows[0]?.sealed_value.startsWith("enc:v1:")).toBe(true);

    const right = (await store.accessFor("w_rest", "agent_1")).get(vault.id);
    expect(right).toEqual({ allowed: true, secrets: new Map([["TOKEN", value]]) });
    const wrong = await storeWith({ TRELLIS_VAULT_KEY: randomBytes(32).toString("base64") });
    const denied = (await wrong.accessFor("w_rest", "agent_1")).get(vault.id);
    expect(denied).toMatchObject({ allowed: false });
    expect(JSON.stringify(denied)).not.toContain(value);
  });

  it("evaluates the access policy: workspace, tenant-global, listed agents, the read capability", async () => {
    const store = await storeWith({ TRELLIS_VAULT_KEY: KEY });
    const base = { provider: "trellis", metadata: {}, createdBy: "test" };
    const mine = await store.create({
      ...base,
      workspaceId: "w_pol",
      capabilities: ["read", "write"],
      allowedAgentIds: ["agent_a"],
    });
    const global = await store.create({
      ...base,
      workspaceId: null,
      capabilities: ["read"],
      allowedAgentIds: ["agent_a", "agent_b"],
    });
    const writeOnly = await store.create({
      ...base,
      workspaceId: "w_pol",
      capabilities: ["write"],
      allowedAgentIds: ["agent_a"],
    });
    const nobody = await store.create({
      ...base,
      workspaceId: "w_pol",
      capabilities: ["read", "write"],
      allowedAgentIds: [],
    });
    const elsewhere = await store.create({
      ...base,
      workspaceId: "w_pol_other",
      capabilities: ["read", "write"],
      allowedAgentIds: ["agent_a"],
    });
    const a = await store.accessFor("w_pol", "agent_a");
    expect(a.get(mine.id)?.allowed).toBe(true);
    expect(a.get(global.id)?.allowed).toBe(true);
    expect(a.get(writeOnly.id)).toMatchObject({
      allowed: false,
      reason: expect.stringContaining("reads"),
    });
    expect(a.get(nobody.id)).toMatchObject({
      allowed: false,
      reason: expect.stringContaining("agent_a"),
    });
    expect(a.has(elsewhere.id)).toBe(false);
    const b = await store.accessFor("w_pol", "agent_b");
    expect(b.get(mine.id)?.allowed).toBe(false);
    expect(b.get(global.id)?.allowed).toBe(true);
  });

  it("scopes the service to the caller's workspace; tenant-global needs an admin", async () => {
    const store = await storeWith({ TRELLIS_VAULT_KEY: KEY });
    const member = serviceFor(store, { workspace: "w_s", scopes: "vaults:read vaults:write" });
    const admin = serviceFor(store, { workspace: "w_admin", scopes: "*" });
    const { vault } = await member.client.createVault({}, member.options);
    const outsider = serviceFor(store, { workspace: "w_t", scopes: "vaults:read vaults:write" });
    for (const call of [
      () => outsider.client.getVault({ vaultId: vault?.id ?? "" }, outsider.options),
      () => outsider.client.listSecrets({ vaultId: vault?.id ?? "" }, outsider.options),
      () => outsider.client.createVault({ workspaceId: "w_s" }, outsider.options),
    ]) {
      expect((await callFailure(call())).code).toBe(Code.NotFound);
    }
    const refused = await callFailure(
      member.client.createVault({ tenantGlobal: true }, member.options),
    );
    expect(refused.code).toBe(Code.PermissionDenied);
    const { vault: global } = await admin.client.createVault({ tenantGlobal: true }, admin.options);
    expect(global?.workspaceId).toBe("");
    expect(
      (await callFailure(member.client.getVault({ vaultId: global?.id ?? "" }, member.options)))
        .code,
    ).toBe(Code.NotFound);
    const conflict = await callFailure(
      admin.client.createVault({ vaultId: vault?.id ?? "", workspaceId: "w_s" }, admin.options),
    );
    expect(conflict.code).toBe(Code.Aborted);
  });
});

describe("vault ids per workspace (issue 22)", () => {
  it("lets two workspaces use one id, neither learning of the other, each tool resolving its own", async () => {
    const store = await storeWith({ TRELLIS_VAULT_KEY: KEY });
    const scopes = "vaults:read vaults:write";
    const alice = serviceFor(store, { workspace: "w_id_a", scopes });
    const bob = serviceFor(store, { workspace: "w_id_b", scopes });
    const admin = serviceFor(store, { workspace: "w_id_admin", scopes: "*" });
    const body = { vaultId: "vlt_weather", allowedAgentIds: ["agent_x"] };
    const a = await alice.client.createVault(body, alice.options);
    expect(a.vault?.workspaceId).toBe("w_id_a");
    // Another workspace takes the same id: no 409, no hint that it is used.
    const b = await bob.client.createVault(body, bob.options);
    expect(b.vault).toMatchObject({ id: "vlt_weather", workspaceId: "w_id_b" });
    // Within one workspace the id is still unique.
    expect((await callFailure(alice.client.createVault(body, alice.options))).code).toBe(
      Code.Aborted,
    );
    await alice.client.putSecret(
      { vaultId: "vlt_weather", name: "API_KEY", value: "alice-key" },
      alice.options,
    );
    await bob.client.putSecret(
      { vaultId: "vlt_weather", name: "API_KEY", value: "bob-key" },
      bob.options,
    );
    // Each workspace sees, lists and deletes only its own.
    expect(
      (await bob.client.listSecrets({ vaultId: "vlt_weather" }, bob.options)).secrets.map(
        (x) => x.name,
      ),
    ).toEqual(["API_KEY"]);
    // A tool's `vlt_weather/API_KEY` resolves inside the caller's workspace.
    const forAlice = (await store.accessFor("w_id_a", "agent_x")).get("vlt_weather");
    const forBob = (await store.accessFor("w_id_b", "agent_x")).get("vlt_weather");
    expect(forAlice).toEqual({ allowed: true, secrets: new Map([["API_KEY", "alice-key"]]) });
    expect(forBob).toEqual({ allowed: true, secrets: new Map([["API_KEY", "bob-key"]]) });
    // A tenant-global vault of the same id is hidden by a workspace's own.
    await admin.client.createVault(
      { vaultId: "vlt_weather", tenantGlobal: true, allowedAgentIds: ["agent_x"] },
      admin.options,
    );
    // (An admin reaching a vault by id alone gets its own workspace's, else the tenant-global one.)
    await admin.client.putSecret(
      { vaultId: "vlt_weather", name: "API_KEY", value: "global-key" },
      admin.options,
    );
    expect((await store.accessFor("w_id_a", "agent_x")).get("vlt_weather")).toEqual(forAlice);
    expect((await store.accessFor("w_id_c", "agent_x")).get("vlt_weather")).toEqual({
      allowed: true,
      secrets: new Map([["API_KEY", "global-key"]]),
    });
    await bob.client.deleteVault({ vaultId: "vlt_weather" }, bob.options);
    expect((await alice.client.getVault({ vaultId: "vlt_weather" }, alice.options)).vault?.id).toBe(
      "vlt_weather",
    );
    expect(
      (await callFailure(bob.client.getVault({ vaultId: "vlt_weather" }, bob.options))).code,
    ).toBe(Code.NotFound);
  });
});

describe("a deployment without the adapters service", () => {
  it("has no vaults (a harness tool's vault read is then secret_not_found, not a failed turn)", async () => {
    const store = new VaultStore(
      db,
      "no_vault_tables_here",
      await loadVaultBox({ mode: "distributed", env: { TRELLIS_VAULT_KEY: KEY }, db }),
    );
    expect(await store.accessFor("w1", "agent_1")).toEqual(new Map());
  });
});

describe("the embedded vault key", () => {
  it("is generated once in the data directory (mode 0600) and reused", async () => {
    const dataDir = join(dir, "data");
    const first = await loadVaultBox({ mode: "embedded", env: {}, dataDir, db });
    const file = join(dataDir, VAULT_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(Buffer.from((await readFile(file, "utf8")).trim(), "base64")).toHaveLength(32);
    const second = await loadVaultBox({ mode: "embedded", env: {}, dataDir, db });
    expect(second.open(first.seal("kept"))).toBe("kept");
  });
});
