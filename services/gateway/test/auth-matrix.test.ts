// The authorization matrix: every REST route × {no credentials, a credential
// of another workspace, a credential missing the route's scope, a revoked
// key, an expired token, the right credential} → the expected status. Another
// workspace's sessions, tasks, events, receipts, artifacts (and everything
// else named by id or asked for by workspace) are 404 resource_not_found,
// never 403, and a 200 for another workspace shows none of its data.
// The rule of each route is its own declaration (`scope`, the one table).
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { adaptersService } from "@trellis/adapters";
import {
  AgentService,
  BranchKind,
  BranchService,
  ConnectorService,
  SessionService,
  SignalService,
  TaskService,
} from "@trellis/contracts/tasks";
import {
  harnClient,
  type Json,
  poll,
  TestIdentityProvider,
  VERSION,
} from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger, errorDetailOf } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { bearer } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Rule } from "../src/auth/scope-table.js";
import { gatewayService } from "../src/definition.js";
import { implies, scopeNames } from "../src/domain/scopes.js";
import { restRoutes } from "../src/http/routes/index.js";
import type { PostgresKeyStore } from "../src/store/key-store.js";
import {
  type Column,
  columns,
  type MatrixFixtures,
  matrixRows,
  type Req,
  type Row,
  userMessage,
  webhookBody,
} from "./support/auth-matrix/rows.js";
import { gatewayKeyStore } from "./support/embedded.js";
import { replyGraph, waitGraph } from "./support/ui-fixtures.js";
import { openWs } from "./support/ws-client.js";

const ADMIN_KEY = "trellis-matrix-admin-key-0123456789";
const OTHER = "w_other_matrix";

/** A credential refused an agent it is not allowed: 403 permission_denied. */
function deniedWith(response: { status: number; json: Json }): void {
  expect({ status: response.status, code: response.json?.error?.code }).toEqual({
    status: 403,
    code: "permission_denied",
  });
}

describe("authorization matrix (every REST route)", () => {
  let trellis: EmbeddedTrellis;
  let idp: TestIdentityProvider;
  let base: string;
  let admin: ReturnType<typeof harnClient>;
  let keys: PostgresKeyStore;
  const scopeKeys = new Map<string, string>();
  let fx: MatrixFixtures;
  const credentials = {} as Record<Exclude<Column, "right" | "none">, string>;

  async function keyWith(workspaceId: string, scopes: string[]): Promise<string> {
    const created = await keys.create({ name: "matrix", actorId: "matrix", workspaceId, scopes });
    return created.key;
  }

  /** A new API key holding `scopes`, restricted to the persona `fx.personaId` (created: 201). */
  async function personaKey(name: string, scopes: string[]) {
    const made = await admin.post("/v1/api-keys", { name, scopes, agent_ids: [fx.personaId] });
    expect(made.status).toBe(201);
    return made;
  }

  async function newSession(personaId?: string): Promise<string> {
    const response = await admin.post("/v1/sessions", {
      workspace_id: "default",
      ...(personaId ? { persona_id: personaId } : {}),
    });
    if (response.status !== 201) throw new Error(`session: ${response.status} ${response.text}`);
    return response.json.id;
  }

  async function waitTask(taskId: string, status: string): Promise<Json> {
    return poll(
      async () => {
        const task = await admin.get(`/v1/tasks/${taskId}`);
        return task.json.status === status ? task.json : undefined;
      },
      { timeoutMs: 20_000, what: `task ${taskId} ${status}` },
    );
  }

  /** A task suspended for input (for cancel and task messages). */
  async function waitingTask(): Promise<string> {
    const sessionId = await newSession(fx.waiterId);
    const task = await admin.post(`/v1/sessions/${sessionId}/tasks`, { input: "ask me" });
    await waitTask(task.json.id, "INPUT_REQUIRED");
    return task.json.id;
  }

  const rows = matrixRows({
    get fx() {
      return fx;
    },
    get admin() {
      return admin;
    },
    newSession,
    waitingTask,
  });

  beforeAll(async () => {
    idp = await TestIdentityProvider.start();
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, receiptsService, adaptersService],
      port: 0,
      logger: createLogger({ service: "test", level: "error" }),
      env: {
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_LOG_LEVEL: "error",
        TRELLIS_SSE_HEARTBEAT: "1s",
        TRELLIS_OAUTH_EXTERNAL_ISSUER: idp.issuer,
        TRELLIS_OAUTH_EXTERNAL_JWKS_URL: idp.jwksUrl,
        // Hundreds of refused credentials from one address on purpose: the
        // throttle (auth-throttle.test.ts) would answer them 429.
        TRELLIS_AUTH_FAILURES_PER_SOURCE: "0",
      },
    });
    base = trellis.address.url;
    admin = harnClient(base, ADMIN_KEY);
    keys = gatewayKeyStore(trellis);

    const persona = await admin.post("/v1/personas", {
      name: "replier",
      entry_workflow: "scripted",
      definition: replyGraph,
    });
    const waiter = await admin.post("/v1/personas", {
      name: "waiter",
      entry_workflow: "scripted",
      definition: waitGraph,
    });
    const sessionId = await newSession();
    const task = await admin.post(`/v1/sessions/${sessionId}/tasks`, { input: "hello" });
    await waitTask(task.json.id, "COMPLETED");
    const receipts = await poll(
      async () => {
        const r = await admin.get(`/v1/tasks/${task.json.id}/receipts`);
        return r.status === 200 && r.json.data.length > 0 ? r.json.data : undefined;
      },
      { timeoutMs: 20_000, what: "a receipt" },
    );
    const receiptDocument = await fetch(`${base}/v1/receipts/${receipts[0].id}`, {
      headers: {
        authorization: `Bearer ${ADMIN_KEY}`,
        "harn-agents-protocol-version": VERSION,
        accept: "application/vnd.harn.receipt+json",
      },
    }).then((r) => r.json());
    const events = await admin.get(`/v1/tasks/${task.json.id}/events`);
    const messages = await admin.get(`/v1/sessions/${sessionId}/messages`);
    const artifact = await admin.post("/v1/artifacts", {
      workspace_id: "default",
      kind: "file",
      name: "fixture.txt",
      content: "fixture",
    });
    const outcomes = await admin.get(`/v1/outcomes?task_id=${task.json.id}`);
    const key = await admin.post("/v1/api-keys", { name: "fixture", scopes: ["sessions:read"] });
    const client = await admin.post("/v1/oauth-clients", {
      name: "fixture",
      scopes: ["sessions:read"],
    });
    fx = {
      sessionId,
      taskId: task.json.id,
      eventId: events.json.data[0].id,
      messageId: messages.json.data[0].id,
      artifactId: artifact.json.id,
      outcomeId: outcomes.json.data[0].id,
      receiptId: receipts[0].id,
      receiptDocument,
      personaId: persona.json.id,
      waiterId: waiter.json.id,
      keyId: key.json.id,
      clientId: client.json.id,
      quotaId: (await admin.get("/v1/quotas")).json?.data?.[0]?.id,
      webhookId: (await admin.post("/v1/webhooks", webhookBody)).json.id,
      vaultId: (
        await admin.post("/v1/vaults", {
          workspace_id: "default",
          provider: "trellis",
          capabilities: ["read", "write"],
        })
      ).json.id,
      branchId: (
        await admin.post(`/v1/sessions/${sessionId}/branches`, {
          kind: "session",
          base_ref: "head",
        })
      ).json.id,
      connectorId: (
        await admin.post("/v1/connectors", { provider: "github", workspace_id: "default" })
      ).json.id,
      memoryId: (
        await admin.post("/v1/memories", {
          workspace_id: "default",
          scope: "workspace",
          content: "matrix memory",
          provenance: {},
        })
      ).json.id,
    };
    for (const [name, value] of Object.entries(fx))
      if (name !== "quotaId") expect(value).toBeTruthy();

    credentials.wrongWorkspace = await keyWith(OTHER, [...scopeNames]);
    const revoked = await keys.create({
      name: "revoked",
      actorId: "revoked",
      workspaceId: "default",
      scopes: ["*"],
    });
    await keys.revoke(revoked.record.id);
    credentials.revokedKey = revoked.key;
    credentials.expiredToken = await idp.token(
      { sub: "svc", aud: "trellis", workspace: "default", scope: scopeNames.join(" ") },
      { expiresInSec: -600 },
    );
  }, 120_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await idp?.close();
  });

  /** The credential of a column for a route with `rule`. */
  async function credentialFor(column: Column, rule: Rule | undefined): Promise<string | null> {
    switch (column) {
      case "none":
        return null;
      case "right": {
        if (rule === "admin" || rule === "public" || rule === undefined) return ADMIN_KEY;
        let key = scopeKeys.get(rule);
        if (key === undefined) {
          key = await keyWith("default", [rule]);
          scopeKeys.set(rule, key);
        }
        return key;
      }
      case "missingScope": {
        const cacheKey = `without ${rule}`;
        let key = scopeKeys.get(cacheKey);
        if (key === undefined) {
          // Every scope but the route's and those that imply it (keys:admin → webhooks:*).
          key = await keyWith(
            "default",
            scopeNames.filter((s) => rule === undefined || !isScopeRule(rule) || !implies(s, rule)),
          );
          scopeKeys.set(cacheKey, key);
        }
        return key;
      }
      default:
        return credentials[column];
    }
  }

  function expected(column: Column, rule: Rule | undefined, row: Row): number {
    if (rule === "public") return typeof row.right === "function" ? row.right() : row.right;
    switch (column) {
      case "none":
      case "revokedKey":
      case "expiredToken":
        return 401;
      case "missingScope":
        return 403;
      case "wrongWorkspace":
        return row.wrongWorkspace ?? 404;
      case "right":
        return typeof row.right === "function" ? row.right() : row.right;
    }
  }

  async function send(method: string, req: Req, key: string | null) {
    const headers: Record<string, string> = { "harn-agents-protocol-version": VERSION };
    if (key !== null) headers.authorization = `Bearer ${key}`;
    if (req.body !== undefined) headers["content-type"] = "application/json";
    const abort = new AbortController();
    const response = await fetch(`${base}${req.path}`, {
      method,
      headers,
      signal: abort.signal,
      ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }),
    });
    // A stream that opened is enough: its status is what the matrix is about.
    if (req.stream && response.status === 200) {
      abort.abort();
      return { status: response.status, text: "", type: response.headers.get("content-type") };
    }
    return {
      status: response.status,
      text: await response.text(),
      type: response.headers.get("content-type"),
    };
  }

  it("has a row for every route", () => {
    const routes = restRoutes.map((r) => `${r.method} ${r.path}`).sort();
    expect(Object.keys(rows).sort()).toEqual(routes);
  });

  it("gives every route × credential its expected status, with the error envelope", async () => {
    const outcomes: string[] = [];
    const failures: string[] = [];
    for (const route of restRoutes) {
      const name = `${route.method} ${route.path}`;
      const row = rows[name];
      if (row === undefined) continue; // reported by the test above
      const rule = route.scope;
      for (const column of columns) {
        const req = await row.req();
        const key = await credentialFor(column, rule);
        const response = await send(route.method, req, key);
        const want = expected(column, rule, row);
        outcomes.push(`${name} ${column} ${response.status}`);
        if (response.status !== want) {
          failures.push(
            `${name} [${column}] → ${response.status}, expected ${want}: ${response.text.slice(0, 200)}`,
          );
          continue;
        }
        if (want >= 400) {
          const body = JSON.parse(response.text);
          const code = {
            400: "invalid_request",
            401: "unauthenticated",
            403: "permission_denied",
            404: "resource_not_found",
          }[want];
          if (body?.error?.code !== code)
            failures.push(`${name} [${column}] code ${body?.error?.code}`);
          // Nothing about the credential or the hidden resource leaks.
          if (key !== null && response.text.includes(key))
            failures.push(`${name} [${column}] echoes the credential`);
        }
        if (column === "wrongWorkspace" && want < 400 && rule !== "public" && !row.echoes) {
          for (const id of [fx.sessionId, fx.taskId, fx.eventId, fx.artifactId, fx.receiptId]) {
            if (response.text.includes(id)) failures.push(`${name} [${column}] shows ${id}`);
          }
        }
      }
    }
    expect(failures).toEqual([]);
    expect(outcomes.length).toBe(restRoutes.length * columns.length);
  }, 300_000);

  it("lets keys:admin (what webhooks needed before webhooks:*) keep using them, and webhooks:read only read", async () => {
    const legacy = harnClient(base, await keyWith("default", ["keys:admin"]));
    expect((await legacy.get("/v1/webhooks")).status).toBe(200);
    const made = await legacy.post("/v1/webhooks", webhookBody);
    expect(made.status).toBe(201);
    const reader = harnClient(base, await keyWith("default", ["webhooks:read"]));
    expect((await reader.get(`/v1/webhooks/${made.json.id}`)).status).toBe(200);
    const denied = await reader.request("DELETE", `/v1/webhooks/${made.json.id}`);
    expect(denied.status).toBe(403);
    expect(denied.json.error.code).toBe("permission_denied");
    const writer = harnClient(base, await keyWith("default", ["webhooks:write"]));
    expect((await writer.get("/v1/webhooks")).status).toBe(403);
    expect((await writer.request("DELETE", `/v1/webhooks/${made.json.id}`)).status).toBe(200);
  });

  it("restricts a credential to its agents (agent policy) on REST, WebSocket and gRPC", async () => {
    const scopes = [
      "agents:read",
      "sessions:write",
      "sessions:read",
      "tasks:write",
      "events:read",
      "signals:write",
    ];
    const made = await personaKey("one agent", scopes);
    expect(made.json.agent_ids).toEqual([fx.personaId]);
    expect((await admin.get(`/v1/api-keys/${made.json.id}`)).json.agent_ids).toEqual([
      fx.personaId,
    ]);
    const restricted = harnClient(base, made.json.key);

    // REST: the allowed agent works; any other, named or bound to the session, is refused.
    expect((await restricted.get(`/v1/personas/${fx.personaId}`)).status).toBe(200);
    deniedWith(await restricted.get(`/v1/personas/${fx.waiterId}`));
    // The same answer for an agent that does not exist: nothing about existence leaks.
    deniedWith(await restricted.get("/v1/personas/agent_never_existed"));
    const own = await restricted.post("/v1/sessions", { persona_id: fx.personaId });
    expect(own.status).toBe(201);
    deniedWith(await restricted.post("/v1/sessions", { persona_id: fx.waiterId }));
    deniedWith(await restricted.post("/v1/sessions", {}));
    const task = await restricted.post(`/v1/sessions/${own.json.id}/tasks`, { input: "hi" });
    expect(task.status).toBe(202);
    deniedWith(
      await restricted.post(`/v1/sessions/${own.json.id}/tasks`, {
        input: "hi",
        persona_id: fx.waiterId,
      }),
    );
    const foreign = await newSession(fx.waiterId);
    deniedWith(await restricted.post(`/v1/sessions/${foreign}/tasks`, { input: "hi" }));
    deniedWith(await restricted.post("/v1/tasks", { session_id: foreign, input: "hi" }));
    const waiting = await waitingTask();
    deniedWith(
      await restricted.post(`/v1/tasks/${waiting}/messages`, {
        kind: "input",
        message: userMessage,
      }),
    );

    // Listing agents shows only the credential's own; a replay runs the
    // source task's agent again.
    const listed = await restricted.get("/v1/personas");
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((p: { id: string }) => p.id)).toEqual([fx.personaId]);
    deniedWith(await restricted.post(`/v1/tasks/${waiting}/replay`, { mode: "exact" }));

    // A restricted creator cannot mint a wider credential.
    const keyAdmin = await admin.post("/v1/api-keys", {
      name: "restricted admin",
      scopes: ["keys:admin"],
      agent_ids: [fx.personaId],
    });
    const minter = harnClient(base, keyAdmin.json.key);
    const inherited = await minter.post("/v1/api-keys", { name: "x", scopes: ["keys:admin"] });
    expect(inherited.status).toBe(201);
    expect(inherited.json.agent_ids).toEqual([fx.personaId]);
    deniedWith(
      await minter.post("/v1/api-keys", {
        name: "y",
        scopes: ["keys:admin"],
        agent_ids: [fx.waiterId],
      }),
    );
    expect((await admin.post("/v1/api-keys", { name: "z", scopes, agent_ids: [] })).status).toBe(
      400,
    );

    // WebSocket: a command frame runs the REST route, with the same check.
    const socket = await openWs(`${base}/v1/sessions/${foreign}/ws`, made.json.key);
    try {
      await socket.until((f) => f.type === "replay_complete");
      socket.send({ type: "message", id: "w1", input: "hi" });
      const [answer] = (await socket.until((f) => f.id === "w1")).slice(-1);
      expect(answer).toMatchObject({ type: "error", status: 403 });
    } finally {
      await socket.close();
    }

    // gRPC on the public port.
    const transport = createGrpcTransport({
      baseUrl: base,
      interceptors: [bearer(made.json.key)],
    });
    const agents = createClient(AgentService, transport);
    const sessions = createClient(SessionService, transport);
    const tasks = createClient(TaskService, transport);
    expect((await agents.getAgent({ agentId: fx.personaId })).agent?.id).toBe(fx.personaId);
    expect((await agents.listAgents({})).agents.map((a) => a.id)).toEqual([fx.personaId]);
    const adminTasks = createClient(
      TaskService,
      createGrpcTransport({
        baseUrl: base,
        interceptors: [bearer(ADMIN_KEY)],
      }),
    );
    const suspended = async () => (await adminTasks.getTask({ taskId: waiting })).task;
    const signalId = (await suspended())?.suspension?.signalId ?? "";
    expect(signalId).not.toBe("");
    const refusals = await Promise.all([
      agents.getAgent({ agentId: fx.waiterId }).catch((e: unknown) => e),
      sessions.createSession({ agentId: fx.waiterId }).catch((e: unknown) => e),
      tasks
        .submitTask({ sessionId: foreign, input: { role: 1, parts: [] } })
        .catch((e: unknown) => e),
      tasks.replayTask({ taskId: waiting }).catch((e: unknown) => e),
      createClient(SignalService, transport)
        .deliver({ signalId, payload: { kind: { case: "stringValue", value: "go" } } })
        .catch((e: unknown) => e),
    ]);
    for (const refusal of refusals) {
      expect(ConnectError.from(refusal).code).toBe(Code.PermissionDenied);
      expect(errorDetailOf(ConnectError.from(refusal))?.reason).toBe("permission_denied");
    }
    // The refused signal resumed nothing.
    expect((await suspended())?.suspension?.signalId).toBe(signalId);
    const allowed = await sessions.createSession({ agentId: fx.personaId });
    expect(allowed.session?.agentId).toBe(fx.personaId);
  });

  it("holds a restricted credential to its agents when it forks, branches or wires a connector", async () => {
    const scopes = [
      "sessions:write",
      "sessions:read",
      "tasks:write",
      "connectors:write",
      "connectors:read",
      "connectors:deliver",
    ];
    const made = await personaKey("fork guard", scopes);
    const restricted = harnClient(base, made.json.key);
    const own = await newSession(fx.personaId);
    const foreign = await newSession(fx.waiterId);

    // REST: a fork or a branch of a session of another agent runs that agent.
    expect((await restricted.post(`/v1/sessions/${own}/fork`, {})).status).toBe(201);
    deniedWith(await restricted.post(`/v1/sessions/${foreign}/fork`, {}));
    const branch = { kind: "session", base_ref: "head" };
    expect((await restricted.post(`/v1/sessions/${own}/branches`, branch)).status).toBe(201);
    deniedWith(await restricted.post(`/v1/sessions/${foreign}/branches`, branch));
    // A connector's deliveries run its target persona or its target session's agent.
    const connector = (body: Record<string, unknown>) =>
      restricted.post("/v1/connectors", { provider: "github", workspace_id: "default", ...body });
    expect((await connector({ target_persona_id: fx.personaId })).status).toBe(201);
    deniedWith(await connector({ target_persona_id: fx.waiterId }));
    deniedWith(await connector({ target_session_id: foreign }));
    deniedWith(await connector({}));
    const wide = await admin.post("/v1/connectors", {
      provider: "github",
      workspace_id: "default",
      target_persona_id: fx.waiterId,
    });
    expect(wide.status).toBe(201);
    deniedWith(
      await restricted.post(`/v1/connectors/${wide.json.id}/deliveries`, {
        delivery_id: "fork-guard-1",
        event_kind: "push",
        payload: {},
      }),
    );

    // gRPC on the public port: the same rules.
    const transport = createGrpcTransport({
      baseUrl: base,
      interceptors: [bearer(made.json.key)],
    });
    const sessions = createClient(SessionService, transport);
    const forked = await sessions.forkSession({ sessionId: own });
    expect(forked.session?.agentId).toBe(fx.personaId);
    const refusals = await Promise.all([
      sessions.forkSession({ sessionId: foreign }).catch((e: unknown) => e),
      createClient(BranchService, transport)
        .createBranch({ sessionId: foreign, kind: BranchKind.SESSION, baseRef: "head" })
        .catch((e: unknown) => e),
      createClient(ConnectorService, transport)
        .createConnector({
          workspaceId: "default",
          provider: "github",
          targetPersonaId: fx.waiterId,
        })
        .catch((e: unknown) => e),
      createClient(ConnectorService, transport)
        .deliverConnectorEvent({
          connectorId: wide.json.id,
          deliveryId: "fork-guard-2",
          eventKind: "push",
        })
        .catch((e: unknown) => e),
    ]);
    for (const refusal of refusals) {
      expect(ConnectError.from(refusal).code).toBe(Code.PermissionDenied);
    }
    // Nothing was made for the refused calls.
    const branches = await admin.get(`/v1/sessions/${foreign}/branches`);
    expect(branches.json.data).toEqual([]);
  });

  it("answers cross-workspace reads of sessions, tasks, events, receipts and artifacts with 404, never 403", async () => {
    const outsider = harnClient(base, credentials.wrongWorkspace);
    for (const path of [
      `/v1/sessions/${fx.sessionId}`,
      `/v1/tasks/${fx.taskId}`,
      `/v1/events/${fx.eventId}`,
      `/v1/sessions/${fx.sessionId}/events`,
      `/v1/tasks/${fx.taskId}/events`,
      `/v1/receipts/${fx.receiptId}`,
      `/v1/tasks/${fx.taskId}/receipts`,
      `/v1/artifacts/${fx.artifactId}`,
      `/v1/artifacts/${fx.artifactId}/content`,
      "/v1/sessions?workspace_id=default",
      "/v1/artifacts?workspace_id=default",
    ]) {
      const response = await outsider.get(path);
      expect({ path, status: response.status }).toEqual({ path, status: 404 });
      expect(response.json.error.code).toBe("resource_not_found");
    }
    // The same ids that never existed look exactly alike.
    const real = await outsider.get(`/v1/sessions/${fx.sessionId}`);
    const fake = await outsider.get("/v1/sessions/ses_never_existed");
    expect(real.status).toBe(fake.status);
    expect(real.json.error.type).toBe(fake.json.error.type);
  });
});

function isScopeRule(
  rule: Rule,
): rule is Exclude<Rule, "admin" | "authenticated" | "public" | "internal"> {
  return rule !== "admin" && rule !== "authenticated" && rule !== "public" && rule !== "internal";
}
