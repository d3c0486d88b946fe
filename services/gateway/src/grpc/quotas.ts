/**
 * `trellis.gateway.v1.QuotaService`: the quotas that apply to the caller's
 * workspace and their usage, as `GET /v1/quotas` reports them. The gateway
 * enforces them, so it serves them (both modes).
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { type Quota, QuotaSchema, QuotaService } from "@trellis/contracts/gateway";
import { callerOf } from "@trellis/platform";
import { errors } from "@trellis/runtime";
import { isAdmin } from "../domain/scopes.js";
import {
  type QuotaReport,
  quotaExhaustion,
  quotaLimitName,
  type RequestLimits,
} from "../quota/limits.js";

function toQuota(q: QuotaReport, workspaceId: string): Quota {
  return create(QuotaSchema, {
    id: q.id,
    workspaceId,
    scope: q.scope,
    name: quotaLimitName(q),
    limit: q.limit,
    usage: q.used,
    resetAt: timestampFromDate(q.resetAt),
    hardLimit: q.hard,
    exhaustionReason: quotaExhaustion(q) ?? "",
  });
}

/** The quotas of the workspace the call acts in (another one only for admin keys). */
async function reports(
  limits: RequestLimits,
  context: HandlerContext,
  requested: string,
): Promise<{ workspaceId: string; list: QuotaReport[] }> {
  const caller = callerOf(context);
  if (!caller) throw errors.invalid("no caller: quotas are read through the gateway");
  let workspaceId = caller.workspaceId;
  if (requested && requested !== caller.workspaceId) {
    if (!isAdmin(caller.scopes)) throw errors.notFound("workspace", requested);
    workspaceId = requested;
  }
  const own = workspaceId === caller.workspaceId ? caller.actorId : undefined;
  return { workspaceId, list: await limits.report(workspaceId, own) };
}

/** Register the service on the gateway's router. */
export function registerQuotaService(router: ConnectRouter, limits: RequestLimits): void {
  router.service(QuotaService, {
    async listQuotas(request, context) {
      const { workspaceId, list } = await reports(limits, context, request.workspaceId);
      return { quotas: list.map((q) => toQuota(q, workspaceId)) };
    },
    async getQuota(request, context) {
      const { workspaceId, list } = await reports(limits, context, "");
      const found = list.find((q) => q.id === request.quotaId);
      if (!found) throw errors.notFound("quota", request.quotaId);
      return { quota: toQuota(found, workspaceId) };
    },
  });
}
