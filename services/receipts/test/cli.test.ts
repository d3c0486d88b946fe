// `trellis receipts verify`: offline on an exported receipt with the public
// key (PEM or JWK), online by id through the REST API.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ReceiptService } from "@trellis/contracts/receipts";
import { type EmbeddedTrellis, type ServiceContext, startEmbedded } from "@trellis/platform";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runReceiptsVerify } from "../../../src/cli/receipts.js";
import { publicKeyPem } from "../src/domain/signing.js";
import { receiptsService } from "../src/index.js";
import { newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { appendEvents, producerService, receiptSchemaPath, taskEvents } from "./support.js";

async function run(
  target: string,
  options: Parameters<typeof runReceiptsVerify>[2],
): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    out += String(chunk);
    return true;
  });
  const stderr = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    err += String(chunk);
    return true;
  });
  try {
    const code = await runReceiptsVerify({}, target, options);
    return { code, out, err };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
}

describe("trellis receipts verify", () => {
  let dir: string;
  const key = newKey("key_cli");
  const sealed = receiptOf(
    taskEvents({ taskId: "task_cli", withTool: true, sequenced: true }),
    key,
  );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trellis-receipts-cli-"));
    await writeFile(join(dir, "receipt.json"), JSON.stringify(sealed.document, null, 2));
    await writeFile(join(dir, "key.pem"), publicKeyPem(key.publicKey));
    await writeFile(
      join(dir, "key.jwk"),
      JSON.stringify({ ...key.publicKey.export({ format: "jwk" }), kid: "key_cli" }),
    );
    await writeFile(join(dir, "other.pem"), publicKeyPem(newKey().publicKey));
    const tampered = JSON.parse(sealed.text);
    tampered.side_effects.tool_calls = [];
    await writeFile(join(dir, "tampered.json"), JSON.stringify(tampered));
    await writeFile(
      join(dir, "resource.json"),
      JSON.stringify({
        id: "rcpt_task_cli",
        object: "receipt",
        wire: { payload: sealed.document },
      }),
    );
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("verifies an exported receipt offline with a PEM or JWK public key", async () => {
    for (const keyFile of ["key.pem", "key.jwk"]) {
      const result = await run(join(dir, "receipt.json"), {
        publicKey: join(dir, keyFile),
        schema: receiptSchemaPath,
      });
      expect(result.code).toBe(0);
      expect(result.out).toMatch(/^VALID {2}receipt rcpt_task_cli \(offline\)/);
      expect(result.out).toContain("checks: parse, schema, hash, signature");
    }
    const resource = await run(join(dir, "resource.json"), { publicKey: join(dir, "key.pem") });
    expect(resource.code).toBe(0);
  });

  it("fails a tampered receipt or one checked with another key, saying why", async () => {
    const tampered = await run(join(dir, "tampered.json"), {
      publicKey: join(dir, "key.pem"),
      json: true,
    });
    expect(tampered.code).toBe(1);
    expect(JSON.parse(tampered.out).problems.map((p: { code: string }) => p.code)).toEqual([
      "hash_mismatch",
    ]);
    const wrongKey = await run(join(dir, "receipt.json"), { publicKey: join(dir, "other.pem") });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.out).toContain("signature_invalid");
  });

  it("asks for a key or a URL when given a file and neither", async () => {
    const result = await run(join(dir, "receipt.json"), {});
    expect(result.code).toBe(2);
    expect(result.err).toContain("--public-key");
  });

  describe("online", () => {
    let trellis: EmbeddedTrellis;
    let producer: ServiceContext | undefined;

    beforeAll(async () => {
      trellis = await startEmbedded({
        services: [producerService((c) => (producer = c)), receiptsService],
        port: 0,
        env: {},
      });
    });

    afterAll(async () => {
      await trellis?.close({ graceMs: 100 });
    });

    it("verifies a stored receipt by id, and an exported file through the API", async () => {
      await appendEvents(producer!, taskEvents({ taskId: "task_online", workspaceId: "ws_cli" }));
      const receipt = await eventually(async () => {
        const { receipts } = await trellis
          .client(ReceiptService)
          .listReceipts({ workspaceId: "ws_cli" });
        return receipts[0];
      });
      const byId = await run(receipt.id, { url: trellis.address.url });
      expect(byId.code).toBe(0);
      expect(byId.out).toContain("VALID");
      expect(byId.out).toContain("chain");

      const file = join(dir, "online.json");
      await writeFile(file, receipt.documentJson);
      const viaApi = await run(file, { url: trellis.address.url, json: true });
      expect(viaApi.code).toBe(0);
      expect(JSON.parse(viaApi.out)).toMatchObject({ valid: true, mode: "online" });

      // Not found is a usage problem (exit 2), not an invalid receipt (1).
      const missing = await run("rcpt_missing", { url: trellis.address.url });
      expect(missing.code).toBe(2);
      expect(missing.err).toContain("resource_not_found");
    });
  });
});
