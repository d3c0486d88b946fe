/**
 * Resolves after `ms`, or as soon as one of `signals` aborts; never rejects
 * (callers re-check their own state after waking up). Leaves no timer or
 * abort listener behind either way, so it is safe in long-lived loops.
 */
export function sleep(ms: number, ...signals: (AbortSignal | undefined)[]): Promise<void> {
  return new Promise((resolve) => {
    const live = signals.filter((s): s is AbortSignal => s !== undefined);
    if (live.some((s) => s.aborted)) return resolve();
    const done = () => {
      clearTimeout(timer);
      for (const s of live) s.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const s of live) s.addEventListener("abort", done, { once: true });
  });
}
