// Vaults in distributed mode: the gateway and the adapters service as their
// own services on Postgres, REST and gRPC forwarded to the adapters service
// over h2c with the caller; the key from TRELLIS_VAULT_KEY, values sealed in
// the adapters schema, never answered.
import { randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { adaptersService } from "@trellis/adapters";
import { VaultService } from "@trellis/contracts/adapters";
import { harnClient } from "@trellis/gateway/testing";
import type { RunningService } from "@trellis/platform";
import { createDatabase } from "@trellis/storage";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";

const SECRET = `dist-vault-${randomBytes(16).toString("hex")}`;

describe("vaults in distributed mode", () => {
  let deployment: TestDeployment;
  let gateway: RunningService;

  beforeAll(async () => {
    deployment = await openDeployment("trellis_vaults", { prefix: "vlt", meshSecret: true });
    const adapters = await deployment.start(adaptersService, {
      TRELLIS_ADAPTERS_REMOTE: "false",
      TRELLIS_VAULT_KEY: randomBytes(32).toString("base64"),
    });
    gateway = await deployment.start(gatewayService, {
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_ADAPTERS_URL: adapters.address.url,
      // Not deployed here; vault routes do not need them.
      TRELLIS_TASKS_URL: "http://127.0.0.1:9",
      TRELLIS_RECEIPTS_URL: "http://127.0.0.1:9",
    });
  }, 60_000);

  afterAll(async () => {
    await deployment?.close();
  });

  it("forwards REST and gRPC to the adapters service; values stay sealed and unanswered", async () => {
    const api = harnClient(gateway.address.url, ADMIN_KEY);
    const vault = await api.post("/v1/vaults", {
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: ["agent_x"],
    });
    expect(vault.status, vault.text).toBe(201);
    const id = vault.json.id as string;
    const put = await api.request("PUT", `/v1/vaults/${id}/secrets/DB_PASSWORD`, {
      body: { value: SECRET },
    });
    expect(put.status, put.text).toBe(200);
    const listed = await api.get(`/v1/vaults/${id}/secrets`);
    expect(listed.json.data.map((s: { name: string }) => s.name)).toEqual(["DB_PASSWORD"]);
    expect(listed.text).not.toContain(SECRET);

    const client = createClient(
      VaultService,
      createGrpcTransport({ baseUrl: gateway.address.url }),
    );
    const auth = { headers: { authorization: `Bearer ${ADMIN_KEY}` } };
    const { vault: got } = await client.getVault({ vaultId: id }, auth);
    expect(got?.allowedAgentIds).toEqual(["agent_x"]);
    await expect(client.getVault({ vaultId: id })).rejects.toMatchObject({ code: 16 });
    await expect(client.getVault({ vaultId: "vlt_missing" }, auth)).rejects.toMatchObject({
      code: 5,
    });

    const raw = await createDatabase({ kind: "postgres", url: deployment.db.url });
    try {
      const rows = await sql`select * from adapters.vault_secrets`.execute(raw.kysely);
      expect(rows.rows).toHaveLength(1);
      expect(JSON.stringify(rows.rows)).not.toContain(SECRET);
    } finally {
      await raw.close();
    }
  });
});
