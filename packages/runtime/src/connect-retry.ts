/**
 * Retry of unary service-to-service calls whose connection was refused.
 *
 * A refused connection means no byte of the request reached the server, so
 * the call can be sent again whatever the method does — it cannot run twice.
 * This covers the windows when a dependency is starting or restarting (a
 * mesh brought up in any order, a pod rescheduled, a process after kill -9):
 * the caller waits a bounded time instead of answering `Unavailable` at once.
 *
 * | case | what happens |
 * |---|---|
 * | unary call, `ECONNREFUSED` anywhere in the cause chain | sent again after 25 ms, 50 ms, … (at most 1 s apart) until it goes through or `budgetMs` has passed since the first try |
 * | budget spent, or the call's signal aborted while waiting | the last error, unchanged |
 * | streaming call | never retried (its request stream cannot be replayed) |
 * | any other error (reset, timeout, an answer from the server) | never retried: the request may have been delivered |
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { sleep } from "./sleep.js";

/** Default time a unary call keeps trying a refused connection. */
export const CONNECT_RETRY_BUDGET_MS = 5_000;

const FIRST_DELAY_MS = 25;
const MAX_DELAY_MS = 1_000;

/** True when `error` is a refused connection (nothing was sent). */
export function isConnectionRefused(error: unknown): boolean {
  if (!(error instanceof ConnectError) || error.code !== Code.Unavailable) return false;
  let cause: unknown = error.cause;
  for (let depth = 0; depth < 8 && cause !== undefined && cause !== null; depth += 1) {
    if (typeof cause === "object" && (cause as { code?: unknown }).code === "ECONNREFUSED") {
      return true;
    }
    if (cause instanceof AggregateError && cause.errors.some(isRefusedNodeError)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

function isRefusedNodeError(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as { code?: unknown }).code === "ECONNREFUSED"
  );
}

/**
 * An interceptor that sends a unary call again while its connection is
 * refused, for at most `budgetMs` (0 turns it off).
 */
export function createConnectRetryInterceptor(
  budgetMs: number = CONNECT_RETRY_BUDGET_MS,
): Interceptor {
  return (next) => async (req) => {
    if (req.stream || budgetMs <= 0) return next(req);
    const deadline = Date.now() + budgetMs;
    let delay = FIRST_DELAY_MS;
    for (;;) {
      try {
        return await next(req);
      } catch (error) {
        const left = deadline - Date.now();
        if (!isConnectionRefused(error) || left <= 0 || req.signal.aborted) throw error;
        await sleep(Math.min(delay, left), req.signal);
        if (req.signal.aborted) throw error;
        delay = Math.min(delay * 2, MAX_DELAY_MS);
      }
    }
  };
}
