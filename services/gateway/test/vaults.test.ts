/**
 * Vaults through the gateway (embedded: gateway, tasks, adapters): REST and
 * gRPC create / read / list, write-only secrets (no answer carries a value),
 * the vaults:read / vaults:write scopes, another workspace's vault as 404,
 * tenant-global vaults for admin keys only.
 */
import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { VaultAccessService, VaultService } from "@trellis/contracts/adapters";
import { harnClient } from "@trellis/gateway/testing";
import { describe, expect, it } from "vitest";
import { embeddedGateway } from "./support/embedded.js";

const ADMIN_KEY = `trellis-vaults-admin-${randomBytes(16).toString("hex")}`;
const SECRET = `vault-value-${randomBytes(16).toString("hex")}`;

const gw = embeddedGateway("vaults", ADMIN_KEY);

describe("vaults over REST", () => {
  it("creates, reads and lists vaults and secrets without ever answering a value", async () => {
    const writer = await gw.clientWith("default", ["vaults:read", "vaults:write"]);
    const created = await writer.post("/v1/vaults", {
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: ["agent_a"],
      metadata: { team: "ops" },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({
      object: "vault",
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: ["agent_a"],
      metadata: { team: "ops" },
    });
    const id = created.json.id as string;

    const put = await writer.request("PUT", `/v1/vaults/${id}/secrets/API_TOKEN`, {
      body: { value: SECRET },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toMatchObject({
      object: "vault_secret",
      name: "API_TOKEN",
      size_bytes: SECRET.length,
    });
    expect(put.headers.get("cache-control")).toBe("no-store");

    const reads = [
      put,
      await writer.get(`/v1/vaults/${id}`),
      await writer.get("/v1/vaults"),
      await writer.get(`/v1/vaults/${id}/secrets`),
    ];
    for (const read of reads) {
      expect(read.status).toBeLessThan(300);
      expect(read.text).not.toContain(SECRET);
    }
    expect(reads[2]?.json.data.map((v: { id: string }) => v.id)).toContain(id);
    expect(reads[3]?.json.data).toEqual([
      expect.objectContaining({ name: "API_TOKEN", vault_id: id, size_bytes: SECRET.length }),
    ]);

    // Replacing keeps one secret; deleting it twice is a 404 the second time.
    expect(
      (await writer.request("PUT", `/v1/vaults/${id}/secrets/API_TOKEN`, { body: { value: "v2" } }))
        .json.size_bytes,
    ).toBe(2);
    expect((await writer.get(`/v1/vaults/${id}/secrets`)).json.data).toHaveLength(1);
    expect((await writer.request("DELETE", `/v1/vaults/${id}/secrets/API_TOKEN`)).status).toBe(200);
    const again = await writer.request("DELETE", `/v1/vaults/${id}/secrets/API_TOKEN`);
    expect(again.status).toBe(404);
    expect(again.json.error.code).toBe("resource_not_found");
  });

  it("validates what it stores", async () => {
    const admin = harnClient(gw.base, ADMIN_KEY);
    const bad = [
      await admin.post("/v1/vaults", { capabilities: [] }),
      await admin.post("/v1/vaults", { provider: "hashicorp", capabilities: [] }),
      await admin.post("/v1/vaults", { provider: "trellis", capabilities: ["launch"] }),
    ];
    expect(bad.map((r) => [r.status, r.json.error.code])).toEqual([
      [400, "invalid_request"],
      // A provider this deployment does not implement: 501, naming those it does.
      [501, "not_implemented"],
      [400, "invalid_request"],
    ]);
    expect(bad[1]?.json.error.message).toContain("supported: trellis, oauth");
    const conformance = await admin.post("/v1/vaults", {
      provider: "conformance-oauth",
      capabilities: ["oauth_refresh"],
    });
    expect([conformance.status, conformance.json.error.code]).toEqual([501, "not_implemented"]);
    // Not a provider name at all (a fuzz case: 200 KB of "h"): the request is wrong, 400.
    const junk = await admin.post("/v1/vaults", { provider: "h".repeat(200_000) });
    expect([junk.status, junk.json.error.code, junk.json.error.param]).toEqual([
      400,
      "invalid_request",
      "provider",
    ]);
    const oauth = await admin.post("/v1/vaults", {
      provider: "oauth",
      capabilities: ["oauth_refresh"],
    });
    expect(oauth.status, oauth.text).toBe(201);
    expect(oauth.json).toMatchObject({ provider: "oauth", capabilities: ["oauth_refresh"] });
    const vault = await admin.post("/v1/vaults", { provider: "trellis", capabilities: ["read"] });
    const readOnly = await admin.request("PUT", `/v1/vaults/${vault.json.id}/secrets/X`, {
      body: { value: "v" },
    });
    expect([readOnly.status, readOnly.json.error.code]).toEqual([422, "policy_violation"]);
    const badName = await admin.post("/v1/vaults", { provider: "trellis", capabilities: [] });
    const named = await admin.request("PUT", `/v1/vaults/${badName.json.id}/secrets/a%20b`, {
      body: { value: "v" },
    });
    expect(named.status).toBe(400);
  });

  it("updates a vault's policy, capabilities and metadata, and deletes it with its secrets", async () => {
    const admin = harnClient(gw.base, ADMIN_KEY);
    const vault = await admin.post("/v1/vaults", {
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: ["agent_a"],
    });
    const id = vault.json.id as string;
    expect(
      (await admin.request("PUT", `/v1/vaults/${id}/secrets/TOKEN`, { body: { value: "v" } }))
        .status,
    ).toBe(200);
    const updated = await admin.post(`/v1/vaults/${id}`, {
      allowed_agent_ids: ["agent_b", "agent_c", "agent_b"],
      capabilities: ["read"],
    });
    expect(updated.status).toBe(200);
    expect(updated.json).toMatchObject({
      id,
      allowed_agent_ids: ["agent_b", "agent_c"],
      capabilities: ["read"],
      metadata: {},
    });
    // Only the fields given change.
    const relabeled = await admin.post(`/v1/vaults/${id}`, { metadata: { team: "ops" } });
    expect(relabeled.json).toMatchObject({
      allowed_agent_ids: ["agent_b", "agent_c"],
      capabilities: ["read"],
      metadata: { team: "ops" },
    });
    expect((await admin.get(`/v1/vaults/${id}`)).json.metadata).toEqual({ team: "ops" });
    // Read-only now: no more writes.
    const write = await admin.request("PUT", `/v1/vaults/${id}/secrets/OTHER`, {
      body: { value: "v" },
    });
    expect(write.status).toBe(422);

    const refusals = [
      await admin.post(`/v1/vaults/${id}`, {}),
      await admin.post(`/v1/vaults/${id}`, { provider: "other" }),
      await admin.post(`/v1/vaults/${id}`, { capabilities: ["launch"] }),
      await admin.post(`/v1/vaults/${id}`, { allowed_agent_ids: [""] }),
      await admin.post(`/v1/vaults/${id}`, { allowed_agent_ids: "agent_a" }),
    ];
    expect(refusals.map((r) => [r.status, r.json.error.code])).toEqual(
      Array(refusals.length).fill([400, "invalid_request"]),
    );
    expect((await admin.post("/v1/vaults/vlt_missing", { metadata: {} })).status).toBe(404);

    const deleted = await admin.request("DELETE", `/v1/vaults/${id}`);
    expect([deleted.status, deleted.json]).toEqual([200, { object: "vault", id, deleted: true }]);
    expect((await admin.get(`/v1/vaults/${id}`)).status).toBe(404);
    expect((await admin.get(`/v1/vaults/${id}/secrets`)).status).toBe(404);
    expect((await admin.request("DELETE", `/v1/vaults/${id}`)).status).toBe(404);
  });

  it("hides another workspace's vaults and keeps tenant-global ones to admin keys", async () => {
    const admin = harnClient(gw.base, ADMIN_KEY);
    const mine = await admin.post("/v1/vaults", {
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
    });
    const outsider = await gw.clientWith("w_vault_other", ["vaults:read", "vaults:write"]);
    for (const response of [
      await outsider.get(`/v1/vaults/${mine.json.id}`),
      await outsider.get(`/v1/vaults/${mine.json.id}/secrets`),
      await outsider.request("PUT", `/v1/vaults/${mine.json.id}/secrets/X`, {
        body: { value: "v" },
      }),
      await outsider.get("/v1/vaults?workspace_id=default"),
      await outsider.post(`/v1/vaults/${mine.json.id}`, { metadata: {} }),
      await outsider.request("DELETE", `/v1/vaults/${mine.json.id}`),
    ]) {
      expect([response.status, response.json.error.code]).toEqual([404, "resource_not_found"]);
    }
    expect((await outsider.get("/v1/vaults")).json.data).toEqual([]);

    const global = await admin.post("/v1/vaults", {
      workspace_id: null,
      provider: "trellis",
      capabilities: ["read"],
    });
    expect([global.status, global.json.workspace_id]).toEqual([201, null]);
    const member = await gw.clientWith("default", ["vaults:read", "vaults:write"]);
    expect((await member.get(`/v1/vaults/${global.json.id}`)).status).toBe(404);
    const refused = await member.post("/v1/vaults", {
      workspace_id: null,
      provider: "trellis",
      capabilities: ["read"],
    });
    expect([refused.status, refused.json.error.code]).toEqual([403, "permission_denied"]);
  });
});

describe("vaults over gRPC (through the same scope table)", () => {
  it("creates a vault, writes a secret and reads only metadata back", async () => {
    const key = await gw.keyWith("default", ["vaults:read", "vaults:write"]);
    const client = createClient(VaultService, createGrpcTransport({ baseUrl: gw.base }));
    const auth = { headers: { authorization: `Bearer ${key}` } };
    const { vault } = await client.createVault(
      { provider: "trellis", allowedAgentIds: ["agent_g"] },
      auth,
    );
    expect(vault).toMatchObject({
      workspaceId: "default",
      capabilities: ["read", "write"],
      allowedAgentIds: ["agent_g"],
    });
    const vaultId = vault?.id as string;
    const { secret } = await client.putSecret({ vaultId, name: "TOKEN", value: SECRET }, auth);
    expect(secret).toMatchObject({ name: "TOKEN", sizeBytes: SECRET.length });
    const answers = [
      await client.getVault({ vaultId }, auth),
      await client.listVaults({}, auth),
      await client.listSecrets({ vaultId }, auth),
    ];
    for (const answer of answers)
      expect(
        JSON.stringify(answer, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
      ).not.toContain(SECRET);
    expect(answers[2]).toMatchObject({ secrets: [{ name: "TOKEN" }] });
    await client.deleteSecret({ vaultId, name: "TOKEN" }, auth);
    expect((await client.listSecrets({ vaultId }, auth)).secrets).toEqual([]);
    // UpdateVault sets only the fields its mask names; an unknown one is refused.
    const { vault: updated } = await client.updateVault(
      { vaultId, allowedAgentIds: ["agent_h"], updateMask: { paths: ["allowed_agent_ids"] } },
      auth,
    );
    expect(updated).toMatchObject({
      allowedAgentIds: ["agent_h"],
      capabilities: ["read", "write"],
    });
    for (const updateMask of [{ paths: [] }, { paths: ["provider"] }]) {
      const refused = await client
        .updateVault({ vaultId, updateMask }, auth)
        .catch((e: unknown) => e);
      expect(ConnectError.from(refused).code).toBe(Code.InvalidArgument);
    }

    // Another workspace: NotFound; a credential without the scope: PermissionDenied.
    const outsider = {
      headers: {
        authorization: `Bearer ${await gw.keyWith("w_vault_other", ["vaults:read", "vaults:write"])}`,
      },
    };
    const hidden = await client.getVault({ vaultId }, outsider).catch((e: unknown) => e);
    expect(ConnectError.from(hidden).code).toBe(Code.NotFound);
    const reader = {
      headers: { authorization: `Bearer ${await gw.keyWith("default", ["vaults:read"])}` },
    };
    expect((await client.getVault({ vaultId }, reader)).vault?.id).toBe(vaultId);
    const denied = await client
      .putSecret({ vaultId, name: "TOKEN", value: "x" }, reader)
      .catch((e: unknown) => e);
    expect(ConnectError.from(denied).code).toBe(Code.PermissionDenied);
    const anonymous = await client.listVaults({}).catch((e: unknown) => e);
    expect(ConnectError.from(anonymous).code).toBe(Code.Unauthenticated);
    // The mesh-internal VaultAccessService (secret values) is not served publicly, not even to admin.
    const internal = await createClient(
      VaultAccessService,
      createGrpcTransport({ baseUrl: gw.base }),
    )
      .getAgentVaults(
        { workspaceId: "default", agentId: "agent_g" },
        { headers: { authorization: `Bearer ${ADMIN_KEY}` } },
      )
      .catch((e: unknown) => e);
    expect([Code.PermissionDenied, Code.Unimplemented]).toContain(ConnectError.from(internal).code);
    const readerDelete = await client.deleteVault({ vaultId }, reader).catch((e: unknown) => e);
    expect(ConnectError.from(readerDelete).code).toBe(Code.PermissionDenied);
    await client.deleteVault({ vaultId }, auth);
    const gone = await client.getVault({ vaultId }, auth).catch((e: unknown) => e);
    expect(ConnectError.from(gone).code).toBe(Code.NotFound);
  });
});
