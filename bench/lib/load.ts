/**
 * Load generation and statistics for the turn benchmarks: N workers call `op`
 * in a closed loop for a fixed time; latencies are kept per call.
 */

/** What one load window measured. */
export interface LoadResult {
  calls: number;
  errors: number;
  /** The first failure, for a report to show what the errors were. */
  firstError?: unknown;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** The q-quantile (0..1) of `values` (nearest rank). */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Median of a list. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/**
 * Run `op` with `concurrency` workers for `durationMs`. `op(worker, i)` gets the
 * worker index (so each worker can own a session) and its call counter.
 */
export async function runLoad(
  op: (worker: number, call: number) => Promise<void>,
  options: { concurrency: number; durationMs: number },
): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: unknown;
  const start = performance.now();
  const deadline = start + options.durationMs;
  await Promise.all(
    Array.from({ length: options.concurrency }, async (_, worker) => {
      for (let call = 0; performance.now() < deadline; call++) {
        const t0 = performance.now();
        try {
          await op(worker, call);
          latencies.push(performance.now() - t0);
        } catch (error) {
          errors++;
          firstError ??= error;
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  if (errors > 0 && latencies.length === 0) throw firstError;
  return {
    calls: latencies.length,
    errors,
    firstError,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
  };
}
