/**
 * The lease rules every remote dispatcher shares (JetStream workers and gRPC
 * workers alike): what happens to an execution whose worker was lost, and the
 * fence a worker's message must pass to count.
 */
import type { ExecutionResult } from "@trellis/adapter-sdk";

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
 * are left; else it fails with `worker_lost` (not retryable: the turn may
 * have had effects).
 */
export function afterLostWorker(options: {
  safeToRetry: boolean;
  attempt: number;
  maxAttempts: number;
  workerId: string;
  backendId: string;
}): LostWorkerDecision {
  const { safeToRetry, attempt, maxAttempts, workerId, backendId } = options;
  if (safeToRetry && attempt < maxAttempts) return { retry: true };
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
