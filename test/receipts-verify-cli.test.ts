// `trellis receipts verify` against a real receipt of a real task, through
// the gateway as a user meets it: by id online (the protocol header sent),
// and offline with the key export saved from GET /v1/receipts/public-keys
// exactly as it comes. Valid → 0, tampered → 1, a connection or usage
// problem → 2.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { eventually, runProcess } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allServices } from "../src/services.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const key = "trellis-receipts-cli-test-key-0123456789";
const version = "agents-protocol-2026-04-25";

function trellis(args: string[], env: Record<string, string> = {}) {
  return runProcess(process.execPath, [join(root, "bin/trellis.js"), ...args], {
    cwd: root,
    env: { ...process.env, TRELLIS_URL: "", ...env },
  });
}

describe("trellis receipts verify, through the gateway", () => {
  let server: EmbeddedTrellis;
  let dir: string;
  let url: string;
  let receiptId: string;

  const call = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${url}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${key}`,
        "harn-agents-protocol-version": version,
        "content-type": "application/json",
        ...(init.headers as Record<string, string>),
      },
    });
    return { status: response.status, text: await response.text() };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trellis-receipts-verify-"));
    server = await startEmbedded({
      services: allServices,
      port: 0,
      env: { TRELLIS_API_KEY: key },
      logger: createLogger({ service: "receipts-cli-test", level: "error", write: () => {} }),
    });
    url = server.address.url;
    const session = JSON.parse((await call("/v1/sessions", { method: "POST", body: "{}" })).text);
    const task = JSON.parse(
      (
        await call(`/v1/sessions/${session.id}/tasks`, {
          method: "POST",
          body: JSON.stringify({ input: "hello" }),
        })
      ).text,
    );
    const receipts = await eventually(
      async () => {
        const r = await call(`/v1/tasks/${task.id}/receipts`);
        const data = r.status === 200 ? JSON.parse(r.text).data : [];
        return data.length > 0 ? data : undefined;
      },
      { timeoutMs: 30_000, what: "a receipt for the task" },
    );
    receiptId = receipts[0].id;
    const document = await call(`/v1/receipts/${receiptId}`, {
      headers: { accept: "application/vnd.harn.receipt+json" },
    });
    expect(document.status).toBe(200);
    await writeFile(join(dir, "receipt.json"), document.text);
    const tampered = JSON.parse(document.text);
    tampered.task_id = "task_someone_else";
    await writeFile(join(dir, "tampered.json"), JSON.stringify(tampered));
    // Saved as it comes: the service's own export, byte for byte.
    const keys = await call("/v1/receipts/public-keys");
    expect(keys.status).toBe(200);
    await writeFile(join(dir, "public-keys.json"), keys.text);
    const pem = JSON.parse(keys.text).data[0].public_key_pem as string;
    await writeFile(join(dir, "public-key.pem"), pem);
  }, 120_000);

  afterAll(async () => {
    await server?.close({ graceMs: 100 });
    await rm(dir, { recursive: true, force: true });
  });

  it("verifies a stored receipt by id online (exit 0)", async () => {
    const run = await trellis(["receipts", "verify", receiptId, "--url", url], {
      TRELLIS_API_KEY: key,
    });
    expect(run.err).toBe("");
    expect(run.code).toBe(0);
    expect(run.out).toMatch(/^VALID {2}receipt /);
    expect(run.out).toContain("(online)");
  }, 60_000);

  it("verifies offline with the public-keys export as it comes, or its PEM (exit 0)", async () => {
    for (const keyFile of ["public-keys.json", "public-key.pem"]) {
      const run = await trellis([
        "receipts",
        "verify",
        join(dir, "receipt.json"),
        "--public-key",
        join(dir, keyFile),
      ]);
      expect({ keyFile, code: run.code, err: run.err }).toEqual({ keyFile, code: 0, err: "" });
      expect(run.out).toMatch(/^VALID {2}receipt .*\(offline\)/);
    }
  }, 60_000);

  it("says a tampered receipt is not valid, offline and online (exit 1)", async () => {
    const offline = await trellis([
      "receipts",
      "verify",
      join(dir, "tampered.json"),
      "--public-key",
      join(dir, "public-keys.json"),
    ]);
    expect(offline.code).toBe(1);
    expect(offline.out).toMatch(/^INVALID/);
    const online = await trellis(["receipts", "verify", join(dir, "tampered.json"), "--url", url], {
      TRELLIS_API_KEY: key,
    });
    expect(online.code).toBe(1);
    expect(online.out).toMatch(/^INVALID/);
  }, 60_000);

  it("exits 2 for an unknown receipt, a missing key and a key file that holds none", async () => {
    const missing = await trellis(["receipts", "verify", "rcpt_missing", "--url", url], {
      TRELLIS_API_KEY: key,
    });
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("404");
    const unauthenticated = await trellis(["receipts", "verify", receiptId, "--url", url]);
    expect(unauthenticated.code).toBe(2);
    expect(unauthenticated.err).toContain("--api-key");
    await writeFile(join(dir, "not-a-key.json"), '{"object": "list", "data": []}');
    const noKey = await trellis([
      "receipts",
      "verify",
      join(dir, "receipt.json"),
      "--public-key",
      join(dir, "not-a-key.json"),
    ]);
    expect(noKey.code).toBe(2);
    expect(noKey.err).toContain("no usable public key");
  }, 60_000);
});
