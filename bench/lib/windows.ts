/**
 * Measured windows of several modes on a loaded machine: the modes take turns
 * round by round (so the machine's drift falls on all of them alike) and each
 * mode's point is the median of its windows, field by field.
 */
import { median } from "./load.js";

/** Each numeric field's median over the windows of one point. */
export function medians<T extends Record<string, number>>(windows: readonly T[]): T {
  const first = windows[0];
  if (first === undefined) throw new Error("medians of no windows");
  const out: Record<string, number> = {};
  for (const key of Object.keys(first)) out[key] = median(windows.map((w) => w[key] as number));
  return out as T;
}

/**
 * `rounds` windows of every mode, the modes alternating within each round;
 * each mode's medians, in the order of `modes`.
 */
export async function alternatingMedians<M, T extends Record<string, number>>(
  modes: readonly M[],
  rounds: number,
  measure: (mode: M) => Promise<T>,
): Promise<{ mode: M; point: T }[]> {
  const windows = modes.map(() => [] as T[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, mode] of modes.entries()) windows[i]?.push(await measure(mode));
  }
  return modes.map((mode, i) => ({ mode, point: medians(windows[i] ?? []) }));
}
