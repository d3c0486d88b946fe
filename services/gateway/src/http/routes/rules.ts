/**
 * The REST authorization table, derived: each route declares its rule once,
 * as its `scope` (`index.ts` and the route files), and this is that
 * declaration by `"<METHOD> <path pattern>"`, with the OAuth endpoints
 * (served outside the REST router, public: the client authenticates in the
 * request itself, RFC 6749 §4.4). The WebSocket channel's command frames and
 * the A2A surface look rules up here; the REST pipeline reads `route.scope`.
 */
import { jwksPath, tokenPath } from "../../auth/oauth-endpoint.js";
import type { Rule } from "../../auth/scope-table.js";
import { restRoutes } from "./index.js";

/** The routes served outside the REST router, with their rules. */
export const oauthRoutes: readonly { method: string; path: string; scope: Rule }[] = [
  { method: "POST", path: tokenPath, scope: "public" },
  { method: "GET", path: jwksPath, scope: "public" },
];

/** Every REST route's rule, keyed `"<METHOD> <path pattern>"`. */
export const restRules: Readonly<Record<string, Rule>> = Object.fromEntries(
  [...restRoutes, ...oauthRoutes].map((route) => [`${route.method} ${route.path}`, route.scope]),
);

/** The rule of a REST route (by its path pattern); undefined when it has none. */
export function restRuleOf(method: string, pathPattern: string): Rule | undefined {
  return Object.hasOwn(restRules, `${method} ${pathPattern}`)
    ? restRules[`${method} ${pathPattern}`]
    : undefined;
}
