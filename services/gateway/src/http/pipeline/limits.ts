/**
 * Stage `limits`: rate limits and hard quotas (`../../quota/limits.ts`) run
 * before the route's work and settle after it (a task that did not start
 * gives its quota unit back). No limits configured: the stage is a no-op.
 */
import type { RouteLimits } from "../context.js";
import type { Stage } from "./stage.js";

export function limitsStage(limits: Pick<RouteLimits, "limit"> | undefined): Stage {
  if (limits === undefined) return (next) => next;
  return (next) => (exchange) => limits.limit(exchange.route, exchange.call, () => next(exchange));
}
