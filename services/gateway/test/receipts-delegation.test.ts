// Receipt routes belong to the receipts service's own REST handler; the
// gateway puts its version, key and scope checks in front of them and tells
// the handler who is calling (never the client itself).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { TaskService } from "@trellis/contracts/tasks";
import { harnClient, poll } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { bearer } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayKeyStore } from "./support/embedded.js";

describe("receipt routes behind the gateway (embedded)", () => {
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, receiptsService],
      port: 0,
      env: { TRELLIS_API_KEY: ADMIN_KEY, TRELLIS_LOG_LEVEL: "error" },
      logger: createLogger({ service: "test", level: "error" }),
    });
    api = harnClient(trellis.address.url, ADMIN_KEY);
  });
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("checks version and key first, and says so truthfully in discovery", async () => {
    expect((await api.get("/v1/receipts/public-keys", { version: null })).status).toBe(426);
    const spoofed = await api.get("/v1/receipts/public-keys", {
      key: null,
      headers: { "x-trellis-actor": "admin", "x-trellis-workspace": "default" },
    });
    expect(spoofed.status).toBe(401);
    expect((await api.get("/v1/receipts/public-keys")).status).toBe(200);
    expect((await api.get("/v1", { key: null, version: null })).json.capabilities.receipts).toBe(
      true,
    );
  });

  it("serves a task's receipts to its workspace only", async () => {
    const session = await api.post("/v1/sessions", { workspace_id: "default" });
    const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "receipt me" });
    await poll(async () => {
      const t = await api.get(`/v1/tasks/${task.json.id}`);
      return t.json.status === "COMPLETED" ? true : undefined;
    });
    const receipts = await poll(async () => {
      const r = await api.get(`/v1/tasks/${task.json.id}/receipts`);
      return r.status === 200 && r.json.data.length > 0 ? r.json : undefined;
    });
    expect(receipts.object).toBe("list");
    const outsider = await gatewayKeyStore(trellis).create({
      name: "outsider",
      actorId: "outsider",
      workspaceId: "elsewhere",
      scopes: ["receipts:read"],
    });
    // The client's own x-trellis-* headers are replaced by the key's identity.
    const asOutsider = harnClient(trellis.address.url, outsider.key);
    const hidden = await asOutsider.get(`/v1/receipts/${receipts.data[0].id}`, {
      headers: { "x-trellis-actor": "admin", "x-trellis-workspace": "default" },
    });
    expect(hidden.status).toBe(404);
  });
  it("gives a finished task the same receipt_id over gRPC as over REST (issue 22)", async () => {
    const session = await api.post("/v1/sessions", { workspace_id: "default" });
    const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "receipt me" });
    const rest = await poll(async () => {
      const t = await api.get(`/v1/tasks/${task.json.id}`);
      return t.json.status === "COMPLETED" && t.json.receipt_id ? t.json : undefined;
    });
    expect(rest.receipt_id).toMatch(/^rcpt_/);
    const tasks = createClient(
      TaskService,
      createGrpcTransport({
        baseUrl: trellis.address.url,
        interceptors: [bearer(ADMIN_KEY)],
      }),
    );
    const got = await tasks.getTask({ taskId: task.json.id });
    expect(got.task?.receiptId).toBe(rest.receipt_id);
    const listed = await tasks.listTasks({ sessionId: session.json.id });
    expect(listed.tasks.map((t) => [t.id, t.receiptId])).toEqual([[task.json.id, rest.receipt_id]]);
  });
});
