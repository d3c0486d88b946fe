/**
 * Authentication of gRPC / Connect / gRPC-Web calls on the public port:
 * `authorization: Bearer <api key>` on every call except health checks and
 * server reflection. The authenticated {@link Caller} is put in the call's
 * context values under `callerKey`, where `callerOf(ctx)` finds it (and where
 * it takes precedence over any `x-trellis-*` header a client might send).
 *
 * Embedded mode applies it to every route of the one server; calls between
 * services in the same process use the in-memory transport and never pass
 * through it.
 */
import type { Interceptor } from "@connectrpc/connect";
import { callerKey } from "@trellis/platform";
import { TrellisError } from "@trellis/runtime";
import { type Authenticator, authFailureMessage } from "../auth/authenticator.js";
import { hasScope, scopeForRpc } from "../domain/scopes.js";

/** RPC services that never require a key (probes and schema discovery). */
export const unauthenticatedServices: ReadonlySet<string> = new Set([
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
]);

/** Options of {@link createAuthInterceptor}. */
export interface AuthInterceptorOptions {
  authenticator: Authenticator;
}

/** The server interceptor that authenticates public RPCs. */
export function createAuthInterceptor(options: AuthInterceptorOptions): Interceptor {
  return (next) => async (req) => {
    if (unauthenticatedServices.has(req.service.typeName)) return next(req);
    const result = await options.authenticator.authenticate(req.header.get("authorization"));
    if (!result.ok) {
      throw new TrellisError({
        reason: "unauthenticated",
        message: authFailureMessage(result.failure),
        domain: "gateway",
      });
    }
    const scope = scopeForRpc(req.service.typeName, req.method.name);
    if (!hasScope(result.caller.scopes, scope)) {
      throw new TrellisError({
        reason: "permission_denied",
        message: `this API key lacks the scope ${scope}`,
        domain: "gateway",
        metadata: { scope: scope ?? "" },
      });
    }
    req.contextValues.set(callerKey, result.caller);
    return next(req);
  };
}
