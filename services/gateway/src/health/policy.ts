/**
 * A session's health policy: the operator budgets its health is judged by,
 * and what happens when one is crossed. It lives on the session itself, in
 * `metadata.health_policy` (set when the session is created), so it travels
 * with the session in both modes and needs no table of its own.
 *
 * ```json
 * { "health_policy": {
 *     "stuck_after_seconds": 120,   // a running turn with no event for this long is `stuck`
 *     "max_runtime_minutes": 30,    // summed turn time
 *     "max_tokens": 200000,         // model-reported input + output tokens
 *     "max_cost_usd": 5,
 *     "max_failed_tool_calls": 10,
 *     "max_loop_warnings": 3,       // the same tool with the same arguments three times in a row
 *     "min_score": 20,
 *     "action": "cancel_turn"       // or "flag_only"
 * } }
 * ```
 *
 * `cancel_turn` pauses the session's work the way the tasks service supports
 * cleanly: the running (or waiting) turn is canceled with a `health policy:`
 * reason, which the log keeps; the session stays open for the operator's next
 * message. Every limit is optional; 80 % of a limit raises `budget_pressure`.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { errors } from "@trellis/runtime";

/** What crossing a limit does. */
export type HealthAction = "cancel_turn" | "flag_only";

/** A session's health policy (see the module comment). */
export interface HealthPolicy {
  stuckAfterSeconds: number;
  maxRuntimeMinutes?: number;
  maxTokens?: number;
  maxCostUsd?: number;
  maxFailedToolCalls?: number;
  maxLoopWarnings?: number;
  minScore?: number;
  action: HealthAction;
}

/** Without a policy: only the stuck detector, nothing enforced. */
export const DEFAULT_STUCK_AFTER_SECONDS = 120;

const limitFields = {
  max_runtime_minutes: "maxRuntimeMinutes",
  max_tokens: "maxTokens",
  max_cost_usd: "maxCostUsd",
  max_failed_tool_calls: "maxFailedToolCalls",
  max_loop_warnings: "maxLoopWarnings",
  min_score: "minScore",
} as const;

const known = new Set<string>(["stuck_after_seconds", "action", ...Object.keys(limitFields)]);

function positive(value: JsonValue | undefined, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw errors.invalid(
      `health_policy.${field} must be a non-negative number, got ${JSON.stringify(value)}`,
      `metadata.health_policy.${field}`,
    );
  }
  return value;
}

/**
 * The policy in a session's metadata (defaults when it has none). A malformed
 * policy is refused with `invalid_request` naming the field, never ignored.
 */
export function healthPolicyOf(metadata: JsonObject | undefined): HealthPolicy {
  const raw = metadata?.health_policy;
  const policy: HealthPolicy = {
    stuckAfterSeconds: DEFAULT_STUCK_AFTER_SECONDS,
    action: "flag_only",
  };
  if (raw === undefined || raw === null) return policy;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw errors.invalid("metadata.health_policy must be an object", "metadata.health_policy");
  }
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) {
      throw errors.invalid(
        `health_policy has no field ${JSON.stringify(key)} (known: ${[...known].join(", ")})`,
        `metadata.health_policy.${key}`,
      );
    }
  }
  const stuck = positive(raw.stuck_after_seconds, "stuck_after_seconds");
  if (stuck !== undefined) {
    if (stuck < 1) {
      throw errors.invalid(
        "health_policy.stuck_after_seconds must be at least 1",
        "metadata.health_policy.stuck_after_seconds",
      );
    }
    policy.stuckAfterSeconds = stuck;
  }
  for (const [field, name] of Object.entries(limitFields)) {
    const value = positive(raw[field], field);
    if (value !== undefined) policy[name] = value;
  }
  if (policy.minScore !== undefined && policy.minScore > 100) {
    throw errors.invalid(
      "health_policy.min_score is at most 100",
      "metadata.health_policy.min_score",
    );
  }
  const action = raw.action;
  if (action !== undefined && action !== null) {
    if (action !== "cancel_turn" && action !== "flag_only") {
      throw errors.invalid(
        `health_policy.action must be cancel_turn or flag_only, got ${JSON.stringify(action)}`,
        "metadata.health_policy.action",
      );
    }
    policy.action = action;
  } else if (Object.keys(limitFields).some((f) => raw[f] !== undefined)) {
    // Limits without an action are meant to be enforced.
    policy.action = "cancel_turn";
  }
  return policy;
}

/** The policy as the snapshot reports it (snake_case JSON). */
export function policyJson(policy: HealthPolicy): JsonObject {
  const out: JsonObject = {
    stuck_after_seconds: policy.stuckAfterSeconds,
    action: policy.action,
  };
  for (const [field, name] of Object.entries(limitFields)) {
    const value = policy[name];
    if (value !== undefined) out[field] = value;
  }
  return out;
}
