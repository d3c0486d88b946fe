/**
 * Re-checking the credential of open event streams, so that revoking an API
 * key (or a JWT expiring) also stops the SSE and WebSocket streams it opened.
 *
 * Streams call {@link CredentialChecks.check} on every heartbeat. Checks of
 * one credential are shared: a result younger than `maxAgeMs` is reused and
 * concurrent checks wait for one lookup, so 10,000 streams opened with one
 * key cost one key lookup per `maxAgeMs`, not 10,000. A revoked credential is
 * therefore noticed within one heartbeat plus `maxAgeMs`.
 *
 * Only a definite refusal ends a stream (`invalid`, `expired`, …); when the
 * credential cannot be checked now (`unavailable`, a database error) the
 * stream stays open and the next heartbeat checks again.
 */
import type { Authenticator, AuthFailure, AuthResult } from "../auth/authenticator.js";

/** Longest time a check result is reused. */
export const maxCheckAgeMs = 5_000;

interface Entry {
  at: number;
  result: Promise<AuthResult | undefined>;
}

/** Shared, short-lived credential check results of one gateway. */
export class CredentialChecks {
  readonly #authenticator: Authenticator;
  readonly #maxAgeMs: number;
  readonly #entries = new Map<string, Entry>();
  #prunedAt = 0;

  constructor(authenticator: Authenticator, maxAgeMs: number) {
    this.#authenticator = authenticator;
    this.#maxAgeMs = maxAgeMs;
  }

  /**
   * Why `authorization` no longer authenticates, or undefined while it still
   * does (or cannot be checked now).
   */
  async refusal(authorization: string | undefined): Promise<AuthFailure | undefined> {
    const result = await this.#check(authorization ?? "");
    if (result === undefined || result.ok || result.failure === "unavailable") return undefined;
    return result.failure;
  }

  #check(authorization: string): Promise<AuthResult | undefined> {
    const now = Date.now();
    if (now - this.#prunedAt > this.#maxAgeMs) {
      this.#prunedAt = now;
      for (const [key, entry] of this.#entries) {
        if (now - entry.at > this.#maxAgeMs) this.#entries.delete(key);
      }
    }
    const cached = this.#entries.get(authorization);
    if (cached && now - cached.at <= this.#maxAgeMs) return cached.result;
    const result = this.#authenticator.authenticate(authorization).catch(() => {
      // Could not check (a database error): keep the stream, check again next time.
      this.#entries.delete(authorization);
      return undefined;
    });
    this.#entries.set(authorization, { at: now, result });
    return result;
  }
}

const checksByAuthenticator = new WeakMap<Authenticator, CredentialChecks>();

/** The shared checks of the gateway whose authenticator is `authenticator`. */
export function credentialChecksOf(
  authenticator: Authenticator,
  heartbeatMs: number,
): CredentialChecks {
  let checks = checksByAuthenticator.get(authenticator);
  if (!checks) {
    checks = new CredentialChecks(authenticator, Math.min(maxCheckAgeMs, heartbeatMs));
    checksByAuthenticator.set(authenticator, checks);
  }
  return checks;
}
