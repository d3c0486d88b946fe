/**
 * THE authorization table: what every REST route and every RPC on the public
 * port requires. The REST handler and the gRPC interceptor both decide from
 * it and from nothing else; `test/auth-scope-table.test.ts` fails when a
 * route or an RPC method has no entry (or an entry names nothing served).
 *
 * A rule is
 * - a scope (`sessions:read`, …): an authenticated caller holding it;
 * - `admin`: a caller holding `*` (the admin key: every workspace);
 * - `public`: no credentials (discovery, OAuth token endpoint, health,
 *   reflection);
 * - `internal`: never through the gateway — only other Trellis services call
 *   it, with a service credential (see `@trellis/platform` `mesh.ts`).
 *
 * Workspace membership is checked after this, on the resource itself: a
 * resource of another workspace is `404 resource_not_found`, never 403.
 *
 * Keys: REST `"<METHOD> <path pattern>"`; RPC `"<package.Service>/<Method>"`,
 * or `"<package.Service>/*"` for a rule covering every method of a service.
 */
import { hasScope, isAdmin, type Scope } from "../domain/scopes.js";

/** What a route or RPC requires. */
export type Rule = Scope | "admin" | "public" | "internal";

/** REST routes (the Harn surface, key management, OAuth). */
export const restRules: Readonly<Record<string, Rule>> = {
  // Discovery (Harn v1: public).
  "GET /v1": "public",
  "GET /v1/agent-card": "public",
  // Every service and worker behind this gateway (topology/mesh-health.ts).
  "GET /v1/health": "public",

  "GET /v1/workspaces": "workspaces:read",
  "POST /v1/workspaces": "admin",
  "GET /v1/workspaces/{workspace_id}": "workspaces:read",
  "PATCH /v1/workspaces/{workspace_id}": "admin",
  "POST /v1/workspaces/{workspace_id}/archive": "admin",

  "GET /v1/personas": "agents:read",
  "POST /v1/personas": "agents:write",
  "GET /v1/personas/{persona_id}": "agents:read",

  "GET /v1/sessions": "sessions:read",
  "POST /v1/sessions": "sessions:write",
  "GET /v1/sessions/{session_id}": "sessions:read",
  "POST /v1/sessions/{session_id}/close": "sessions:write",
  "POST /v1/sessions/{session_id}/fork": "sessions:write",
  "POST /v1/sessions/{session_id}/truncate": "sessions:write",
  "GET /v1/sessions/{session_id}/messages": "sessions:read",
  "POST /v1/sessions/{session_id}/messages": "sessions:write",
  "GET /v1/sessions/{session_id}/tasks": "tasks:read",
  "POST /v1/sessions/{session_id}/tasks": "tasks:write",
  "GET /v1/sessions/{session_id}/events": "events:read",
  "GET /v1/sessions/{session_id}/events/stream": "events:read",
  // The WebSocket channel; each command frame also needs its REST write's rule.
  "GET /v1/sessions/{session_id}/ws": "events:read",
  "GET /v1/messages/{message_id}": "sessions:read",

  "GET /v1/tasks": "tasks:read",
  "POST /v1/tasks": "tasks:write",
  "GET /v1/tasks/{task_id}": "tasks:read",
  "POST /v1/tasks/{task_id}/cancel": "tasks:write",
  "POST /v1/tasks/{task_id}/messages": "tasks:write",
  "GET /v1/tasks/{task_id}/events": "events:read",
  "GET /v1/tasks/{task_id}/stream": "events:read",
  "POST /v1/tasks/{task_id}/replay": "tasks:write",
  "GET /v1/outcomes": "tasks:read",
  "GET /v1/outcomes/{outcome_id}": "tasks:read",

  "GET /v1/events": "events:read",
  "GET /v1/events/stream": "events:read",
  "GET /v1/events/{event_id}": "events:read",
  // The frontend event contract (operator UI).
  "GET /v1/ui/sessions/{session_id}/events/stream": "events:read",
  "GET /v1/ui/event-types": "events:read",
  "GET /v1/ui/sessions/{session_id}/health": "events:read",
  "GET /v1/ui/sessions/{session_id}/health/stream": "events:read",
  "GET /v1/ui/sessions/{session_id}": "events:read",

  "GET /v1/artifacts": "artifacts:read",
  "POST /v1/artifacts": "artifacts:write",
  "GET /v1/artifacts/{artifact_id}": "artifacts:read",
  "GET /v1/artifacts/{artifact_id}/content": "artifacts:read",

  // Verification only reads.
  "GET /v1/receipts/public-keys": "receipts:read",
  "POST /v1/receipts/verify": "receipts:read",
  "GET /v1/receipts/{receipt_id}": "receipts:read",
  "POST /v1/receipts/{receipt_id}/verify": "receipts:read",
  "GET /v1/tasks/{task_id}/receipts": "receipts:read",

  // Quotas and rate limits of a workspace, with usage.
  "GET /v1/quotas": "workspaces:read",
  "GET /v1/quotas/{quota_id}": "workspaces:read",

  // Webhooks send a workspace's events to a URL. `keys:admin` (what they
  // needed before they had scopes of their own) still grants both.
  "GET /v1/webhooks": "webhooks:read",
  "POST /v1/webhooks": "webhooks:write",
  "GET /v1/webhooks/{webhook_id}": "webhooks:read",
  "DELETE /v1/webhooks/{webhook_id}": "webhooks:write",
  "GET /v1/webhooks/{webhook_id}/deliveries": "webhooks:read",

  // Vaults of secrets: metadata and secret names only; values are write-only.
  // Tenant-global vaults need an admin key (the adapters service decides).
  "GET /v1/vaults": "vaults:read",
  "POST /v1/vaults": "vaults:write",
  "GET /v1/vaults/{vault_id}": "vaults:read",
  "POST /v1/vaults/{vault_id}": "vaults:write",
  "DELETE /v1/vaults/{vault_id}": "vaults:write",
  "GET /v1/vaults/{vault_id}/secrets": "vaults:read",
  "PUT /v1/vaults/{vault_id}/secrets/{name}": "vaults:write",
  "DELETE /v1/vaults/{vault_id}/secrets/{name}": "vaults:write",

  // Branches are part of their session (a branch is a recorded fork).
  "GET /v1/sessions/{session_id}/branches": "sessions:read",
  "POST /v1/sessions/{session_id}/branches": "sessions:write",
  "GET /v1/branches/{branch_id}": "sessions:read",

  // Connectors; deliveries need a scope of their own, so a provider's key does nothing else.
  "GET /v1/connectors": "connectors:read",
  "POST /v1/connectors": "connectors:write",
  "GET /v1/connectors/{connector_id}": "connectors:read",
  "POST /v1/connectors/{connector_id}": "connectors:write",
  "POST /v1/connectors/{connector_id}/deliveries": "connectors:deliver",
  // Memory: durable knowledge of a persona, session, workspace or the tenant.
  "GET /v1/memories": "memory:read",
  "POST /v1/memories": "memory:write",
  "GET /v1/memories/{memory_id}": "memory:read",
  "DELETE /v1/memories/{memory_id}": "memory:write",
  // Skills are derived from agents and tools: reading them is reading agents.
  "GET /v1/skills": "agents:read",
  "GET /v1/skills/{skill_id}": "agents:read",

  // Credentials of a workspace.
  "GET /v1/api-keys": "keys:admin",
  "POST /v1/api-keys": "keys:admin",
  "GET /v1/api-keys/{key_id}": "keys:admin",
  "POST /v1/api-keys/{key_id}/revoke": "keys:admin",
  "GET /v1/oauth-clients": "keys:admin",
  "POST /v1/oauth-clients": "keys:admin",
  "GET /v1/oauth-clients/{client_id}": "keys:admin",
  "POST /v1/oauth-clients/{client_id}/revoke": "keys:admin",

  // OAuth2 (RFC 6749 §4.4): the client authenticates in the request itself.
  "POST /oauth/token": "public",
  "GET /.well-known/jwks.json": "public",
};

/** RPC methods of every service the public port can route to. */
export const rpcRules: Readonly<Record<string, Rule>> = {
  // Probes and schema discovery stay open.
  "grpc.health.v1.Health/*": "public",
  "grpc.reflection.v1.ServerReflection/*": "public",
  "grpc.reflection.v1alpha.ServerReflection/*": "public",

  // The gateway's own: the UI event stream over gRPC (same rule as its SSE route).
  "trellis.gateway.v1.UiEventService/StreamUiEvents": "events:read",

  "trellis.tasks.v1.WorkspaceService/CreateWorkspace": "admin",
  "trellis.tasks.v1.WorkspaceService/GetWorkspace": "workspaces:read",
  "trellis.tasks.v1.WorkspaceService/ListWorkspaces": "workspaces:read",
  "trellis.tasks.v1.WorkspaceService/UpdateWorkspace": "admin",
  "trellis.tasks.v1.WorkspaceService/ArchiveWorkspace": "admin",

  "trellis.tasks.v1.AgentService/CreateAgent": "agents:write",
  "trellis.tasks.v1.AgentService/GetAgent": "agents:read",
  "trellis.tasks.v1.AgentService/ListAgents": "agents:read",

  "trellis.tasks.v1.SessionService/CreateSession": "sessions:write",
  "trellis.tasks.v1.SessionService/GetSession": "sessions:read",
  "trellis.tasks.v1.SessionService/ListSessions": "sessions:read",
  "trellis.tasks.v1.SessionService/CloseSession": "sessions:write",
  "trellis.tasks.v1.SessionService/ForkSession": "sessions:write",
  "trellis.tasks.v1.SessionService/TruncateSession": "sessions:write",
  "trellis.tasks.v1.SessionService/AppendMessage": "sessions:write",
  "trellis.tasks.v1.SessionService/ListMessages": "sessions:read",
  "trellis.tasks.v1.SessionService/GetMessage": "sessions:read",

  "trellis.tasks.v1.TaskService/SubmitTask": "tasks:write",
  "trellis.tasks.v1.TaskService/GetTask": "tasks:read",
  "trellis.tasks.v1.TaskService/ListTasks": "tasks:read",
  "trellis.tasks.v1.TaskService/CancelTask": "tasks:write",
  "trellis.tasks.v1.TaskService/WatchTask": "tasks:read",
  // Replay makes a new task from a recorded one.
  "trellis.tasks.v1.TaskService/ReplayTask": "tasks:write",

  "trellis.tasks.v1.EventService/ListEvents": "events:read",
  "trellis.tasks.v1.EventService/StreamEvents": "events:read",
  "trellis.tasks.v1.EventService/GetEvent": "events:read",

  "trellis.tasks.v1.SignalService/Deliver": "signals:write",

  "trellis.tasks.v1.ArtifactService/RegisterArtifact": "artifacts:write",
  "trellis.tasks.v1.ArtifactService/GetArtifact": "artifacts:read",
  "trellis.tasks.v1.ArtifactService/ListArtifacts": "artifacts:read",
  "trellis.tasks.v1.ArtifactService/GetArtifactContent": "artifacts:read",

  "trellis.tasks.v1.OutcomeService/GetOutcome": "tasks:read",
  "trellis.tasks.v1.OutcomeService/ListOutcomes": "tasks:read",

  // A chat turn is a task; Subscribe follows the session's events.
  "trellis.chat.v1.ChatService/Send": "tasks:write",
  "trellis.chat.v1.ChatService/SendStreaming": "tasks:write",
  "trellis.chat.v1.ChatService/Subscribe": "events:read",
  "trellis.chat.v1.ChatService/GetHistory": "sessions:read",

  "trellis.receipts.v1.ReceiptService/GetReceipt": "receipts:read",
  "trellis.receipts.v1.ReceiptService/VerifyReceipt": "receipts:read",
  "trellis.receipts.v1.ReceiptService/ListTaskReceipts": "receipts:read",
  "trellis.receipts.v1.ReceiptService/ListReceipts": "receipts:read",
  "trellis.receipts.v1.ReceiptService/GetPublicKeys": "receipts:read",

  "trellis.adapters.v1.VaultService/CreateVault": "vaults:write",
  "trellis.adapters.v1.VaultService/GetVault": "vaults:read",
  "trellis.adapters.v1.VaultService/ListVaults": "vaults:read",
  "trellis.adapters.v1.VaultService/UpdateVault": "vaults:write",
  "trellis.adapters.v1.VaultService/DeleteVault": "vaults:write",
  "trellis.adapters.v1.VaultService/PutSecret": "vaults:write",
  "trellis.adapters.v1.VaultService/DeleteSecret": "vaults:write",
  "trellis.adapters.v1.VaultService/ListSecrets": "vaults:read",

  "trellis.tasks.v1.BranchService/CreateBranch": "sessions:write",
  "trellis.tasks.v1.BranchService/GetBranch": "sessions:read",
  "trellis.tasks.v1.BranchService/ListBranches": "sessions:read",

  "trellis.tasks.v1.ConnectorService/CreateConnector": "connectors:write",
  "trellis.tasks.v1.ConnectorService/GetConnector": "connectors:read",
  "trellis.tasks.v1.ConnectorService/ListConnectors": "connectors:read",
  "trellis.tasks.v1.ConnectorService/UpdateConnector": "connectors:write",
  "trellis.tasks.v1.ConnectorService/DeliverConnectorEvent": "connectors:deliver",

  "trellis.gateway.v1.QuotaService/ListQuotas": "workspaces:read",
  "trellis.gateway.v1.QuotaService/GetQuota": "workspaces:read",

  // Adapter workers and the tasks service talk to routing inside the mesh.
  "trellis.adapters.v1.AdapterRegistryService/*": "internal",
  // Operators see the live backends (`trellis adapters conformance`); any
  // client that may read agents may dry-run where a request would run and why
  // (pure: nothing runs, nothing is stored).
  "trellis.adapters.v1.AdapterRegistryService/ListBackends": "admin",
  "trellis.adapters.v1.RoutingService/Negotiate": "agents:read",
  "trellis.tasks.v1.MemoryService/CreateMemory": "memory:write",
  "trellis.tasks.v1.MemoryService/GetMemory": "memory:read",
  "trellis.tasks.v1.MemoryService/ListMemories": "memory:read",
  "trellis.tasks.v1.MemoryService/DeleteMemory": "memory:write",
  "trellis.tasks.v1.SkillService/ListSkills": "agents:read",
  "trellis.tasks.v1.SkillService/GetSkill": "agents:read",
  // Vault secrets for the routers that place turns on remote workers.
  "trellis.adapters.v1.VaultAccessService/*": "internal",
  "trellis.adapters.v1.RoutingService/*": "internal",
  // Adapter workers over gRPC (any language): a worker serves every workspace's turns.
  "trellis.adapters.v1.WorkerService/*": "admin",
};

/** The rule of a REST route (by its path pattern); undefined when it has none. */
export function restRuleOf(method: string, pathPattern: string): Rule | undefined {
  return restRules[`${method} ${pathPattern}`];
}

/** The rule of an RPC; undefined when it has none. */
export function rpcRuleOf(serviceTypeName: string, methodName: string): Rule | undefined {
  return rpcRules[`${serviceTypeName}/${methodName}`] ?? rpcRules[`${serviceTypeName}/*`];
}

/** Result of {@link authorize}. */
export type Decision =
  | { allowed: true }
  | {
      allowed: false;
      /** Human-readable; never names a credential. */
      message: string;
      /** The scope the caller lacks (for `insufficient_scope`), if one would do. */
      requiredScope: Scope | "*" | undefined;
    };

/**
 * Whether an authenticated caller holding `granted` may do what `rule` (from
 * this table; undefined = no entry) requires. No entry denies: a route or RPC
 * somebody forgot in the table is closed, not open.
 */
export function authorize(granted: readonly string[], rule: Rule | undefined): Decision {
  switch (rule) {
    case undefined:
      return {
        allowed: false,
        message: "this operation has no authorization rule; it is not available",
        requiredScope: undefined,
      };
    case "public":
      return { allowed: true };
    case "internal":
      return {
        allowed: false,
        message: "this operation is internal to the Trellis mesh and not available to clients",
        requiredScope: undefined,
      };
    case "admin":
      return isAdmin(granted)
        ? { allowed: true }
        : {
            allowed: false,
            message: "this operation needs an admin API key",
            requiredScope: "*",
          };
    default:
      return hasScope(granted, rule)
        ? { allowed: true }
        : {
            allowed: false,
            message: `this credential lacks the scope ${rule}`,
            requiredScope: rule,
          };
  }
}
