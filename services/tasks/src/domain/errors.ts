/**
 * The domain errors of the tasks service: {@link TrellisError}s with the Harn
 * error codes as reasons (Agents Protocol "Error taxonomy"), mapped to Connect
 * codes by the runtime's interceptor. Check with `isTrellisError` + `reason`.
 */
import { TaskStatus } from "@trellis/contracts/core";
import { TrellisError } from "@trellis/runtime";

/** ErrorDetail.domain of every error this service raises. */
export const ERROR_DOMAIN = "tasks.trellis.dev";

/** `invalid_request`: the request is malformed; `param` names the field. */
export function invalidRequest(message: string, param?: string): TrellisError {
  return new TrellisError({
    reason: "invalid_request",
    message,
    domain: ERROR_DOMAIN,
    ...(param ? { param } : {}),
  });
}

/**
 * `resource_not_found`: absent, or in another workspace than the caller's —
 * the two are indistinguishable on purpose (never reveal existence).
 */
export function notFound(object: string, id: string): TrellisError {
  return new TrellisError({
    reason: "resource_not_found",
    message: `${object} ${JSON.stringify(id)} was not found`,
    domain: ERROR_DOMAIN,
    metadata: { object, id },
  });
}

/** `invalid_state_transition`: the task lifecycle forbids `from → to`. */
export function invalidTransition(from: TaskStatus, to: TaskStatus, taskId?: string): TrellisError {
  return new TrellisError({
    reason: "invalid_state_transition",
    message: `a task cannot go from ${TaskStatus[from]} to ${TaskStatus[to]}`,
    domain: ERROR_DOMAIN,
    metadata: {
      from: TaskStatus[from] ?? String(from),
      to: TaskStatus[to] ?? String(to),
      ...(taskId ? { task_id: taskId } : {}),
    },
  });
}

/** `conflict` (Connect Aborted, HTTP 409): the resource's current state refuses the request. */
export function conflict(message: string, metadata: Record<string, string> = {}): TrellisError {
  return new TrellisError({ reason: "conflict", message, domain: ERROR_DOMAIN, metadata });
}

/** `idempotency_key_reused`: the key was used before with a different request body. */
export function idempotencyKeyReused(key: string): TrellisError {
  return new TrellisError({
    reason: "idempotency_key_reused",
    message: "this idempotency key was already used with a different request",
    domain: ERROR_DOMAIN,
    param: "idempotency_key",
    metadata: { idempotency_key: key },
  });
}

/** `permission_denied`: the caller may not do this (e.g. act outside its workspace). */
export function permissionDenied(message: string): TrellisError {
  return new TrellisError({ reason: "permission_denied", message, domain: ERROR_DOMAIN });
}

/** `agent_definition_invalid`: an agent's backend or definition was refused. */
export function agentDefinitionInvalid(message: string, param: string): TrellisError {
  return new TrellisError({
    reason: "agent_definition_invalid",
    message,
    domain: ERROR_DOMAIN,
    param,
  });
}

/** `payload_too_large`: content above the configured limit. */
export function payloadTooLarge(message: string, param: string): TrellisError {
  return new TrellisError({ reason: "payload_too_large", message, domain: ERROR_DOMAIN, param });
}
