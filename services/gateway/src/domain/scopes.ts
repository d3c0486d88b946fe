/**
 * Scopes: what an API key may do (Harn v1 "OAuth2 client credentials": scopes
 * map to resource actions such as `sessions:read`, `tasks:write`).
 *
 * `*` grants everything, `<area>:*` every action on one area.
 */

/** A scope string such as `tasks:write`. */
export type Scope = `${string}:${"read" | "write"}`;

/** Whether `granted` allows `required`. */
export function hasScope(granted: readonly string[], required: Scope | undefined): boolean {
  if (required === undefined) return true;
  const area = required.slice(0, required.indexOf(":"));
  return granted.some((s) => s === "*" || s === required || s === `${area}:*`);
}

/** Whether the scopes grant administration (any workspace, key management). */
export function isAdmin(granted: readonly string[]): boolean {
  return granted.includes("*");
}

// gRPC service (trellis.tasks.v1.*) → scope area.
const rpcAreas: Record<string, string> = {
  "trellis.tasks.v1.WorkspaceService": "workspaces",
  "trellis.tasks.v1.AgentService": "personas",
  "trellis.tasks.v1.SessionService": "sessions",
  "trellis.tasks.v1.TaskService": "tasks",
  "trellis.tasks.v1.EventService": "events",
  "trellis.tasks.v1.SignalService": "tasks",
  "trellis.tasks.v1.ArtifactService": "artifacts",
  "trellis.tasks.v1.OutcomeService": "tasks",
  "trellis.receipts.v1.ReceiptService": "receipts",
};

// Services whose every method only reads (verification included).
const readOnlyServices = new Set(["trellis.receipts.v1.ReceiptService"]);

/**
 * The scope an RPC needs: reads are `Get*`, `List*`, `Watch*`, `Stream*`;
 * everything else writes. Undefined for services without an area (any
 * authenticated caller may call them).
 */
export function scopeForRpc(serviceTypeName: string, methodName: string): Scope | undefined {
  const area = rpcAreas[serviceTypeName];
  if (area === undefined) return undefined;
  const read = readOnlyServices.has(serviceTypeName) || /^(Get|List|Watch|Stream)/.test(methodName);
  return `${area}:${read ? "read" : "write"}`;
}
