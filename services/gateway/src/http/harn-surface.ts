/**
 * The Harn Agents Protocol v1 REST surface: every operation its OpenAPI
 * document defines, as `METHOD path`. Kept here as data (the document is not
 * read at run time) so the gateway can tell an operation it does not serve
 * yet (501 `not_implemented`, in the Harn envelope) from a path that is no
 * part of the protocol (404). A route in `routes/index.ts` always wins: an
 * entry here only answers when no route serves its method and path.
 */
import { TrellisError } from "@trellis/runtime";
import type { RestCall, RouteSpec } from "./context.js";
import type { RestResponse } from "./io.js";

/** Every operation of the protocol's OpenAPI document (agents-protocol-2026-04-25). */
export const harnOperations: readonly string[] = [
  "GET /v1",
  "GET /v1/agent-card",
  "GET /v1/personas",
  "POST /v1/personas",
  "GET /v1/personas/{persona_id}",
  "PATCH /v1/personas/{persona_id}",
  "GET /v1/workspaces",
  "POST /v1/workspaces",
  "GET /v1/workspaces/{workspace_id}",
  "PATCH /v1/workspaces/{workspace_id}",
  "GET /v1/sessions",
  "POST /v1/sessions",
  "GET /v1/sessions/{session_id}",
  "PATCH /v1/sessions/{session_id}",
  "POST /v1/sessions/{session_id}/close",
  "POST /v1/sessions/{session_id}/fork",
  "GET /v1/sessions/{session_id}/messages",
  "POST /v1/sessions/{session_id}/messages",
  "GET /v1/sessions/{session_id}/tasks",
  "POST /v1/sessions/{session_id}/tasks",
  "GET /v1/sessions/{session_id}/branches",
  "POST /v1/sessions/{session_id}/branches",
  "GET /v1/sessions/{session_id}/events",
  "GET /v1/sessions/{session_id}/events/stream",
  "GET /v1/tasks",
  "POST /v1/tasks",
  "GET /v1/tasks/{task_id}",
  "POST /v1/tasks/{task_id}/cancel",
  "POST /v1/tasks/{task_id}/replay",
  "POST /v1/tasks/{task_id}/messages",
  "GET /v1/tasks/{task_id}/events",
  "GET /v1/tasks/{task_id}/stream",
  "GET /v1/tasks/{task_id}/receipts",
  "GET /v1/branches/{branch_id}",
  "GET /v1/messages/{message_id}",
  "GET /v1/artifacts",
  "POST /v1/artifacts",
  "GET /v1/artifacts/{artifact_id}",
  "GET /v1/artifacts/{artifact_id}/content",
  "GET /v1/events",
  "GET /v1/events/{event_id}",
  "GET /v1/events/stream",
  "GET /v1/receipts/{receipt_id}",
  "POST /v1/receipts/{receipt_id}/verify",
  "GET /v1/memories",
  "POST /v1/memories",
  "GET /v1/memories/{memory_id}",
  "DELETE /v1/memories/{memory_id}",
  "GET /v1/vaults",
  "POST /v1/vaults",
  "GET /v1/vaults/{vault_id}",
  "GET /v1/connectors",
  "GET /v1/connectors/{connector_id}",
  "GET /v1/skills",
  "GET /v1/skills/{skill_id}",
  "GET /v1/outcomes",
  "GET /v1/outcomes/{outcome_id}",
  "GET /v1/quotas",
  "GET /v1/quotas/{quota_id}",
];

function notImplemented(call: RestCall): Promise<RestResponse> {
  const { method, url } = call.req;
  const path = new URL(url ?? "/", "http://gateway.invalid").pathname;
  throw new TrellisError({
    reason: "not_implemented",
    message: `${method} ${path} is part of the Harn Agents Protocol but this Trellis does not serve it yet`,
  });
}

/**
 * Routes answering 501 for the protocol's operations that none of `served`
 * serves. They need a valid credential (any scope), like every non-public
 * route, so an anonymous caller still gets 401 first.
 */
export function notServedRoutes(served: readonly RouteSpec[]): RouteSpec[] {
  const have = new Set(served.map((r) => `${r.method} ${r.path}`));
  const out: RouteSpec[] = [];
  for (const operation of harnOperations) {
    if (have.has(operation)) continue;
    const space = operation.indexOf(" ");
    const method = operation.slice(0, space) as RouteSpec["method"];
    out.push({
      method,
      path: operation.slice(space + 1),
      scope: "authenticated",
      notServed: true,
      handle: notImplemented,
    });
  }
  return out;
}
