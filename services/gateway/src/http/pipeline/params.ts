/**
 * Stage `params`: path parameters and query values are text that ends up in
 * lookups: refuse NUL and other control characters (no id or cursor has
 * them, and PostgreSQL cannot even compare a NUL) with 400 naming the
 * parameter.
 */
import { TrellisError } from "@trellis/runtime";
import type { Stage } from "./stage.js";

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const control = /[\u0000-\u001f\u007f]/;

export const paramsStage: Stage = (next) => async (exchange) => {
  const { params, query } = exchange.call;
  for (const [name, value] of Object.entries(params)) {
    if (control.test(value)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: `path parameter ${name} contains a control character`,
        param: name,
      });
    }
  }
  for (const [name, value] of query) {
    if (control.test(value) || control.test(name)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: `query parameter ${JSON.stringify(name.slice(0, 64))} contains a control character`,
        param: name.slice(0, 64),
      });
    }
  }
  return next(exchange);
};
