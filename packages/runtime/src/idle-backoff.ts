/**
 * Back-off of a background poll while it finds nothing to do, so an idle
 * process does not wake every interval. A poll that finds work, or work that
 * arrives by another way (`reset()`), brings the wait back to the base
 * interval at once: a long wait in progress is cut to what is left of the
 * base interval, so a busy process polls exactly as often as before.
 *
 * @example
 *   const backoff = new IdleBackoff({ baseMs: 1000, maxMs: 16_000 });
 *   while (!stop.aborted) {
 *     await backoff.wait(stop);
 *     if (await sweep()) backoff.reset(); else backoff.idle();
 *   }
 */

/** Options of {@link IdleBackoff}. */
export interface IdleBackoffOptions {
  /** The wait while there is work (the poll's usual interval). */
  baseMs: number;
  /** The longest wait while idle (at least `baseMs`). */
  maxMs: number;
  /** How much the wait grows per idle round (default 2). */
  factor?: number;
  /** The wait's timer does not keep the process alive (default false). */
  unref?: boolean;
}

interface PendingWait {
  startedAt: number;
  endsAt: number;
  timer: NodeJS.Timeout;
  done: () => void;
}

/** The growing wait of one polling loop (not shared between loops). */
export class IdleBackoff {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly #factor: number;
  readonly #unref: boolean;
  #delayMs: number;
  #pending: PendingWait | undefined;

  constructor(options: IdleBackoffOptions) {
    const { baseMs, maxMs, factor = 2 } = options;
    if (!Number.isFinite(baseMs) || baseMs < 0) {
      throw new RangeError(`IdleBackoff baseMs must be a number ≥ 0, not ${baseMs}`);
    }
    if (!Number.isFinite(maxMs) || maxMs < baseMs) {
      throw new RangeError(`IdleBackoff maxMs must be ≥ baseMs (${baseMs}), not ${maxMs}`);
    }
    if (!Number.isFinite(factor) || factor < 1) {
      throw new RangeError(`IdleBackoff factor must be ≥ 1, not ${factor}`);
    }
    this.baseMs = baseMs;
    this.maxMs = maxMs;
    this.#factor = factor;
    this.#unref = options.unref ?? false;
    this.#delayMs = baseMs;
  }

  /** The wait the next `wait()` will take. */
  get delayMs(): number {
    return this.#delayMs;
  }

  /** A round found nothing: the next wait is longer (up to `maxMs`). */
  idle(): void {
    // A base of 0 would never grow by multiplying: start from 1 ms.
    this.#delayMs = Math.min(this.maxMs, Math.max(1, this.#delayMs) * this.#factor);
  }

  /**
   * There is work: back to the base interval. A wait in progress ends at most
   * `baseMs` after it started (at once if that time has passed).
   */
  reset(): void {
    this.#delayMs = this.baseMs;
    const pending = this.#pending;
    if (!pending) return;
    const endsAt = pending.startedAt + this.baseMs;
    if (endsAt >= pending.endsAt) return;
    clearTimeout(pending.timer);
    pending.endsAt = endsAt;
    pending.timer = this.#timer(pending.done, Math.max(0, endsAt - Date.now()));
  }

  #timer(fn: () => void, ms: number): NodeJS.Timeout {
    const timer = setTimeout(fn, ms);
    if (this.#unref) timer.unref();
    return timer;
  }

  /**
   * Wait the current delay, or less if `reset()` is called meanwhile or
   * `signal` aborts. Never rejects; leaves no timer behind.
   */
  wait(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const startedAt = Date.now();
      const done = () => {
        if (this.#pending !== pending) return;
        clearTimeout(pending.timer);
        this.#pending = undefined;
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const pending: PendingWait = {
        startedAt,
        endsAt: startedAt + this.#delayMs,
        timer: this.#timer(() => done(), this.#delayMs),
        done: () => done(),
      };
      // One wait at a time per loop: a second caller replaces the first's
      // (which then ends at once rather than hang).
      this.#pending?.done();
      this.#pending = pending;
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}
