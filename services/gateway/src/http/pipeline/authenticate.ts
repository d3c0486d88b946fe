/**
 * Stage `authenticate`: every route but a public one needs a valid
 * credential (401, or 429 / 503 when attempts are throttled or the check
 * cannot be made); the caller it names becomes the call's caller.
 */
import type { Authenticator } from "../../auth/authenticator.js";
import { authRefusal } from "../../auth/authenticator.js";
import { type ClientSourceOf, sourceOf } from "../../auth/client-source.js";
import { errorResponse } from "../io.js";
import { requestHeader, type Stage } from "./stage.js";

/** `clientSource`: whose failures count toward the throttle (the peer, or a trusted proxy's client). */
export function authenticateStage(
  authenticator: Pick<Authenticator, "authenticate">,
  clientSource?: ClientSourceOf,
): Stage {
  return (next) => async (exchange) => {
    if (exchange.route.scope === "public") return next(exchange);
    const { call } = exchange;
    const auth = await authenticator.authenticate(
      requestHeader(call.req, "authorization"),
      sourceOf({ clientSource }, call.req),
    );
    if (!auth.ok) {
      return errorResponse(authRefusal(auth.failure, call.requestId, auth.retryAfterSeconds));
    }
    call.caller = auth.caller;
    return next(exchange);
  };
}
