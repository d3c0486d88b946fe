/** Session health: a projection of the log judged against the session's health policy. */

export { healthOfEvaluation, sessionHealth, streamSessionHealth } from "./monitor.js";
export {
  DEFAULT_STUCK_AFTER_SECONDS,
  type HealthAction,
  type HealthPolicy,
  healthPolicyOf,
  policyJson,
} from "./policy.js";
export {
  ENFORCEMENT_REASON_PREFIX,
  type HealthBreach,
  type HealthEvaluation,
  HealthTracker,
} from "./tracker.js";
