/**
 * The limits of `limits.ts` for gRPC / Connect / gRPC-Web calls on the public
 * port: runs after the auth interceptor (which put the caller in the call's
 * context values). Writes (methods whose rule in `auth/scope-table.ts` is a
 * `*:write` scope or `admin`) count against the actor and workspace rates;
 * task submissions (TaskService.SubmitTask, ChatService.Send /
 * SendStreaming) also against the agent rate and the daily task quota, given
 * back when the call fails. Refusals are TrellisErrors: `rate_limited`
 * (ResourceExhausted, with `retry_after_seconds`) and `policy_violation`.
 */

import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { SessionService } from "@trellis/contracts/tasks";
import { callerKey, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import { requestIdHeader, TrellisError } from "@trellis/runtime";
import { rpcRuleOf } from "../auth/scope-table.js";
import type { GuardedOperation, RequestLimits } from "./limits.js";

const taskMethods = new Set([
  "trellis.tasks.v1.TaskService/SubmitTask",
  "trellis.chat.v1.ChatService/Send",
  "trellis.chat.v1.ChatService/SendStreaming",
]);

function field(message: unknown, name: string): string | undefined {
  if (message === null || typeof message !== "object") return undefined;
  const value = (message as Record<string, unknown>)[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

export function createLimitsInterceptor(
  limits: RequestLimits,
  clients: ServiceClients,
): Interceptor {
  return (next) => async (req) => {
    const rule = rpcRuleOf(req.service.typeName, req.method.name);
    // A connector delivery writes (it makes a task) though its scope is not `*:write`.
    const isWrite =
      rule === "admin" ||
      rule === "connectors:deliver" ||
      (typeof rule === "string" && rule.endsWith(":write"));
    const caller = req.contextValues.get(callerKey);
    if (caller === undefined) return next(req);
    if (!isWrite && limits.config.reads === undefined) return next(req);
    const name = `${req.service.typeName}/${req.method.name}`;
    const message = req.stream ? undefined : req.message;
    const operation: GuardedOperation = !isWrite
      ? { kind: "read" }
      : taskMethods.has(name)
        ? {
            kind: "task",
            sessionId: field(message, "sessionId"),
            agentId: field(message, "agentId"),
          }
        : { kind: "write" };
    const requestId = req.header.get(requestIdHeader) ?? "";
    const admission = await limits.admit(caller, requestId, operation, async (sessionId) => {
      const headers = new Headers();
      setCallerHeaders(headers, caller);
      try {
        const { session } = await clients
          .get(SessionService)
          .getSession({ sessionId }, { headers });
        return session?.agentId ?? "";
      } catch (error) {
        // A session that does not exist yet is the new-session path (the chat
        // handler creates it with the workspace default agent): not this
        // interceptor's error to give. The actor and workspace rates still apply.
        if (ConnectError.from(error).code === Code.NotFound) return "";
        throw error;
      }
    });
    if (!admission.ok) {
      const { error } = admission.refusal.body;
      throw new TrellisError({
        reason: error.code,
        message: error.message,
        domain: "gateway",
        metadata: Object.fromEntries(Object.entries(error.details).map(([k, v]) => [k, String(v)])),
      });
    }
    let started = false;
    try {
      const response = await next(req);
      started = true;
      return response;
    } finally {
      await admission.settle(started);
    }
  };
}
