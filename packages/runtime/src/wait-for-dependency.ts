/**
 * Waiting at start for a dependency (PostgreSQL, NATS) that is not up yet: a
 * dependency that restarts or starts later than us is normal in Kubernetes,
 * not a crash, so the process retries and says what it waits for.
 *
 * | case | what happens |
 * |---|---|
 * | `attempt` fails | logged (`waiting for <what>`) and tried again after 100 ms, 200 ms, … (at most 2 s apart) |
 * | `attempt` fails and `permanent(error)` says no wait can fix it (say, a missing database) | that error, at once |
 * | the next try would start after `timeoutMs` | `service_unavailable`: "<what> was not reachable within N s: <last error>" |
 * | `signal` aborts (a shutdown during start) | an error "stopped while waiting for <what>", at once |
 */
import { TrellisError } from "./errors.js";
import type { Logger } from "./logger.js";
import { sleep } from "./sleep.js";

/** Options of {@link waitForDependency}. */
export interface WaitForDependencyOptions {
  /** How long to keep trying from the first attempt. */
  timeoutMs: number;
  logger: Pick<Logger, "warn">;
  /** Gives up waiting when it aborts (none: wait until the timeout). */
  signal?: AbortSignal;
  /** True for an error that waiting will not fix: it is thrown as it is, without retrying. */
  permanent?(error: unknown): boolean;
}

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 2_000;

/** Retry `attempt` with backoff until it succeeds, `timeoutMs` passes or `signal` aborts. */
export async function waitForDependency<T>(
  what: string,
  attempt: () => Promise<T>,
  options: WaitForDependencyOptions,
): Promise<T> {
  const { timeoutMs, logger, signal, permanent } = options;
  const deadline = Date.now() + timeoutMs;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (permanent?.(error)) throw error;
      const message = error instanceof Error ? error.message : String(error);
      if (signal?.aborted) throw new Error(`stopped while waiting for ${what}`);
      if (Date.now() + delay > deadline) {
        throw new TrellisError({
          reason: "service_unavailable",
          message: `${what} was not reachable within ${Math.round(timeoutMs / 1000)} s: ${message}`,
          cause: error,
        });
      }
      logger.warn(`waiting for ${what}`, { error: message, retry_in_ms: delay });
      await sleep(delay, signal);
      if (signal?.aborted) throw new Error(`stopped while waiting for ${what}`);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}
