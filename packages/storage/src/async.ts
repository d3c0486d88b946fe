/**
 * Small async helpers shared by the dialects and the relay (internal; not
 * re-exported from the package index).
 */

/** Rejects with `onTimeout()` when `promise` has not settled after `ms`. */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export { sleep } from "@trellis/runtime";

/** The error a signal aborted with, as an Error. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason ?? "aborted"));
}

/**
 * Runs tasks one after another, in call order. A `pg` client must not be
 * given a second query while one runs (deprecated in pg 8, an error in 9).
 */
export function createSerialQueue(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (task) => {
    const run = tail.then(task);
    tail = run.catch(() => {});
    return run;
  };
}
