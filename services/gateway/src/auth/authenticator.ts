/**
 * Bearer authentication shared by REST and gRPC: parse `Authorization:
 * Bearer <key>`, look the key up in the {@link KeyStore}, and return the
 * {@link Caller} it is bound to.
 *
 * Successful lookups are cached briefly (by the key's hash, never the key), so
 * a busy client does not cost a database round trip per call; a revoked key
 * stops working within {@link AuthenticatorOptions.cacheMs}.
 */
import type { Caller } from "@trellis/platform";
import { hashApiKey, type KeyStore } from "../store/key-store.js";

/** Options of {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  keys: KeyStore;
  /** How long a successful lookup is remembered (default 5 s; 0 disables). */
  cacheMs?: number;
  now?: () => number;
}

/** Why authentication failed (never includes the presented key). */
export type AuthFailure = "missing" | "malformed" | "invalid";

/** Result of {@link Authenticator.authenticate}. */
export type AuthResult =
  | { ok: true; caller: Caller; keyId: string }
  | { ok: false; failure: AuthFailure };

/** Turns an Authorization header into a caller. */
export interface Authenticator {
  authenticate(authorization: string | null | undefined): Promise<AuthResult>;
}

/** The key in an `Authorization: Bearer <key>` header, or why there is none. */
export function bearerToken(
  authorization: string | null | undefined,
): { ok: true; token: string } | { ok: false; failure: "missing" | "malformed" } {
  if (authorization === null || authorization === undefined || authorization.trim() === "") {
    return { ok: false, failure: "missing" };
  }
  const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match?.[1]) return { ok: false, failure: "malformed" };
  return { ok: true, token: match[1] };
}

/** A human-readable reason (safe to send: it never contains the key). */
export function authFailureMessage(failure: AuthFailure): string {
  switch (failure) {
    case "missing":
      return "authentication required: send Authorization: Bearer <api key>";
    case "malformed":
      return "the Authorization header must be: Bearer <api key>";
    case "invalid":
      return "the API key is invalid or revoked";
  }
}

/** Create an {@link Authenticator} over a key store. */
export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const cacheMs = options.cacheMs ?? 5000;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { caller: Caller; keyId: string; until: number }>();
  return {
    async authenticate(authorization) {
      const bearer = bearerToken(authorization);
      if (!bearer.ok) return bearer;
      const hash = hashApiKey(bearer.token);
      const cached = cache.get(hash);
      if (cached && cached.until > now()) {
        return { ok: true, caller: cached.caller, keyId: cached.keyId };
      }
      const record = await options.keys.authenticate(bearer.token);
      if (record === undefined) {
        cache.delete(hash);
        return { ok: false, failure: "invalid" };
      }
      const caller: Caller = {
        actorId: record.actorId,
        workspaceId: record.workspaceId,
        scopes: record.scopes,
      };
      if (cacheMs > 0) {
        if (cache.size > 10_000) cache.clear();
        cache.set(hash, { caller, keyId: record.id, until: now() + cacheMs });
      }
      return { ok: true, caller, keyId: record.id };
    },
  };
}
