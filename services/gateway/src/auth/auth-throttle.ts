/**
 * Throttling of failed authentication per source (the peer's IP address):
 * after `maxFailures` refused credentials within `windowMs`, every further
 * attempt from that source is answered 429 `rate_limited` with `Retry-After`
 * — without a key lookup — until the window ends. A success does not reset
 * the count (a guesser holding one good key would otherwise keep going).
 * A missing header is no guess and never counts; neither does a credential
 * that cannot be checked now (`unavailable`).
 *
 * Memory is bounded: at most `maxSources` sources are tracked; past that the
 * least recently failing one is forgotten (Map insertion order, refreshed
 * on every failure). Per process: replicas each count their own.
 */
import { type ConfigOf, env, loadConfig } from "@trellis/runtime";
import type { Authenticator, AuthResult } from "./authenticator.js";

/** Environment variables of the throttle. */
export const authThrottleSchema = {
  /** Failed authentications one source may make per window (`0`: no throttling). */
  TRELLIS_AUTH_FAILURES_PER_SOURCE: env.int({ min: 0 }).default(20),
  /** The window those failures are counted over. */
  TRELLIS_AUTH_FAILURE_WINDOW: env.duration({ minMs: 1_000, maxMs: 86_400_000 }).default(60_000),
  /** Most sources tracked at once. */
  TRELLIS_AUTH_THROTTLE_SOURCES: env.int({ min: 100 }).default(10_000),
};

/** Options of {@link AuthThrottle}. */
export interface AuthThrottleOptions {
  maxFailures: number;
  windowMs: number;
  maxSources: number;
  now?: () => number;
}

/** Read the throttle's options from an environment. */
export function authThrottleOptionsFromEnv(
  source: Readonly<Record<string, string | undefined>>,
): AuthThrottleOptions {
  const config: ConfigOf<typeof authThrottleSchema> = loadConfig(authThrottleSchema, source);
  return {
    maxFailures: config.TRELLIS_AUTH_FAILURES_PER_SOURCE,
    windowMs: config.TRELLIS_AUTH_FAILURE_WINDOW,
    maxSources: config.TRELLIS_AUTH_THROTTLE_SOURCES,
  };
}

interface Window {
  startedAt: number;
  failures: number;
}

/** Failure counts per source, in fixed windows. */
export class AuthThrottle {
  readonly #windows = new Map<string, Window>();
  readonly #o: Required<AuthThrottleOptions>;

  constructor(options: AuthThrottleOptions) {
    this.#o = { now: Date.now, ...options };
  }

  /** Sources tracked now (at most `maxSources`). */
  get size(): number {
    return this.#windows.size;
  }

  /** Seconds until `source` may try again, or undefined when it may now. */
  retryAfterSeconds(source: string): number | undefined {
    if (this.#o.maxFailures === 0) return undefined;
    const window = this.#current(source);
    if (window === undefined || window.failures < this.#o.maxFailures) return undefined;
    return Math.max(1, Math.ceil((window.startedAt + this.#o.windowMs - this.#o.now()) / 1000));
  }

  /** Count a refused credential from `source`. */
  failed(source: string): void {
    if (this.#o.maxFailures === 0) return;
    const window = this.#current(source) ?? { startedAt: this.#o.now(), failures: 0 };
    window.failures += 1;
    // Refresh its place: the first entry is the least recently failing source.
    this.#windows.delete(source);
    this.#windows.set(source, window);
    while (this.#windows.size > this.#o.maxSources) {
      const oldest = this.#windows.keys().next().value as string;
      this.#windows.delete(oldest);
    }
  }

  #current(source: string): Window | undefined {
    const window = this.#windows.get(source);
    if (window === undefined) return undefined;
    if (this.#o.now() - window.startedAt >= this.#o.windowMs) {
      this.#windows.delete(source);
      return undefined;
    }
    return window;
  }
}

/**
 * An authenticator that refuses a throttled source before looking at its
 * credential and counts its failures. Calls without a source (re-checks of
 * an open stream's credential) pass through uncounted.
 */
export function withAuthThrottle(inner: Authenticator, throttle: AuthThrottle): Authenticator {
  return {
    async authenticate(authorization, source): Promise<AuthResult> {
      if (source === undefined || source === "") return inner.authenticate(authorization, source);
      const wait = throttle.retryAfterSeconds(source);
      if (wait !== undefined) return { ok: false, failure: "throttled", retryAfterSeconds: wait };
      const result = await inner.authenticate(authorization, source);
      if (!result.ok && result.failure !== "missing" && result.failure !== "unavailable") {
        throttle.failed(source);
      }
      return result;
    },
  };
}
