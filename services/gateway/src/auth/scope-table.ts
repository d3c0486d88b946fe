/**
 * Authorization rules: what a caller needs, and what every RPC on the public
 * port requires. A REST route declares its rule once, as its `scope`
 * (`http/routes/`); `http/routes/rules.ts` is the REST table derived from the
 * routes. The REST pipeline and the gRPC interceptor both decide with
 * {@link authorize} and from nothing else; `test/auth-scope-table.test.ts`
 * fails when an RPC method has no entry (or an entry names nothing served).
 *
 * A rule is
 * - a scope (`sessions:read`, …): an authenticated caller holding it;
 * - `admin`: a caller holding `*` (the admin key: every workspace);
 * - `authenticated`: any valid credential, whatever its scopes (the protocol
 *   operations this gateway does not serve: 501 once authenticated);
 * - `public`: no credentials (discovery, OAuth token endpoint, health,
 *   reflection);
 * - `internal`: never through the gateway — only other Trellis services call
 *   it, with a service credential (see `@trellis/platform` `mesh.ts`).
 *
 * Workspace membership is checked after this, on the resource itself: a
 * resource of another workspace is `404 resource_not_found`, never 403.
 *
 * RPC keys: `"<package.Service>/<Method>"`, or `"<package.Service>/*"` for a
 * rule covering every method of a service.
 */
import { hasScope, isAdmin, type Scope } from "../domain/scopes.js";

/** What a route or RPC requires. */
export type Rule = Scope | "admin" | "authenticated" | "public" | "internal";

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
    case "authenticated":
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
