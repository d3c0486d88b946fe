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
import type { DispatchOutcome, DispatchPlan } from "./router.js";

/** What both dispatchers keep of an execution; each adds how it reaches its worker. */
export interface PendingExecution {
  plan: DispatchPlan;
  attempt: number;
  state: "queued" | "running" | "done";
  /** The worker whose claim was granted (running only). */
  workerId?: string;
  /** When the current attempt was offered to a worker (queued only). */
  offeredAt?: number;
  /** Since when no live worker could take it (queued only). */
  orphanedSince?: number;
  /** When `maxElapsedMs` runs out (epoch ms), if the agent has a limit. */
  deadline?: number;
  limitMs?: number;
  /** The deadline passed: a late "cancelled" from the worker is a timeout. */
  timedOut?: boolean;
  timers: NodeJS.Timeout[];
  /** Listens to the caller's signal while the execution is pending. */
  onAbort(): void;
  resolve(outcome: DispatchOutcome): void;
}

/**
 * An execution dispatched now: queued for its first attempt, with the
 * deadline of the agent's `maxElapsedMs` (none without one).
 */
export function queuedExecution<Plan extends DispatchPlan>(
  plan: Plan,
  resolve: (outcome: DispatchOutcome) => void,
  onAbort: () => void,
): PendingExecution & { plan: Plan } {
  const limitMs = effectiveRequirements(plan.request).maxElapsedMs;
  return {
    plan,
    attempt: 1,
    state: "queued",
    resolve,
    timers: [],
    onAbort,
    ...(limitMs !== undefined ? { deadline: Date.now() + limitMs, limitMs } : {}),
  };
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
  pending: PendingExecution,
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
