/**
 * Stage `authorize`: the caller must satisfy the route's rule, its `scope`
 * (403 `permission_denied`, with an `insufficient_scope` challenge naming
 * the scope when one would do). Workspace membership is checked later, on
 * the resource itself (404, never 403).
 */
import { authorize } from "../../auth/scope-table.js";
import { harnError } from "../../domain/errors.js";
import { errorResponse } from "../io.js";
import type { Stage } from "./stage.js";

export const authorizeStage: Stage = (next) => async (exchange) => {
  const { route, call } = exchange;
  if (route.scope === "public") return next(exchange);
  const decision = authorize(call.caller.scopes, route.scope);
  if (decision.allowed) return next(exchange);
  const scope = decision.requiredScope;
  return errorResponse(
    harnError("permission_denied", decision.message, {
      requestId: call.requestId,
      details: { required_scope: scope ?? "" },
      ...(scope && scope !== "*"
        ? {
            headers: {
              "www-authenticate": `Bearer realm="trellis", error="insufficient_scope", scope="${scope}"`,
            },
          }
        : {}),
    }),
  );
};
