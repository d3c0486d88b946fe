/**
 * The authorization matrix's rows: one per REST route, with the request to
 * send and the status each credential column expects (auth-matrix.test.ts).
 */
import type { harnClient, Json } from "@trellis/gateway/testing";
import { replyGraph } from "../ui-fixtures.js";

export type Column =
  | "none"
  | "wrongWorkspace"
  | "missingScope"
  | "revokedKey"
  | "expiredToken"
  | "right";
export const columns: readonly Column[] = [
  "none",
  "wrongWorkspace",
  "missingScope",
  "revokedKey",
  "expiredToken",
  "right",
];

/** A concrete request for a route. */
export interface Req {
  path: string;
  body?: unknown;
  stream?: boolean;
}

/** One row of the matrix. */
export interface Row {
  /** The request (built afresh for every column: writes get their own resources). */
  req(): Promise<Req>;
  /** Status with the right credential (a function when it depends on the fixtures). */
  right: number | (() => number);
  /** Status with a credential of another workspace holding every named scope (default 404). */
  wrongWorkspace?: number;
  /** The answer repeats what the request sent (so ids in it are no leak). */
  echoes?: boolean;
}

/** The resources made before the matrix runs (ids of the default workspace). */
export interface MatrixFixtures {
  sessionId: string;
  taskId: string;
  eventId: string;
  messageId: string;
  artifactId: string;
  outcomeId: string;
  receiptId: string;
  receiptDocument: Json;
  personaId: string;
  waiterId: string;
  keyId: string;
  clientId: string;
  quotaId: string | undefined;
  webhookId: string;
  vaultId: string;
  branchId: string;
  connectorId: string;
  memoryId: string;
}

/** What the rows reach for when a request is built (after the suite's set-up). */
export interface MatrixContext {
  readonly fx: MatrixFixtures;
  readonly admin: ReturnType<typeof harnClient>;
  newSession(personaId?: string): Promise<string>;
  /** A task suspended for input (for cancel and task messages). */
  waitingTask(): Promise<string>;
}

export const webhookBody = { url: "https://203.0.114.1/hook", event_types: ["session.closed"] };

export const userMessage = { role: "user", parts: [{ type: "text", text: "hello" }] };

/** Every REST route ("METHOD /path") → its row. */
export function matrixRows(ctx: MatrixContext): Record<string, Row> {
  return {
    "GET /v1": { req: async () => ({ path: "/v1" }), right: 200, wrongWorkspace: 200 },
    "GET /v1/agent-card": {
      req: async () => ({ path: "/v1/agent-card" }),
      right: 200,
      wrongWorkspace: 200,
    },
    "GET /v1/health": {
      req: async () => ({ path: "/v1/health" }),
      right: 200,
      wrongWorkspace: 200,
    },

    "GET /v1/workspaces": {
      req: async () => ({ path: "/v1/workspaces" }),
      right: 200,
      wrongWorkspace: 200,
    },
    "POST /v1/workspaces": {
      req: async () => ({
        path: "/v1/workspaces",
        body: { name: "made by matrix", id: `w_${Math.random().toString(36).slice(2, 10)}` },
      }),
      right: 201,
      wrongWorkspace: 403,
    },
    "GET /v1/workspaces/{workspace_id}": {
      req: async () => ({ path: "/v1/workspaces/default" }),
      right: 200,
    },
    "PATCH /v1/workspaces/{workspace_id}": {
      req: async () => ({ path: "/v1/workspaces/default", body: { metadata: { matrix: true } } }),
      right: 200,
      wrongWorkspace: 403,
    },
    "POST /v1/workspaces/{workspace_id}/archive": {
      req: async () => {
        const made = await ctx.admin.post("/v1/workspaces", { name: "to archive", root: "" });
        return { path: `/v1/workspaces/${made.json.id}/archive` };
      },
      right: 200,
      wrongWorkspace: 403,
    },

    "GET /v1/personas": {
      req: async () => ({ path: "/v1/personas?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/personas": {
      req: async () => ({
        path: "/v1/personas",
        body: {
          workspace_id: "default",
          name: "p",
          entry_workflow: "scripted",
          definition: replyGraph,
        },
      }),
      right: 201,
    },
    "GET /v1/personas/{persona_id}": {
      req: async () => ({ path: `/v1/personas/${ctx.fx.personaId}` }),
      right: 200,
    },

    "GET /v1/sessions": {
      req: async () => ({ path: "/v1/sessions?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/sessions": {
      req: async () => ({ path: "/v1/sessions", body: { workspace_id: "default" } }),
      right: 201,
    },
    "GET /v1/sessions/{session_id}": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}` }),
      right: 200,
    },
    "POST /v1/sessions/{session_id}/close": {
      req: async () => ({ path: `/v1/sessions/${await ctx.newSession()}/close`, body: {} }),
      right: 200,
    },
    "POST /v1/sessions/{session_id}/fork": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/fork`, body: {} }),
      right: 201,
    },
    "POST /v1/sessions/{session_id}/truncate": {
      req: async () => ({
        path: `/v1/sessions/${await ctx.newSession()}/truncate`,
        body: { keep_turns: 0 },
      }),
      right: 200,
    },
    "GET /v1/sessions/{session_id}/messages": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/messages` }),
      right: 200,
    },
    "POST /v1/sessions/{session_id}/messages": {
      req: async () => ({
        path: `/v1/sessions/${await ctx.newSession()}/messages`,
        body: { message: userMessage },
      }),
      right: 201,
    },
    "GET /v1/sessions/{session_id}/tasks": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/tasks` }),
      right: 200,
    },
    "POST /v1/sessions/{session_id}/tasks": {
      req: async () => ({
        path: `/v1/sessions/${await ctx.newSession()}/tasks`,
        body: { input: "hello" },
      }),
      right: 202,
    },
    "GET /v1/sessions/{session_id}/events": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/events` }),
      right: 200,
    },
    "GET /v1/sessions/{session_id}/events/stream": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/events/stream`, stream: true }),
      right: 200,
    },
    "GET /v1/messages/{message_id}": {
      req: async () => ({ path: `/v1/messages/${ctx.fx.messageId}` }),
      right: 200,
    },

    "GET /v1/tasks": { req: async () => ({ path: "/v1/tasks?workspace_id=default" }), right: 200 },
    "POST /v1/tasks": {
      req: async () => ({
        path: "/v1/tasks",
        body: { session_id: await ctx.newSession(), input: "hi" },
      }),
      right: 202,
    },
    "GET /v1/tasks/{task_id}": {
      req: async () => ({ path: `/v1/tasks/${ctx.fx.taskId}` }),
      right: 200,
    },
    "POST /v1/tasks/{task_id}/cancel": {
      req: async () => ({ path: `/v1/tasks/${await ctx.waitingTask()}/cancel`, body: {} }),
      right: 200,
    },
    "POST /v1/tasks/{task_id}/messages": {
      req: async () => ({
        path: `/v1/tasks/${await ctx.waitingTask()}/messages`,
        body: { kind: "input", message: userMessage },
      }),
      right: 201,
    },
    "POST /v1/tasks/{task_id}/replay": {
      req: async () => ({ path: `/v1/tasks/${ctx.fx.taskId}/replay`, body: { mode: "exact" } }),
      right: 202,
    },
    "GET /v1/tasks/{task_id}/events": {
      req: async () => ({ path: `/v1/tasks/${ctx.fx.taskId}/events` }),
      right: 200,
    },
    "GET /v1/tasks/{task_id}/stream": {
      req: async () => ({ path: `/v1/tasks/${ctx.fx.taskId}/stream`, stream: true }),
      right: 200,
    },
    "GET /v1/outcomes": {
      req: async () => ({ path: "/v1/outcomes?workspace_id=default" }),
      right: 200,
    },
    "GET /v1/outcomes/{outcome_id}": {
      req: async () => ({ path: `/v1/outcomes/${ctx.fx.outcomeId}` }),
      right: 200,
    },

    "GET /v1/events": {
      req: async () => ({ path: "/v1/events?workspace_id=default" }),
      right: 200,
    },
    "GET /v1/events/stream": {
      req: async () => ({ path: "/v1/events/stream?workspace_id=default", stream: true }),
      right: 200,
    },
    "GET /v1/events/{event_id}": {
      req: async () => ({ path: `/v1/events/${ctx.fx.eventId}` }),
      right: 200,
    },

    "GET /v1/artifacts": {
      req: async () => ({ path: "/v1/artifacts?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/artifacts": {
      req: async () => ({
        path: "/v1/artifacts",
        body: { workspace_id: "default", kind: "file", name: "a.txt", content: "hello" },
      }),
      right: 201,
    },
    "GET /v1/artifacts/{artifact_id}": {
      req: async () => ({ path: `/v1/artifacts/${ctx.fx.artifactId}` }),
      right: 200,
    },
    "GET /v1/artifacts/{artifact_id}/content": {
      req: async () => ({ path: `/v1/artifacts/${ctx.fx.artifactId}/content` }),
      right: 200,
    },

    "GET /v1/receipts/public-keys": {
      req: async () => ({ path: "/v1/receipts/public-keys" }),
      right: 200,
      wrongWorkspace: 200,
    },
    "POST /v1/receipts/verify": {
      // Verifies the document it is given; another workspace's stored receipt lends nothing.
      req: async () => ({ path: "/v1/receipts/verify", body: ctx.fx.receiptDocument }),
      right: 200,
      wrongWorkspace: 200,
      echoes: true,
    },
    "GET /v1/receipts/{receipt_id}": {
      req: async () => ({ path: `/v1/receipts/${ctx.fx.receiptId}` }),
      right: 200,
    },
    "POST /v1/receipts/{receipt_id}/verify": {
      req: async () => ({ path: `/v1/receipts/${ctx.fx.receiptId}/verify`, body: {} }),
      right: 200,
    },
    "GET /v1/tasks/{task_id}/receipts": {
      req: async () => ({ path: `/v1/tasks/${ctx.fx.taskId}/receipts` }),
      right: 200,
    },

    "GET /v1/api-keys": {
      req: async () => ({ path: "/v1/api-keys?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/api-keys": {
      req: async () => ({
        path: "/v1/api-keys",
        body: { workspace_id: "default", name: "made", scopes: ["keys:admin"] },
      }),
      right: 201,
    },
    "GET /v1/api-keys/{key_id}": {
      req: async () => ({ path: `/v1/api-keys/${ctx.fx.keyId}` }),
      right: 200,
    },
    "POST /v1/api-keys/{key_id}/revoke": {
      req: async () => {
        const fresh = await ctx.admin.post("/v1/api-keys", {
          name: "doomed",
          scopes: ["keys:admin"],
        });
        return { path: `/v1/api-keys/${fresh.json.id}/revoke` };
      },
      right: 200,
    },
    "GET /v1/oauth-clients": {
      req: async () => ({ path: "/v1/oauth-clients?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/oauth-clients": {
      req: async () => ({
        path: "/v1/oauth-clients",
        body: { workspace_id: "default", name: "made", scopes: ["keys:admin"] },
      }),
      right: 201,
    },
    "GET /v1/oauth-clients/{client_id}": {
      req: async () => ({ path: `/v1/oauth-clients/${ctx.fx.clientId}` }),
      right: 200,
    },
    "POST /v1/oauth-clients/{client_id}/revoke": {
      req: async () => {
        const fresh = await ctx.admin.post("/v1/oauth-clients", {
          name: "doomed",
          scopes: ["keys:admin"],
        });
        return { path: `/v1/oauth-clients/${fresh.json.id}/revoke` };
      },
      right: 200,
    },

    "GET /v1/ui/sessions/{session_id}/events/stream": {
      req: async () => ({
        path: `/v1/ui/sessions/${ctx.fx.sessionId}/events/stream`,
        stream: true,
      }),
      right: 200,
    },
    "GET /v1/sessions/{session_id}/ws": {
      // Without an upgrade it only says how to use it (400), once the session is visible.
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/ws` }),
      right: 400,
    },
    "GET /v1/quotas": {
      req: async () => ({ path: "/v1/quotas?workspace_id=default" }),
      right: 200,
    },
    "GET /v1/quotas/{quota_id}": {
      // Another workspace's quota ids are not asked for by id here: the
      // workspace is the caller's own, so an unknown id is a plain 404.
      req: async () => ({ path: `/v1/quotas/${ctx.fx.quotaId ?? "quota_none"}` }),
      right: () => (ctx.fx.quotaId ? 200 : 404),
    },
    "GET /v1/ui/sessions/{session_id}/health": {
      req: async () => ({ path: `/v1/ui/sessions/${ctx.fx.sessionId}/health` }),
      right: 200,
    },
    "GET /v1/ui/sessions/{session_id}/health/stream": {
      req: async () => ({
        path: `/v1/ui/sessions/${ctx.fx.sessionId}/health/stream`,
        stream: true,
      }),
      right: 200,
    },
    "GET /v1/ui/sessions/{session_id}": {
      req: async () => ({ path: `/v1/ui/sessions/${ctx.fx.sessionId}` }),
      right: 200,
    },
    // Webhooks (a public IP literal: no DNS, and not a private target).
    "GET /v1/webhooks": {
      req: async () => ({ path: "/v1/webhooks?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/webhooks": {
      req: async () => ({
        path: "/v1/webhooks",
        body: { ...webhookBody, workspace_id: "default" },
      }),
      right: 201,
    },
    "GET /v1/webhooks/{webhook_id}": {
      req: async () => ({ path: `/v1/webhooks/${ctx.fx.webhookId}` }),
      right: 200,
    },
    "DELETE /v1/webhooks/{webhook_id}": {
      req: async () => {
        const fresh = await ctx.admin.post("/v1/webhooks", webhookBody);
        return { path: `/v1/webhooks/${fresh.json.id}` };
      },
      right: 200,
    },
    "GET /v1/webhooks/{webhook_id}/deliveries": {
      req: async () => ({ path: `/v1/webhooks/${ctx.fx.webhookId}/deliveries` }),
      right: 200,
    },
    // Vaults (the adapters service): another workspace's vault is absent.
    "GET /v1/vaults": {
      req: async () => ({ path: "/v1/vaults?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/vaults": {
      req: async () => ({
        path: "/v1/vaults",
        body: { workspace_id: "default", provider: "trellis", capabilities: ["read", "write"] },
      }),
      right: 201,
    },
    "GET /v1/vaults/{vault_id}": {
      req: async () => ({ path: `/v1/vaults/${ctx.fx.vaultId}` }),
      right: 200,
    },
    // Branches (recorded forks of a session) and connectors.
    "GET /v1/sessions/{session_id}/branches": {
      req: async () => ({ path: `/v1/sessions/${ctx.fx.sessionId}/branches` }),
      right: 200,
    },
    "POST /v1/sessions/{session_id}/branches": {
      req: async () => ({
        path: `/v1/sessions/${ctx.fx.sessionId}/branches`,
        body: { kind: "session", base_ref: "head" },
      }),
      right: 201,
    },
    "GET /v1/branches/{branch_id}": {
      req: async () => ({ path: `/v1/branches/${ctx.fx.branchId}` }),
      right: 200,
    },
    "GET /v1/connectors": {
      req: async () => ({ path: "/v1/connectors?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/connectors": {
      req: async () => ({
        path: "/v1/connectors",
        body: { provider: "github", workspace_id: "default" },
      }),
      right: 201,
    },
    "GET /v1/connectors/{connector_id}": {
      req: async () => ({ path: `/v1/connectors/${ctx.fx.connectorId}` }),
      right: 200,
    },
    "POST /v1/connectors/{connector_id}": {
      req: async () => ({
        path: `/v1/connectors/${ctx.fx.connectorId}`,
        body: { status: "ACTIVE" },
      }),
      right: 200,
    },
    "POST /v1/connectors/{connector_id}/deliveries": {
      req: async () => ({
        path: `/v1/connectors/${ctx.fx.connectorId}/deliveries`,
        body: { delivery_id: `matrix-${Math.random()}`, event_kind: "push", payload: {} },
      }),
      right: 201,
    },
    "GET /v1/vaults/{vault_id}/secrets": {
      req: async () => ({ path: `/v1/vaults/${ctx.fx.vaultId}/secrets` }),
      right: 200,
    },
    "POST /v1/vaults/{vault_id}": {
      req: async () => ({
        path: `/v1/vaults/${ctx.fx.vaultId}`,
        body: { metadata: { touched: "matrix" } },
      }),
      right: 200,
    },
    "DELETE /v1/vaults/{vault_id}": {
      req: async () => {
        const made = await ctx.admin.post("/v1/vaults", {
          workspace_id: "default",
          provider: "trellis",
          capabilities: ["read"],
        });
        if (made.status !== 201) throw new Error(`vault: ${made.status} ${made.text}`);
        return { path: `/v1/vaults/${made.json.id}` };
      },
      right: 200,
    },
    "PUT /v1/vaults/{vault_id}/secrets/{name}": {
      req: async () => ({
        path: `/v1/vaults/${ctx.fx.vaultId}/secrets/MATRIX_TOKEN`,
        body: { value: "matrix-secret-value" },
      }),
      right: 200,
    },
    "DELETE /v1/vaults/{vault_id}/secrets/{name}": {
      req: async () => {
        const name = `DEL_${Math.random().toString(36).slice(2, 10)}`;
        const put = await ctx.admin.request("PUT", `/v1/vaults/${ctx.fx.vaultId}/secrets/${name}`, {
          body: { value: "to delete" },
        });
        if (put.status !== 200) throw new Error(`secret: ${put.status} ${put.text}`);
        return { path: `/v1/vaults/${ctx.fx.vaultId}/secrets/${name}` };
      },
      right: 200,
    },
    // Memory (the tasks service): another workspace's record is absent.
    "GET /v1/memories": {
      req: async () => ({ path: "/v1/memories?workspace_id=default" }),
      right: 200,
    },
    "POST /v1/memories": {
      req: async () => ({
        path: "/v1/memories",
        body: { workspace_id: "default", scope: "workspace", content: "m", provenance: {} },
      }),
      right: 201,
    },
    "GET /v1/memories/{memory_id}": {
      req: async () => ({ path: `/v1/memories/${ctx.fx.memoryId}` }),
      right: 200,
    },
    "DELETE /v1/memories/{memory_id}": {
      req: async () => {
        const made = await ctx.admin.post("/v1/memories", {
          workspace_id: "default",
          scope: "workspace",
          content: "to delete",
          provenance: {},
        });
        if (made.status !== 201) throw new Error(`memory: ${made.status} ${made.text}`);
        return { path: `/v1/memories/${made.json.id}` };
      },
      right: 204,
    },
    // Skills: another workspace lists its own agents' (none here) and the tools'.
    "GET /v1/skills": {
      req: async () => ({ path: "/v1/skills" }),
      right: 200,
      wrongWorkspace: 200,
    },
    "GET /v1/skills/{skill_id}": {
      req: async () => ({ path: `/v1/skills/${ctx.fx.personaId}` }),
      right: 200,
    },
    "GET /v1/ui/event-types": {
      req: async () => ({ path: "/v1/ui/event-types" }),
      right: 200,
      wrongWorkspace: 200,
    },
  };
}
