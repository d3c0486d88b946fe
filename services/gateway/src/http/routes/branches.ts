/**
 * Branches (Harn v1 Extended): `POST /v1/sessions/{session_id}/branches`
 * forks the session and records the branch; read one by id, or the
 * branches made from a session.
 */
import { BranchService } from "@trellis/contracts/tasks";
import { branchKindNames, branchToHarn, parseBranchKind } from "../../domain/harn-extended-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { ensureRunAllowed } from "../../policy/agent-policy.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { created, ok, param, required, visible, visibleSession } from "./common.js";
import { okPage, pageOf } from "./paging.js";

async function createBranch(call: RestCall): Promise<RestResponse> {
  const sessionId = param(call, "session_id");
  const body = JsonReader.body(call.body);
  const kind = body.enum("kind", branchKindNames);
  const baseRef = body.requiredString("base_ref");
  const metadata = body.object("metadata");
  const request = {
    sessionId,
    // A missing kind reaches the tasks service as unspecified: a typed 400 there.
    kind: kind === undefined ? 0 : parseBranchKind(kind),
    baseRef,
    parentBranchId: body.string("parent_branch_id") ?? "",
    taskId: body.string("task_id") ?? "",
    idempotencyKey: call.idempotencyKey,
    ...(metadata ? { metadata } : {}),
  };
  const source = await visibleSession(call, sessionId);
  // A branch forks the session, which runs its agent: a restricted credential must be allowed it.
  await ensureRunAllowed(call.caller, "", async () => source.agentId, "session_id");
  const { branch } = await call.ports.clients
    .get(BranchService)
    .createBranch(request, call.options());
  return created(branchToHarn(required(branch, "branch", "")));
}

async function getBranch(call: RestCall): Promise<RestResponse> {
  const id = param(call, "branch_id");
  const { branch } = await call.ports.clients
    .get(BranchService)
    .getBranch({ branchId: id }, call.options());
  return ok(branchToHarn(visible(call, branch, "branch", id)));
}

async function listBranches(call: RestCall): Promise<RestResponse> {
  const sessionId = param(call, "session_id");
  await visibleSession(call, sessionId);
  const response = await call.ports.clients
    .get(BranchService)
    .listBranches({ sessionId, ...pageOf(call) }, call.options());
  return okPage(response.branches, branchToHarn, response.nextPageToken);
}

/** The branch routes (session scopes: a branch is part of its session). */
export const branchRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/sessions/{session_id}/branches",
    scope: "sessions:read",
    handle: listBranches,
  },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/branches",
    scope: "sessions:write",
    write: true,
    handle: createBranch,
  },
  { method: "GET", path: "/v1/branches/{branch_id}", scope: "sessions:read", handle: getBranch },
];
