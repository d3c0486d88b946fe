/** `GET /v1/quotas`, `GET /v1/quotas/{quota_id}`: the limits of the caller's workspace and their usage. */
import type { JsonObject } from "@bufbuild/protobuf";
import { errors } from "@trellis/runtime";
import { listJson } from "../../domain/harn-json.js";
import type { QuotaReport } from "../../quota/limits.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok, param, queryString, workspaceOf } from "./common.js";

function quotaToHarn(q: QuotaReport, workspaceId: string): JsonObject {
  const key = q.hard ? "tasks_per_day" : `writes_per_${q.periodMs / 1000}s`;
  return {
    id: q.id,
    object: "quota",
    workspace_id: workspaceId,
    scope: q.scope,
    limits: { [key]: q.limit },
    usage: { [key]: q.used },
    reset_at: q.resetAt.toISOString(),
    hard_limit: q.hard,
    soft_limit: false,
    exhaustion_reason: q.used >= q.limit ? (q.hard ? "quota_exceeded" : "rate_limited") : null,
    last_receipt_id: null,
  };
}

async function reports(call: RestCall): Promise<{ workspaceId: string; list: QuotaReport[] }> {
  const workspaceId = workspaceOf(call, queryString(call, "workspace_id"));
  const list = (await call.deps.limits?.report(workspaceId)) ?? [];
  return { workspaceId, list };
}

async function listQuotas(call: RestCall): Promise<RestResponse> {
  const { workspaceId, list } = await reports(call);
  return ok(
    listJson(
      list.map((q) => quotaToHarn(q, workspaceId)),
      { hasMore: false },
    ),
  );
}

async function getQuota(call: RestCall): Promise<RestResponse> {
  const id = param(call, "quota_id");
  const { workspaceId, list } = await reports(call);
  const found = list.find((q) => q.id === id);
  if (found === undefined) throw errors.notFound("quota", id);
  return ok(quotaToHarn(found, workspaceId));
}

export const quotaRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/quotas", scope: "workspaces:read", handle: listQuotas },
  { method: "GET", path: "/v1/quotas/{quota_id}", scope: "workspaces:read", handle: getQuota },
];
