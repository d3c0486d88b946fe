/**
 * Stage `body`: a write's JSON body (POST, PUT, PATCH) is read and parsed
 * into the call, bounded in size (413) and structure (400); other methods
 * have none.
 */
import { type JsonBodyLimits, readJsonBody } from "../io.js";
import type { Stage } from "./stage.js";

const withBody = new Set(["POST", "PUT", "PATCH"]);

export function bodyStage(limits: JsonBodyLimits): Stage {
  return (next) => async (exchange) => {
    const { call } = exchange;
    if (withBody.has(call.req.method ?? "")) call.body = await readJsonBody(call.req, limits);
    return next(exchange);
  };
}
