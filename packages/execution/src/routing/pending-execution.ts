/**
 * What both remote dispatchers (JetStream and the embedded gRPC worker hub)
 * keep of an execution from dispatch to its end: its deadline and the
 * caller's cancel, the `routed` event of a granted claim, and what a late
 * result means once the deadline passed.
 */
import {
  type ExecutionNegotiation,
  type ExecutionResult,
  effectiveRequirements,
  timeoutResult,
} from "@trellis/adapter-sdk";
import type { DispatchPlan } from "./router.js";

/** The part of a dispatcher's pending execution this module reads. */
export interface PendingExecution {
  plan: DispatchPlan;
  /** When `maxElapsedMs` runs out (epoch ms), if the agent has a limit. */
  deadline?: number;
  limitMs?: number;
  /** The deadline passed: a late "cancelled" from the worker is a timeout. */
  timedOut?: boolean;
  timers: NodeJS.Timeout[];
  /** Listens to the caller's signal while the execution is pending. */
  onAbort(): void;
}

/** The deadline of a plan dispatched now: none when the agent sets no `maxElapsedMs`. */
export function deadlineOf(plan: DispatchPlan): { deadline?: number; limitMs?: number } {
  const limitMs = effectiveRequirements(plan.request).maxElapsedMs;
  return limitMs !== undefined ? { deadline: Date.now() + limitMs, limitMs } : {};
}

/**
 * Start watching the execution's deadline (`onDeadline` when it passes) and
 * its caller's cancel (`onAbort`). False, and no cancel listener, when the
 * caller had canceled already: the dispatcher ends it as cancelled at once.
 */
export function watchDeadlineAndCancel(pending: PendingExecution, onDeadline: () => void): boolean {
  if (pending.deadline !== undefined) {
    pending.timers.push(setTimeout(onDeadline, Math.max(0, pending.deadline - Date.now())));
  }
  const { signal } = pending.plan.request;
  if (signal.aborted) return false;
  signal.addEventListener("abort", pending.onAbort, { once: true });
  return true;
}

/** Stop the timers and the cancel listener of an execution that ended. */
export function stopWatching(pending: PendingExecution): void {
  for (const timer of pending.timers) clearTimeout(timer);
  pending.timers = [];
  pending.plan.request.signal.removeEventListener("abort", pending.onAbort);
}

/**
 * Tell the caller where its execution runs now that a worker's claim was
 * granted: the `routed` event, with the router's and the worker's
 * non-blocking reasons (each once), degraded when either negotiation was.
 */
export function emitRouted(
  pending: PendingExecution & { attempt: number },
  workerId: string,
  negotiation: ExecutionNegotiation,
): void {
  const router = pending.plan.negotiation;
  const reasons = [...router.reasons, ...negotiation.reasons].filter(
    (r, i, all) =>
      r.severity !== "blocking" &&
      all.findIndex((o) => o.code === r.code && o.message === r.message) === i,
  );
  pending.plan.emit({
    kind: "routed",
    backendId: pending.plan.view.backendId,
    workerId,
    attempt: pending.attempt,
    degraded: router.degraded || negotiation.degraded,
    reasons,
  });
}

/** The result of an execution its caller canceled. */
export function cancelledResult(): ExecutionResult {
  return { status: "cancelled", messages: [] };
}

/** The worker's result as the caller gets it: "cancelled" after the deadline passed is the timeout. */
export function resultAfterDeadline(
  pending: PendingExecution,
  result: ExecutionResult,
): ExecutionResult {
  return pending.timedOut && result.status === "cancelled"
    ? timeoutResult(pending.limitMs ?? 0, result.messages)
    : result;
}
