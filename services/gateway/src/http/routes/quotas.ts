/** `GET /v1/quotas`, `GET /v1/quotas/{quota_id}`: the limits of the caller's workspace and their usage. */
import type { JsonObject } from "@bufbuild/protobuf";
import { errors } from "@trellis/runtime";
import { type QuotaReport, quotaExhaustion, quotaLimitName } from "../../quota/limits.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok, param, queryWorkspace } from "./common.js";
import { limitOf, okPage } from "./paging.js";

/**
 * A Quota resource (Harn v1 "Quota"): the envelope's `created_at` is the
 * start of the current window, `updated_at` when the usage was read. The
 * caller's own rates say so in `metadata` (`applies_to: actor`).
 */
function quotaToHarn(q: QuotaReport, workspaceId: string, readAt: Date): JsonObject {
  const key = quotaLimitName(q);
  return {
    id: q.id,
    object: "quota",
    created_at: new Date(q.resetAt.getTime() - q.periodMs).toISOString(),
    updated_at: readAt.toISOString(),
    metadata: q.actorId
      ? { applies_to: "actor", actor_id: q.actorId, window_seconds: q.periodMs / 1000 }
      : { applies_to: "workspace", window_seconds: q.periodMs / 1000 },
    workspace_id: workspaceId,
    scope: q.scope,
    limits: { [key]: q.limit },
    usage: { [key]: q.used },
    reset_at: q.resetAt.toISOString(),
    hard_limit: q.hard,
    soft_limit: false,
    exhaustion_reason: quotaExhaustion(q),
    last_receipt_id: null,
  };
}

/**
 * The quotas that apply in the workspace the call acts in: the workspace's,
 * and the caller's own rates when that is the caller's workspace.
 */
export async function quotaReports(
  call: Pick<RestCall, "caller" | "ports">,
  workspaceId: string,
): Promise<QuotaReport[]> {
  const own = workspaceId === call.caller.workspaceId ? call.caller.actorId : undefined;
  return (await call.ports.limits?.report(workspaceId, own)) ?? [];
}

async function listQuotas(call: RestCall): Promise<RestResponse> {
  // Every quota fits one page; `limit` is still checked like everywhere else.
  limitOf(call, 50);
  const workspaceId = queryWorkspace(call);
  const list = await quotaReports(call, workspaceId);
  const now = new Date();
  return okPage(list, (q) => quotaToHarn(q, workspaceId, now));
}

async function getQuota(call: RestCall): Promise<RestResponse> {
  const id = param(call, "quota_id");
  const workspaceId = queryWorkspace(call);
  const found = (await quotaReports(call, workspaceId)).find((q) => q.id === id);
  if (found === undefined) throw errors.notFound("quota", id);
  return ok(quotaToHarn(found, workspaceId, new Date()));
}

export const quotaRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/quotas", scope: "workspaces:read", handle: listQuotas },
  { method: "GET", path: "/v1/quotas/{quota_id}", scope: "workspaces:read", handle: getQuota },
];
