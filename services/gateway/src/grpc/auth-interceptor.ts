/**
 * Authorization of gRPC / Connect / gRPC-Web calls on the public port, unary
 * and streaming alike: every method's rule comes from `auth/scope-table.ts`.
 * Health checks and server reflection are `public` there; every other method
 * needs `authorization: Bearer <api key or access token>` and the scope its
 * rule names (a method without a rule, or an `internal` one, is refused).
 *
 * The authenticated {@link Caller} is put in the call's context values under
 * `callerKey`, where `callerOf(ctx)` finds it, so `x-trellis-*` headers a
 * client sends never count. Embedded mode applies this to every route of the
 * one server; calls between services in the same process use the in-memory
 * transport and never pass through it.
 */
import type { Interceptor } from "@connectrpc/connect";
import { callerKey } from "@trellis/platform";
import { peerAddressKey, TrellisError } from "@trellis/runtime";
import { type Authenticator, authFailureMessage } from "../auth/authenticator.js";
import { type ClientSourceOf, peerSource } from "../auth/client-source.js";
import { authorize, rpcRuleOf } from "../auth/scope-table.js";

/** Options of {@link createAuthInterceptor}. */
export interface AuthInterceptorOptions {
  authenticator: Authenticator;
  /** The source a failure counts against (`auth/client-source.ts`); default the peer. */
  clientSource?: ClientSourceOf;
}

/** The server interceptor that authenticates and authorizes public RPCs. */
export function createAuthInterceptor(options: AuthInterceptorOptions): Interceptor {
  const sourceOf = options.clientSource ?? peerSource;
  return (next) => async (req) => {
    const rule = rpcRuleOf(req.service.typeName, req.method.name);
    if (rule === "public") return next(req);
    const result = await options.authenticator.authenticate(
      req.header.get("authorization"),
      sourceOf(req.contextValues.get(peerAddressKey), req.header.get("x-forwarded-for")),
    );
    if (!result.ok) {
      throw new TrellisError({
        reason:
          result.failure === "unavailable"
            ? "service_unavailable"
            : result.failure === "throttled"
              ? "rate_limited"
              : "unauthenticated",
        message: authFailureMessage(result.failure),
        domain: "gateway",
        ...(result.retryAfterSeconds !== undefined
          ? { metadata: { retry_after_seconds: String(result.retryAfterSeconds) } }
          : {}),
      });
    }
    const decision = authorize(result.caller.scopes, rule);
    if (!decision.allowed) {
      throw new TrellisError({
        reason: "permission_denied",
        message: decision.message,
        domain: "gateway",
        metadata: { required_scope: decision.requiredScope ?? "" },
      });
    }
    req.contextValues.set(callerKey, result.caller);
    return next(req);
  };
}
