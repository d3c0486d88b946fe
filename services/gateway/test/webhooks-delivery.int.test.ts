// Signed webhook deliveries, black-box against the gateway and tasks service
// on PostgreSQL and JetStream: a receiver that is down (connection refused,
// then failing the first attempt of each delivery) still gets every task
// event once it is back, exactly once each, and verifies every signature
// (Standard Webhooks, checked here independently of the gateway's code).
// Also: SSRF refusals in a gateway that does not allow private targets, and
// the pure parts (signature test vector, address ranges, backoff).
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { harnClient, type Json } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { tasksService } from "@trellis/tasks";
import { eventually, freePort } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { guardedLookup, isBlockedAddress } from "../src/webhooks/address-guard.js";
import { loadWebhookConfig, retryDelayMs } from "../src/webhooks/config.js";
import { matchesEventType } from "../src/webhooks/dispatcher.js";
import { signWebhook, verifyWebhook } from "../src/webhooks/signing.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";
import { startGatewayWithTasks } from "./support/embedded.js";
import { createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";

/** What the receiver saw of one request. */
interface Received {
  id: string;
  timestamp: number;
  validSignature: boolean;
  body: Json;
  answered: number;
}

/** The receiver's own check, written from the Standard Webhooks rules. */
function independentlyValid(secret: string, req: IncomingMessage, body: string): boolean {
  const id = String(req.headers["webhook-id"] ?? "");
  const timestamp = String(req.headers["webhook-timestamp"] ?? "");
  const signatures = String(req.headers["webhook-signature"] ?? "").split(" ");
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
  const fresh = Math.abs(Date.now() / 1000 - Number(timestamp)) < 300;
  return fresh && signatures.includes(`v1,${expected}`);
}

describe("webhook deliveries (PostgreSQL, JetStream)", () => {
  let deployment: TestDeployment;
  let gatewayUrl: string;
  let api: ReturnType<typeof harnClient>;
  let receiver: Server | undefined;
  let port: number;
  const received: Received[] = [];
  let secret = "";

  beforeAll(async () => {
    deployment = await openDeployment("trellis_whk", { prefix: "whk" });
    const tasks = await deployment.start(tasksService);
    const gateway = await deployment.start(gatewayService, {
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_TASKS_URL: tasks.address.url,
      // The receiver is on loopback; retries are quick for the test.
      TRELLIS_WEBHOOKS_ALLOW_PRIVATE: "1",
      TRELLIS_WEBHOOK_RETRY_BASE: "100ms",
      TRELLIS_WEBHOOK_RETRY_MAX: "800ms",
      TRELLIS_WEBHOOK_MAX_ATTEMPTS: "50",
      TRELLIS_WEBHOOK_POLL: "50ms",
      TRELLIS_WEBHOOK_TIMEOUT: "2s",
    });
    gatewayUrl = gateway.address.url;
    api = harnClient(gatewayUrl, ADMIN_KEY);
    port = await freePort();
  }, 60_000);

  afterAll(async () => {
    receiver?.close();
    await deployment?.close();
  });

  function startReceiver(): Promise<void> {
    const attemptsById = new Map<string, number>();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const id = String(req.headers["webhook-id"]);
        const attempt = (attemptsById.get(id) ?? 0) + 1;
        attemptsById.set(id, attempt);
        // Flaky at first: the first attempt of every delivery fails with 503.
        const answered = attempt === 1 ? 503 : 200;
        received.push({
          id,
          timestamp: Number(req.headers["webhook-timestamp"]),
          validSignature: independentlyValid(secret, req, body),
          body: JSON.parse(body),
          answered,
        });
        res.statusCode = answered;
        res.end();
      });
    });
    return new Promise((resolve) => receiver!.listen(port, "127.0.0.1", () => resolve()));
  }

  it("refuses malformed subscriptions with the error envelope", async () => {
    for (const [body, param] of [
      [{}, "url"],
      [{ url: "ftp://example.com/hook" }, "url"],
      [{ url: "http://user:pw@example.com/hook" }, "url"],
      [{ url: "not a url" }, "url"],
      [{ url: `http://127.0.0.1:${port}/h`, event_types: ["Task Completed"] }, "event_types"],
      [{ url: `http://127.0.0.1:${port}/h`, event_types: [] }, "event_types"],
    ] as const) {
      const response = await api.post("/v1/webhooks", body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.json.error).toMatchObject({ code: "invalid_request", param });
    }
  });

  it("delivers every task event, signed, exactly once, after the receiver was down", async () => {
    const agent = await createScriptedAgent(api, "echo", echoAgent());
    const subscribed = await api.post("/v1/webhooks", {
      url: `http://127.0.0.1:${port}/hooks/trellis`,
      event_types: ["task.*"],
      description: "test receiver",
    });
    expect(subscribed.status).toBe(201);
    expect(subscribed.json).toMatchObject({ object: "webhook", event_types: ["task.*"] });
    secret = subscribed.json.secret;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const webhookId = subscribed.json.id as string;
    // The secret is shown once: never in reads.
    const read = await api.get(`/v1/webhooks/${webhookId}`);
    expect(read.status).toBe(200);
    expect(read.text).not.toContain(secret);
    expect((await api.get("/v1/webhooks")).json.data.map((w: Json) => w.id)).toContain(webhookId);

    // Work happens while the receiver is down (connection refused).
    const session = await api.post("/v1/sessions", { persona_id: agent });
    const taskIds: string[] = [];
    for (const input of ["one", "two", "three"]) {
      const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input });
      expect(task.status).toBe(202);
      taskIds.push(task.json.id);
    }
    for (const id of taskIds) {
      await eventually(async () => (await api.get(`/v1/tasks/${id}`)).json.status === "COMPLETED");
    }
    const events = await api.get(`/v1/sessions/${session.json.id}/events?limit=200`);
    const expected = (events.json.data as Json[])
      .filter((e) => e.event.startsWith("task."))
      .map((e) => e.id as string);
    expect(expected.length).toBeGreaterThanOrEqual(taskIds.length * 3);

    // Attempts fail and are rescheduled while it is down.
    await eventually(async () => {
      const list = await api.get(`/v1/webhooks/${webhookId}/deliveries?limit=200`);
      const rows = list.json.data as Json[];
      return (
        rows.length === expected.length &&
        rows.every((d) => d.state === "pending" && d.attempts >= 1 && d.last_error)
      );
    });
    expect(received).toHaveLength(0);

    // Back up: every delivery arrives (after one more 503 each), once accepted.
    await startReceiver();
    await eventually(
      async () => {
        const accepted = received.filter((r) => r.answered === 200);
        return accepted.length >= expected.length;
      },
      { timeoutMs: 30_000 },
    );
    // Give stray duplicates a chance to show up before counting.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(received.every((r) => r.validSignature)).toBe(true);
    const accepted = received.filter((r) => r.answered === 200);
    expect(accepted).toHaveLength(expected.length);
    expect(new Set(accepted.map((r) => r.id)).size).toBe(expected.length);
    expect(accepted.map((r) => r.body.data.id).sort()).toEqual([...expected].sort());
    for (const r of accepted) {
      expect(r.body.type).toBe(r.body.data.event);
      expect(r.body.data.workspace_id).toBe("default");
    }
    // A retry of a delivery keeps its webhook-id (receivers dedupe on it).
    const retried = received.filter((r) => r.answered === 503).map((r) => r.id);
    expect(new Set(retried)).toEqual(new Set(accepted.map((r) => r.id)));

    const deliveries = await api.get(`/v1/webhooks/${webhookId}/deliveries?limit=200`);
    expect(
      deliveries.json.data.every((d: Json) => d.state === "delivered" && d.attempts >= 2),
    ).toBe(true);

    // Deleted: nothing more is sent.
    const deleted = await fetch(`${gatewayUrl}/v1/webhooks/${webhookId}`, {
      method: "DELETE",
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        "harn-agents-protocol-version": "agents-protocol-2026-04-25",
      },
    });
    expect(deleted.status).toBe(200);
    expect((await api.get(`/v1/webhooks/${webhookId}`)).status).toBe(404);
    const before = received.length;
    const late = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "late" });
    await eventually(
      async () => (await api.get(`/v1/tasks/${late.json.id}`)).json.status === "COMPLETED",
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(received.length).toBe(before);
  }, 90_000);
});

describe("webhook URLs that resolve to private addresses (no TRELLIS_WEBHOOKS_ALLOW_PRIVATE)", () => {
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY);
    api = harnClient(trellis.address.url, ADMIN_KEY);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 200 });
  });

  it("refuses loopback, link-local, private and mapped addresses, by literal or by name", async () => {
    for (const url of [
      "http://127.0.0.1:9/hook",
      "http://localhost/hook",
      "http://[::1]/hook",
      "http://169.254.169.254/latest/meta-data",
      "http://10.1.2.3/hook",
      "http://192.168.0.10/hook",
      "http://[::ffff:127.0.0.1]/hook",
      "http://0.0.0.0/hook",
      // Issue 22: the spellings an outside review got through.
      "http://[::127.0.0.1]/hook",
      "http://[::7f00:1]/hook",
      "http://[::ffff:0:7f00:1]/hook",
      "http://[2002:7f00:1::]/hook",
    ]) {
      const response = await api.post("/v1/webhooks", { url });
      expect(response.status, url).toBe(400);
      expect(response.json.error).toMatchObject({ code: "invalid_request", param: "url" });
    }
  });
});

describe("webhook building blocks", () => {
  it("signs like the Standard Webhooks reference vector", () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const body = '{"test": 2432232314}';
    const signature = signWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
    expect(signature).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    const headers = { id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: "1614265330", signature };
    expect(verifyWebhook(secret, headers, body, { now: 1614265330 })).toBe(true);
    expect(verifyWebhook(secret, headers, `${body} `, { now: 1614265330 })).toBe(false);
    expect(verifyWebhook(secret, headers, body, { now: 1614265330 + 3600 })).toBe(false);
  });

  it("classifies addresses", () => {
    for (const a of [
      "127.0.0.1",
      "10.0.0.1",
      "172.20.1.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "64:ff9b::a9fe:a9fe",
      // Issue 22: IPv4-compatible, translated and 6to4 spellings of loopback.
      "::127.0.0.1",
      "::7f00:1",
      "::ffff:0:7f00:1",
      "2002:7f00:1::",
      "2002:a9fe:a9fe::",
      "not-an-ip",
    ]) {
      expect(isBlockedAddress(a), a).toBe(true);
    }
    for (const a of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(isBlockedAddress(a), a).toBe(false);
    }
  });

  it("refuses a private address inside the connection's own lookup (no DNS rebinding)", async () => {
    const outcome = await new Promise<{ error: Error | null; address: unknown }>((resolve) =>
      guardedLookup(false)("localhost", {}, (error, address) => resolve({ error, address })),
    );
    expect(outcome.error?.message).toMatch(/loopback, link-local or private/);
    const allowed = await new Promise<{ error: Error | null; address: unknown }>((resolve) =>
      guardedLookup(true)("localhost", {}, (error, address) => resolve({ error, address })),
    );
    expect(allowed.error).toBeNull();
    expect(isBlockedAddress(String(allowed.address))).toBe(true);
  });

  it("backs off exponentially with jitter, capped", () => {
    const config = loadWebhookConfig({
      TRELLIS_WEBHOOK_RETRY_BASE: "1s",
      TRELLIS_WEBHOOK_RETRY_MAX: "10s",
    });
    expect(retryDelayMs(config, 1, 1)).toBe(1_000);
    expect(retryDelayMs(config, 3, 1)).toBe(4_000);
    expect(retryDelayMs(config, 3, 0)).toBe(2_000);
    expect(retryDelayMs(config, 20, 1)).toBe(10_000);
  });

  it("matches event kinds against subscription patterns", () => {
    expect(matchesEventType(["task.*"], "task.completed")).toBe(true);
    expect(matchesEventType(["task.*"], "taskx.completed")).toBe(false);
    expect(matchesEventType(["session.closed"], "session.created")).toBe(false);
    expect(matchesEventType(["*"], "agent.message")).toBe(true);
  });
});
