// Distributed mode smoke test: the gateway as its own process-like service on
// Postgres + NATS, forwarding REST and gRPC to a tasks service over h2c with
// the caller in the x-trellis-* headers.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService, TaskService } from "@trellis/contracts/tasks";
import { harnClient, poll } from "@trellis/gateway/testing";
import type { RunningService } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";

// Services call each other over the Connect protocol by default; the first
// deployment runs every hop over gRPC instead (TRELLIS_SERVICE_PROTOCOL).
const backends: {
  name: string;
  make: () => typeof tasksService;
  receipts: boolean;
  protocol: Record<string, string>;
}[] = [
  {
    name: "the tasks service alone (receipts not deployed), calls between services over gRPC",
    make: () => tasksService,
    receipts: false,
    protocol: { TRELLIS_SERVICE_PROTOCOL: "grpc" },
  },
  {
    name: "the tasks and receipts services",
    make: () => tasksService,
    receipts: true,
    protocol: {},
  },
];

describe.each(backends)(
  "gateway in distributed mode, over $name",
  ({ make, receipts: withReceipts, protocol }) => {
    let deployment: TestDeployment;
    let gateway: RunningService;

    beforeAll(async () => {
      deployment = await openDeployment("trellis_gw", { prefix: "gw" });
      const tasks = await deployment.start(make(), protocol);
      const receipts = withReceipts
        ? await deployment.start(receiptsService, {
            ...protocol,
            TRELLIS_TASKS_URL: tasks.address.url,
          })
        : undefined;
      gateway = await deployment.start(gatewayService, {
        ...protocol,
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_TASKS_URL: tasks.address.url,
        // Nothing listens here when receipts is not deployed.
        TRELLIS_RECEIPTS_URL: receipts?.address.url ?? "http://127.0.0.1:9",
      });
    }, 60_000);

    afterAll(async () => {
      await deployment?.close();
    });

    it("serves REST + SSE, forwarding the caller to the tasks service", async () => {
      const api = harnClient(gateway.address.url, ADMIN_KEY);
      expect((await api.get("/v1", { key: null, version: null })).status).toBe(200);
      expect((await api.get("/v1/sessions", { key: null })).status).toBe(401);
      const session = await api.post("/v1/sessions", { workspace_id: "default" });
      expect(session.status).toBe(201);
      const stream = await api.stream(`/v1/sessions/${session.json.id}/events/stream`);
      const task = await api.post(
        `/v1/sessions/${session.json.id}/tasks`,
        { input: "over h2c" },
        {
          headers: { "idempotency-key": "dist-1", "x-request-id": "dist-req-1" },
        },
      );
      expect(task.status).toBe(202);
      expect(task.json.created_by).toBe("admin");
      expect(task.headers.get("x-request-id")).toBe("dist-req-1");
      const frames = await stream.until((f) => f.event === "task.completed");
      stream.close();
      expect(frames.at(-1)?.event).toBe("task.completed");
      const done = await poll(async () => {
        const t = await api.get(`/v1/tasks/${task.json.id}`);
        return t.json.status === "COMPLETED" ? t.json : undefined;
      });
      expect(done.id).toBe(task.json.id);
      const replay = await api.post(
        `/v1/sessions/${session.json.id}/tasks`,
        { input: "over h2c" },
        {
          headers: { "idempotency-key": "dist-1" },
        },
      );
      expect(replay.json.id).toBe(task.json.id);
    });

    it("fronts the receipts REST handler over HTTP, or says it is not there", async () => {
      const api = harnClient(gateway.address.url, ADMIN_KEY);
      expect((await api.get("/v1/receipts/public-keys", { key: null })).status).toBe(401);
      const keys = await api.get("/v1/receipts/public-keys");
      expect((await api.get("/v1", { key: null, version: null })).json.capabilities.receipts).toBe(
        withReceipts,
      );
      if (withReceipts) {
        expect(keys.status).toBe(200);
        expect(keys.json.object).toBe("list");
      } else {
        expect(keys.status).toBe(503);
        expect(keys.json.error.code).toBe("service_unavailable");
      }
    });

    it("forwards authenticated gRPC calls (unary and streaming) to the owning service", async () => {
      const transport = createGrpcTransport({ baseUrl: gateway.address.url });
      const sessions = createClient(SessionService, transport);
      const auth = { headers: { authorization: `Bearer ${ADMIN_KEY}` } };
      await expect(sessions.createSession({ workspaceId: "default" })).rejects.toMatchObject({
        code: 16,
      });
      const { session } = await sessions.createSession({ workspaceId: "default" }, auth);
      expect(session?.id).toBeTruthy();
      const { task } = await createClient(TaskService, transport).submitTask(
        {
          sessionId: session!.id,
          input: { role: 2, parts: [{ kind: { case: "text", value: { text: "grpc" } } }] },
        },
        auth,
      );
      expect(task?.createdBy).toBe("admin");
      if (withReceipts) {
        // GetTask / ListTasks carry the receipt id REST shows (issue 22).
        const tasks = createClient(TaskService, transport);
        const receiptId = await poll(
          async () =>
            (await tasks.getTask({ taskId: task!.id }, auth)).task?.receiptId || undefined,
          { what: "the task's receipt id over gRPC" },
        );
        const api = harnClient(gateway.address.url, ADMIN_KEY);
        expect((await api.get(`/v1/tasks/${task!.id}`)).json.receipt_id).toBe(receiptId);
        const listed = await tasks.listTasks({ sessionId: session!.id }, auth);
        expect(listed.tasks.map((t) => t.receiptId)).toEqual([receiptId]);
      }
      // Errors of the owning service keep their code.
      await expect(sessions.getSession({ sessionId: "ses_missing" }, auth)).rejects.toMatchObject({
        code: 5,
      });
    });
  },
);
