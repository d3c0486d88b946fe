// Webhook signing secrets at rest in embedded mode (issue 22, finding 5):
// without TRELLIS_WEBHOOK_SECRET_KEY an embedded gateway seals them with a
// key it generates (a 0600 file in the data directory, as vaults do), so the
// database never holds one in plain text, and the key survives a restart.
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWebhookSecretBox, WEBHOOK_KEY_FILE } from "../src/webhooks/config.js";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-webhook-seal-admin-key-0123456789";

describe("webhook signing secrets in embedded mode", () => {
  let dataDir: string;
  let trellis: EmbeddedTrellis | undefined;

  const start = () => startGatewayWithTasks(ADMIN_KEY, {}, { dataDir });

  const storedSecret = async (running: EmbeddedTrellis, id: string) => {
    const gateway = running.contexts.get("gateway");
    if (!gateway) throw new Error("no gateway");
    const result = await sql<{ secret: string }>`
      select secret from gateway.webhook_subscriptions where id = ${id}`.execute(gateway.db.kysely);
    return result.rows[0]?.secret ?? "";
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "trellis-webhook-seal-"));
  });

  afterAll(async () => {
    await trellis?.close({ graceMs: 200 });
    await rm(dataDir, { recursive: true, force: true });
  });

  it("seals them with a generated key kept in the data directory", async () => {
    trellis = await start();
    const admin = harnClient(trellis.address.url, ADMIN_KEY);
    const made = await admin.post("/v1/webhooks", {
      url: "https://203.0.114.1/hook",
      event_types: ["session.closed"],
    });
    expect(made.status).toBe(201);
    const secret: string = made.json.secret;
    expect(secret).toMatch(/^whsec_/);
    const stored = await storedSecret(trellis, made.json.id);
    expect(stored).toMatch(/^enc:v1:/);
    expect(stored).not.toContain(secret.slice("whsec_".length));
    const keyFile = await stat(join(dataDir, WEBHOOK_KEY_FILE));
    expect(keyFile.mode & 0o777).toBe(0o600);

    // After a restart the same key opens it.
    await trellis.close({ graceMs: 200 });
    trellis = await start();
    const gateway = trellis.contexts.get("gateway");
    if (!gateway) throw new Error("no gateway");
    const box = await loadWebhookSecretBox({
      mode: "embedded",
      material: undefined,
      dataDir,
      db: gateway.db,
    });
    expect(box.open(await storedSecret(trellis, made.json.id))).toBe(secret);
  });

  it("keeps an in-memory key for the database's lifetime, and none in distributed mode", async () => {
    const db = {};
    const first = await loadWebhookSecretBox({ mode: "embedded", material: undefined, db });
    const again = await loadWebhookSecretBox({ mode: "embedded", material: undefined, db });
    expect(first.canSeal).toBe(true);
    expect(again.open(first.seal("whsec_x"))).toBe("whsec_x");
    const other = await loadWebhookSecretBox({ mode: "embedded", material: undefined, db: {} });
    expect(() => other.open(first.seal("whsec_x"))).toThrow();
    const distributed = await loadWebhookSecretBox({
      mode: "distributed",
      material: undefined,
      db,
    });
    expect(distributed.canSeal).toBe(false);
    const operator = await loadWebhookSecretBox({
      mode: "distributed",
      material: "operator key material",
      db,
    });
    expect(operator.canSeal).toBe(true);
  });
});
