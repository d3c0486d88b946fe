// Harn Extended resources through the gateway, in both modes (embedded:
// PGlite + in-process log; distributed: PostgreSQL + JetStream, services in
// their own servers): connectors and their deliveries (one task per provider
// delivery id, even when the same delivery arrives concurrently), branches
// as recorded session forks, and quota reads — workspace-isolated,
// idempotent, with typed errors that store nothing.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { QuotaService } from "@trellis/contracts/gateway";
import { ConnectorService } from "@trellis/contracts/tasks";
import { harnClient, type Json } from "@trellis/gateway/testing";
import { bearer } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";

describe.each(gatewayModes({ name: "extres" }))("extended resources, $mode", ({ start }) => {
  let trellis: Running;
  let admin: ReturnType<typeof harnClient>;
  /** Only `connectors:deliver`, in the default workspace. */
  let deliverer: ReturnType<typeof harnClient>;
  /** Everything on connectors and sessions, in another workspace. */
  let outsider: ReturnType<typeof harnClient>;

  async function key(workspaceId: string, scopes: string[]): Promise<string> {
    const made = await admin.post("/v1/api-keys", {
      name: `ext-${Math.random().toString(36).slice(2, 8)}`,
      workspace_id: workspaceId,
      scopes,
    });
    expect(made.status, made.text).toBe(201);
    return made.json.key;
  }

  async function newConnector(body: Record<string, unknown> = {}): Promise<Json> {
    const made = await admin.post("/v1/connectors", {
      provider: "github",
      event_kinds: ["issues.opened", "push"],
      ...body,
    });
    expect(made.status, made.text).toBe(201);
    return made.json;
  }

  function delivery(deliveryId: string, extra: Record<string, unknown> = {}) {
    return { delivery_id: deliveryId, event_kind: "issues.opened", payload: { n: 1 }, ...extra };
  }

  beforeAll(async () => {
    trellis = await start();
    admin = harnClient(trellis.url, ADMIN_KEY);
    deliverer = harnClient(trellis.url, await key("default", ["connectors:deliver"]));
    outsider = harnClient(
      trellis.url,
      await key("elsewhere", [
        "connectors:read",
        "connectors:write",
        "connectors:deliver",
        "sessions:read",
        "sessions:write",
        "workspaces:read",
      ]),
    );
  }, 90_000);

  afterAll(async () => {
    await trellis?.close();
  });

  describe("connectors", () => {
    it("creates, reads and lists a connector in the Harn shape", async () => {
      const connector = await newConnector({ metadata: { team: "infra" } });
      expect(connector).toMatchObject({
        object: "connector",
        provider: "github",
        workspace_id: "default",
        status: "ACTIVE",
        event_kinds: ["issues.opened", "push"],
        metadata: { team: "infra" },
        target_persona_id: null,
        target_session_id: null,
      });
      expect(connector.id).toMatch(/^conn_/);
      expect(connector.webhook.delivery_path).toBe(`/v1/connectors/${connector.id}/deliveries`);
      const got = await admin.get(`/v1/connectors/${connector.id}`);
      expect(got.status).toBe(200);
      expect(got.json).toEqual(connector);
      const list = await admin.get("/v1/connectors?limit=200");
      expect(list.status).toBe(200);
      expect(list.json.object).toBe("list");
      expect(list.json.data.map((c: Json) => c.id)).toContain(connector.id);
    });

    it("creates once per Idempotency-Key; the key with another body is a conflict", async () => {
      const headers = { "idempotency-key": `conn-${Date.now()}` };
      const body = { provider: "linear", event_kinds: ["issue.created"] };
      const first = await admin.post("/v1/connectors", body, { headers });
      const again = await admin.post("/v1/connectors", body, { headers });
      expect(first.status).toBe(201);
      expect(again.json.id).toBe(first.json.id);
      const other = await admin.post("/v1/connectors", { ...body, provider: "jira" }, { headers });
      expect(other.status).toBe(409);
      expect(other.json.error.code).toBe("idempotency_key_reused");
      const list = await admin.get("/v1/connectors?limit=200");
      expect(list.json.data.filter((c: Json) => c.id === first.json.id)).toHaveLength(1);
      expect(list.json.data.some((c: Json) => c.provider === "jira")).toBe(false);
    });

    it("refuses bad connector fields with a typed 400 and stores nothing", async () => {
      const before = (await admin.get("/v1/connectors?limit=200")).json.data.length;
      const cases: [Record<string, unknown>, string][] = [
        [{ provider: "github", status: "SLEEPING" }, "status"],
        [{ provider: "" }, "provider"],
        [{ provider: "git hub" }, "provider"],
        [{ provider: "github", event_kinds: ["push", "push"] }, "event_kinds"],
        [{ provider: "github", event_kinds: "push" }, "event_kinds"],
        [{ provider: "github", delivery_mode: "message" }, "target_session_id"],
        [{ provider: "github", target_session_id: "ses_missing" }, ""],
      ];
      for (const [body, param] of cases) {
        const response = await admin.post("/v1/connectors", body);
        expect([400, 404], `${JSON.stringify(body)}: ${response.text}`).toContain(response.status);
        if (param) {
          expect(response.json.error.code).toBe("invalid_request");
          expect(response.json.error.param).toBe(param);
        } else {
          expect(response.json.error.code).toBe("resource_not_found");
        }
      }
      expect((await admin.get("/v1/connectors?limit=200")).json.data.length).toBe(before);
    });

    it("makes one task of a delivery sent many times at once, and answers each with it", async () => {
      const connector = await newConnector();
      const path = `/v1/connectors/${connector.id}/deliveries`;
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => deliverer.post(path, delivery("gh-delivery-1"))),
      );
      for (const a of answers) expect([200, 201], a.text).toContain(a.status);
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      const taskIds = new Set(answers.map((a) => a.json.task_id));
      expect(taskIds.size).toBe(1);
      const [taskId] = [...taskIds];
      expect(taskId).toMatch(/^task_/);
      expect(answers.filter((a) => a.json.deduplicated)).toHaveLength(7);
      // A later redelivery: nothing new, the same answer.
      const later = await deliverer.post(path, delivery("gh-delivery-1", { payload: { n: 2 } }));
      expect(later.status).toBe(200);
      expect(later.json).toMatchObject({
        object: "connector_delivery",
        deduplicated: true,
        task_id: taskId,
        state: "SUBMITTED",
        delivery_id: "gh-delivery-1",
        connector_id: connector.id,
      });
      // One task in the delivery's session, made by the connector from the provider's payload.
      const tasks = await admin.get(`/v1/sessions/${later.json.session_id}/tasks`);
      expect(tasks.status).toBe(200);
      expect(tasks.json.data.map((t: Json) => t.id)).toEqual([taskId]);
      const task = (await admin.get(`/v1/tasks/${taskId}`)).json;
      expect(task.metadata).toMatchObject({
        connector_id: connector.id,
        delivery_id: "gh-delivery-1",
        event_kind: "issues.opened",
      });
      // The connector's events: received and normalized once, deduped for every other call.
      const kinds = await connectorEventKinds(connector.id);
      expect(kinds.filter((k) => k === "connector.delivery_received")).toHaveLength(1);
      expect(kinds.filter((k) => k === "connector.normalized")).toHaveLength(1);
      expect(kinds.filter((k) => k === "connector.task_submitted")).toHaveLength(1);
      expect(kinds.filter((k) => k === "connector.delivery_deduped")).toHaveLength(8);
      // Another delivery id is another task.
      const next = await deliverer.post(path, delivery("gh-delivery-2"));
      expect(next.status).toBe(201);
      expect(next.json.task_id).not.toBe(taskId);
    });

    async function connectorEventKinds(connectorId: string): Promise<string[]> {
      // The log is read asynchronously in distributed mode: wait for the last one to arrive.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const kinds: string[] = [];
        let cursor = "";
        do {
          const page = await admin.get(
            `/v1/events?workspace_id=default&limit=200${cursor ? `&cursor=${cursor}` : ""}`,
          );
          expect(page.status, page.text).toBe(200);
          for (const e of page.json.data) {
            if (e.resource.object === "connector" && e.resource.id === connectorId) {
              kinds.push(e.event);
            }
          }
          cursor = page.json.page.next_cursor ?? "";
        } while (cursor);
        if (kinds.includes("connector.task_submitted") || Date.now() > deadline) return kinds;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }

    it("refuses malformed deliveries with a typed 4xx and stores nothing", async () => {
      const connector = await newConnector();
      const path = `/v1/connectors/${connector.id}/deliveries`;
      const big = { blob: "x".repeat(70 * 1024) };
      const cases: [unknown, number, string, string][] = [
        [{ event_kind: "push", payload: {} }, 400, "invalid_request", "delivery_id"],
        [{ delivery_id: "d-bad", payload: {} }, 400, "invalid_request", "event_kind"],
        [delivery("d-bad", { payload: [1, 2] }), 400, "invalid_request", "payload"],
        [delivery("d-bad", { payload: "text" }), 400, "invalid_request", "payload"],
        [delivery("d-bad", { event_kind: "deploy" }), 400, "invalid_request", "event_kind"],
        [
          delivery("d-bad", { delivery_id: "x".repeat(201) }),
          400,
          "invalid_request",
          "delivery_id",
        ],
        [delivery("d-bad", { payload: big }), 413, "payload_too_large", "payload"],
        ["[not json", 400, "invalid_request", ""],
      ];
      for (const [body, status, code, param] of cases) {
        const response = await deliverer.post(path, body);
        expect(response.status, response.text).toBe(status);
        expect(response.json.error.code).toBe(code);
        if (param) expect(response.json.error.param).toBe(param);
      }
      // Nothing was kept of "d-bad": its first valid delivery is new.
      const valid = await deliverer.post(path, delivery("d-bad"));
      expect(valid.status, valid.text).toBe(201);
      expect(valid.json.deduplicated).toBe(false);
    });

    it("pauses and resumes a connector; a paused one takes no deliveries", async () => {
      const connector = await newConnector();
      const path = `/v1/connectors/${connector.id}/deliveries`;
      const before = await deliverer.post(path, delivery("before-pause"));
      expect(before.status).toBe(201);
      const paused = await admin.post(`/v1/connectors/${connector.id}`, {
        status: "PAUSED",
        reason: "maintenance",
      });
      expect(paused.status, paused.text).toBe(200);
      expect(paused.json).toMatchObject({ status: "PAUSED", status_reason: "maintenance" });
      const refused = await deliverer.post(path, delivery("while-paused"));
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe("conflict");
      // What it made before still answers a redelivery.
      const redelivered = await deliverer.post(path, delivery("before-pause"));
      expect(redelivered.status).toBe(200);
      expect(redelivered.json.task_id).toBe(before.json.task_id);
      const bad = await admin.post(`/v1/connectors/${connector.id}`, { status: "ASLEEP" });
      expect(bad.status).toBe(400);
      expect(bad.json.error.param).toBe("status");
      const none = await admin.post(`/v1/connectors/${connector.id}`, {});
      expect(none.status).toBe(400);
      expect((await admin.get(`/v1/connectors/${connector.id}`)).json.status).toBe("PAUSED");
      await admin.post(`/v1/connectors/${connector.id}`, { status: "ACTIVE" });
      expect((await deliverer.post(path, delivery("while-paused"))).status).toBe(201);
    });

    it("turns a delivery into one message of a target session (MESSAGE mode)", async () => {
      const session = await admin.post("/v1/sessions", {});
      expect(session.status).toBe(201);
      const connector = await newConnector({
        delivery_mode: "message",
        target_session_id: session.json.id,
      });
      const path = `/v1/connectors/${connector.id}/deliveries`;
      const answers = await Promise.all(
        [1, 2, 3].map(() => deliverer.post(path, delivery("msg-1", { text: "issue #7 opened" }))),
      );
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      expect(new Set(answers.map((a) => a.json.message_id)).size).toBe(1);
      expect(answers[0]?.json.task_id).toBeNull();
      const messages = await admin.get(`/v1/sessions/${session.json.id}/messages`);
      expect(messages.json.data).toHaveLength(1);
      expect(JSON.stringify(messages.json.data[0])).toContain("issue #7 opened");
    });

    it("keeps connectors inside their workspace (404, never 403)", async () => {
      const connector = await newConnector();
      const read = await outsider.get(`/v1/connectors/${connector.id}`);
      expect(read.status).toBe(404);
      expect(read.json.error.code).toBe("resource_not_found");
      const deliver = await outsider.post(
        `/v1/connectors/${connector.id}/deliveries`,
        delivery("x-ws"),
      );
      expect(deliver.status).toBe(404);
      const update = await outsider.post(`/v1/connectors/${connector.id}`, { status: "DISABLED" });
      expect(update.status).toBe(404);
      expect((await admin.get(`/v1/connectors/${connector.id}`)).json.status).toBe("ACTIVE");
      const own = await outsider.post("/v1/connectors", { provider: "slack" });
      expect(own.status, own.text).toBe(201);
      expect(own.json.workspace_id).toBe("elsewhere");
      const theirs = (await outsider.get("/v1/connectors")).json.data.map((c: Json) => c.id);
      expect(theirs).toEqual([own.json.id]);
      // The admin key acts in every workspace (README "Credentials"): it sees theirs too.
      expect((await admin.get(`/v1/connectors/${own.json.id}`)).json.workspace_id).toBe(
        "elsewhere",
      );
      // The delivery key may deliver, nothing else.
      expect((await deliverer.get("/v1/connectors")).status).toBe(403);
    });

    it("serves the same connectors over gRPC", async () => {
      const connector = await newConnector();
      const client = createClient(
        ConnectorService,
        createGrpcTransport({ baseUrl: trellis.url, interceptors: [bearer(ADMIN_KEY)] }),
      );
      const got = await client.getConnector({ connectorId: connector.id });
      expect(got.connector?.provider).toBe("github");
      const first = await client.deliverConnectorEvent({
        connectorId: connector.id,
        deliveryId: "grpc-1",
        eventKind: "push",
        payload: { ref: "main" },
      });
      const again = await client.deliverConnectorEvent({
        connectorId: connector.id,
        deliveryId: "grpc-1",
        eventKind: "push",
        payload: { ref: "main" },
      });
      expect(first.deduplicated).toBe(false);
      expect(again.deduplicated).toBe(true);
      expect(again.delivery?.taskId).toBe(first.delivery?.taskId);
    });
  });

  // Issue 22, finding 4: ids another workspace could collide with. Connector
  // and branch ids are the server's (newId), so a client naming one that is in
  // use elsewhere neither learns that (no 409) nor is denied: it gets its own.
  it("takes no connector or branch id from the client (ids never collide across workspaces)", async () => {
    const taken = await admin.post("/v1/connectors", { provider: "github", event_kinds: ["push"] });
    expect(taken.status, taken.text).toBe(201);
    const connector = await outsider.post("/v1/connectors", {
      provider: "slack",
      id: taken.json.id,
    });
    expect(connector.status, connector.text).toBe(201);
    expect(connector.json.id).not.toBe(taken.json.id);
    expect(connector.json.workspace_id).toBe("elsewhere");

    const parent = await admin.post("/v1/sessions", {
      initial_messages: [{ role: "user", parts: [{ type: "text", text: "one" }] }],
    });
    const branch = await admin.post(`/v1/sessions/${parent.json.id}/branches`, {
      kind: "session",
      base_ref: "head",
    });
    expect(branch.status, branch.text).toBe(201);
    const theirs = await outsider.post("/v1/sessions", {
      initial_messages: [{ role: "user", parts: [{ type: "text", text: "one" }] }],
    });
    const reused = await outsider.post(`/v1/sessions/${theirs.json.id}/branches`, {
      kind: "session",
      base_ref: "head",
      id: branch.json.id,
    });
    expect(reused.status, reused.text).toBe(201);
    expect(reused.json.id).not.toBe(branch.json.id);
    expect((await admin.get(`/v1/branches/${branch.json.id}`)).json.parent_session_id).toBe(
      parent.json.id,
    );
  });

  describe("branches", () => {
    async function sessionWithHistory(): Promise<Json> {
      const made = await admin.post("/v1/sessions", {
        initial_messages: [
          { role: "user", parts: [{ type: "text", text: "one" }] },
          { role: "assistant", parts: [{ type: "text", text: "two" }] },
          { role: "user", parts: [{ type: "text", text: "three" }] },
        ],
      });
      expect(made.status, made.text).toBe(201);
      return made.json;
    }

    it("creates a branch by forking the session, and reads and lists it", async () => {
      const parent = await sessionWithHistory();
      const messages = (await admin.get(`/v1/sessions/${parent.id}/messages`)).json.data;
      const second = messages[1].id;
      const made = await admin.post(`/v1/sessions/${parent.id}/branches`, {
        kind: "session",
        base_ref: second,
        metadata: { why: "try another answer" },
      });
      expect(made.status, made.text).toBe(201);
      const branch = made.json;
      expect(branch).toMatchObject({
        object: "branch",
        workspace_id: "default",
        kind: "session",
        base_ref: second,
        parent_session_id: parent.id,
        metadata: { why: "try another answer" },
        fork: { message_id: second, message_count: 2 },
      });
      expect(branch.id).toMatch(/^br_/);
      // The branch's session is the fork: it names the branch and starts with two messages.
      const child = (await admin.get(`/v1/sessions/${branch.session_id}`)).json;
      expect(child).toMatchObject({ parent_session_id: parent.id, branch_id: branch.id });
      expect(child.transcript.message_count).toBe(2);
      expect((await admin.get(`/v1/branches/${branch.id}`)).json).toEqual(branch);
      const list = await admin.get(`/v1/sessions/${parent.id}/branches`);
      expect(list.status).toBe(200);
      expect(list.json.data.map((b: Json) => b.id)).toEqual([branch.id]);
      // origin and head forks.
      const origin = await admin.post(`/v1/sessions/${parent.id}/branches`, {
        kind: "session",
        base_ref: "origin",
      });
      expect(origin.json.fork.message_count).toBe(0);
      const head = await admin.post(`/v1/sessions/${parent.id}/branches`, {
        kind: "session",
        base_ref: "head",
      });
      expect(head.json.fork.message_count).toBe(3);
      // At an event: the transcript as it was when the assistant's message was appended.
      let answered: Json;
      for (let i = 0; i < 100 && !answered; i++) {
        const events = await admin.get(`/v1/sessions/${parent.id}/events?limit=200`);
        answered = events.json.data.find((e: Json) => e.event === "agent.message");
        if (!answered) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const atEvent = await admin.post(`/v1/sessions/${parent.id}/branches`, {
        kind: "session",
        base_ref: answered.id,
      });
      expect(atEvent.status, atEvent.text).toBe(201);
      expect(atEvent.json.fork).toMatchObject({ event_id: answered.id, message_count: 2 });
      // A branch of the branch's session descends from it.
      const nested = await admin.post(`/v1/sessions/${branch.session_id}/branches`, {
        kind: "session",
        base_ref: "head",
      });
      expect(nested.json.parent_branch_id).toBe(branch.id);
    });

    it("creates once per Idempotency-Key", async () => {
      const parent = await sessionWithHistory();
      const headers = { "idempotency-key": `br-${Date.now()}` };
      const body = { kind: "session", base_ref: "head" };
      const [a, b] = await Promise.all([
        admin.post(`/v1/sessions/${parent.id}/branches`, body, { headers }),
        admin.post(`/v1/sessions/${parent.id}/branches`, body, { headers }),
      ]);
      expect(a.status, a.text).toBe(201);
      expect(b.json.id).toBe(a.json.id);
      const list = await admin.get(`/v1/sessions/${parent.id}/branches`);
      expect(list.json.data).toHaveLength(1);
      const other = await admin.post(
        `/v1/sessions/${parent.id}/branches`,
        { kind: "session", base_ref: "origin" },
        { headers },
      );
      expect(other.status).toBe(409);
    });

    it("refuses bad branches with a typed 4xx and forks nothing", async () => {
      const parent = await sessionWithHistory();
      const cases: [unknown, number, string][] = [
        [{ base_ref: "head" }, 400, "kind"],
        [{ kind: "session" }, 400, "base_ref"],
        [{ kind: "galaxy", base_ref: "head" }, 400, "kind"],
        [{ kind: "sandbox", base_ref: "head" }, 400, "kind"],
        [{ kind: "session", base_ref: "msg_not_there" }, 400, "base_ref"],
        [{ kind: "session", base_ref: "evt_not_there" }, 400, "base_ref"],
        [{ kind: "session", base_ref: "head", parent_branch_id: "br_nope" }, 404, ""],
      ];
      for (const [body, status, param] of cases) {
        const response = await admin.post(`/v1/sessions/${parent.id}/branches`, body);
        expect(response.status, `${JSON.stringify(body)}: ${response.text}`).toBe(status);
        if (param) expect(response.json.error.param).toBe(param);
      }
      expect((await admin.get(`/v1/sessions/${parent.id}/branches`)).json.data).toEqual([]);
    });

    it("keeps branches inside their workspace", async () => {
      const parent = await sessionWithHistory();
      const branch = (
        await admin.post(`/v1/sessions/${parent.id}/branches`, {
          kind: "session",
          base_ref: "head",
        })
      ).json;
      expect((await outsider.get(`/v1/branches/${branch.id}`)).status).toBe(404);
      expect((await outsider.get(`/v1/sessions/${parent.id}/branches`)).status).toBe(404);
      const fork = await outsider.post(`/v1/sessions/${parent.id}/branches`, {
        kind: "session",
        base_ref: "head",
      });
      expect(fork.status).toBe(404);
      expect(fork.json.error.code).toBe("resource_not_found");
    });
  });

  describe("quotas", () => {
    it("reads the quotas that apply to the caller, with usage, over REST and gRPC", async () => {
      const list = await admin.get("/v1/quotas");
      expect(list.status).toBe(200);
      const ids = list.json.data.map((q: Json) => q.id);
      expect(ids).toContain("quota_tasks_per_day_default");
      const daily = list.json.data.find((q: Json) => q.id === "quota_tasks_per_day_default");
      expect(daily).toMatchObject({
        object: "quota",
        scope: "workspace",
        hard_limit: true,
        metadata: { applies_to: "workspace" },
      });
      expect(typeof daily.created_at).toBe("string");
      expect(typeof daily.updated_at).toBe("string");
      // Tasks made above count.
      expect(daily.usage.tasks_per_day).toBeGreaterThanOrEqual(0);
      const own = list.json.data.filter((q: Json) => q.metadata.applies_to === "actor");
      expect(own.map((q: Json) => Object.keys(q.limits)[0]).sort()).toEqual([
        "reads_per_60s",
        "writes_per_60s",
      ]);
      for (const q of own) expect(Object.values(q.usage)[0]).toBeGreaterThan(0);
      const one = await admin.get(`/v1/quotas/${daily.id}`);
      expect(one.status).toBe(200);
      expect(one.json.limits).toEqual(daily.limits);
      expect((await outsider.get(`/v1/quotas/${daily.id}`)).status).toBe(404);

      const client = createClient(
        QuotaService,
        createGrpcTransport({ baseUrl: trellis.url, interceptors: [bearer(ADMIN_KEY)] }),
      );
      const rpc = await client.listQuotas({});
      expect(rpc.quotas.map((q) => q.id).sort()).toEqual([...ids].sort());
      const got = await client.getQuota({ quotaId: daily.id });
      expect(got.quota).toMatchObject({ name: "tasks_per_day", hardLimit: true });
    });
  });
});
