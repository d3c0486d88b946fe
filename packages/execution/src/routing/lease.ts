/**
 * The lease rules every remote dispatcher shares (JetStream workers and gRPC
 * workers alike): what happens to an execution whose worker was lost, and the
 * fence a worker's message must pass to count.
 */
import type { ExecutionResult } from "@trellis/adapter-sdk";
import type { Logger } from "@trellis/runtime";
import type { DispatchPlan } from "./router.js";

/** A `failed` result of the router itself. */
export function routerFailure(
  category: string,
  message: string,
  retryable: boolean,
): ExecutionResult {
  return { status: "failed", messages: [], category, message, retryable };
}

/** What to do with an execution whose worker was lost mid-run. */
export type LostWorkerDecision = { retry: true } | { retry: false; result: ExecutionResult };

/**
 * Run it again (attempt + 1) when the agent is safe to retry and attempts
 * are left (logged: the caller places it again); else it fails with
 * `worker_lost` (not retryable: the turn may have had effects).
 */
export function afterLostWorker(
  pending: { plan: DispatchPlan; attempt: number },
  worker: { workerId: string; backendId: string },
  maxAttempts: number,
  logger: Logger | undefined,
): LostWorkerDecision {
  const { workerId, backendId } = worker;
  const { attempt } = pending;
  const safeToRetry = pending.plan.request.agent.safeToRetry === true;
  if (safeToRetry && attempt < maxAttempts) {
    logger?.warn("worker lost mid-execution; running it again elsewhere", {
      execution_id: pending.plan.executionId,
      worker_id: workerId,
      attempt: attempt + 1,
    });
    return { retry: true };
  }
  return {
    retry: false,
    result: routerFailure(
      "worker_lost",
      safeToRetry
        ? `worker ${workerId} of backend ${backendId} was lost mid-execution, and ${maxAttempts} attempts are used up`
        : `worker ${workerId} of backend ${backendId} stopped responding mid-execution; the agent is not marked safe to retry, so it was not run again`,
      false,
    ),
  };
}

/** The fence: a worker's message counts only for the attempt it holds now. */
export function holdsAttempt(
  pending: { state: string; attempt: number; workerId?: string | undefined } | undefined,
  attempt: number,
  workerId: string,
): boolean {
  return (
    pending?.state === "running" && pending.attempt === attempt && pending.workerId === workerId
  );
}

/**
 * A queued execution whose backend has no live worker now: it waits, from
 * the first check that saw none, up to `unavailableAfterMs`; then it fails
 * with `backend_unavailable` (retryable). Undefined while it may wait.
 */
export function unavailableBackend(
  pending: { orphanedSince?: number | undefined },
  backendId: string,
  now: number,
  unavailableAfterMs: number,
): ExecutionResult | undefined {
  pending.orphanedSince ??= now;
  if (now - pending.orphanedSince < unavailableAfterMs) return undefined;
  return routerFailure(
    "backend_unavailable",
    `backend ${backendId} has had no live worker for ${unavailableAfterMs} ms`,
    true,
  );
}
