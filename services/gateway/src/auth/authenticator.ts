/**
 * Bearer authentication shared by REST, SSE and gRPC: `Authorization: Bearer
 * <credential>`, where the credential is an API key (looked up by its hash in
 * the {@link KeyStore}) or an OAuth2 access token (a JWT: verified by
 * {@link AccessTokens}). Either way the result is the {@link Caller} the
 * credential is bound to: actor, workspace, scopes.
 *
 * API keys are looked up through an {@link ApiKeyCache} when one is given:
 * a key seen recently costs no database read, and a revocation (announced by
 * `NOTIFY`) empties the cache of every gateway replica, so a revoked key still
 * fails at its next request everywhere. Without a cache, and for a token's
 * client, every request reads the database (one indexed read).
 */
import type { Caller } from "@trellis/platform";
import { type HarnErrorResponse, harnError } from "../domain/errors.js";
import type { KeyStore } from "../store/key-store.js";
import type { ApiKeyCache } from "./key-cache.js";
import { type AccessTokens, looksLikeJwt } from "./tokens.js";

/** Options of {@link createAuthenticator}. */
export interface AuthenticatorOptions {
  keys: KeyStore;
  /** Cache of key lookups (revocation-correct across replicas); none = read every time. */
  keyCache?: ApiKeyCache;
  /** Access tokens; without them a JWT is refused like an unknown key. */
  tokens?: AccessTokens;
}

/**
 * Why authentication failed (never includes the presented credential):
 * `unavailable` when the external issuer's keys could not be fetched.
 */
export type AuthFailure =
  | "missing"
  | "malformed"
  | "invalid"
  | "expired"
  | "unavailable"
  /** Too many failed attempts from this source (`auth-throttle.ts`). */
  | "throttled";

/** How the caller authenticated. */
export type Credential =
  | { kind: "api_key"; keyId: string }
  | { kind: "access_token"; issuer: string; clientId: string | undefined };

/** Result of {@link Authenticator.authenticate}. */
export type AuthResult =
  | { ok: true; caller: Caller; credential: Credential }
  | { ok: false; failure: AuthFailure; retryAfterSeconds?: number };

/** Turns an Authorization header into a caller. */
export interface Authenticator {
  /**
   * `source` is the peer's address, for throttling failed attempts
   * (`auth-throttle.ts`); absent for re-checks that are no new attempt.
   */
  authenticate(authorization: string | null | undefined, source?: string): Promise<AuthResult>;
}

/** The credential in an `Authorization: Bearer <credential>` header, or why there is none. */
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

/** A human-readable reason (safe to send: it never contains the credential). */
export function authFailureMessage(failure: AuthFailure): string {
  switch (failure) {
    case "missing":
      return "authentication required: send Authorization: Bearer <api key or access token>";
    case "malformed":
      return "the Authorization header must be: Bearer <api key or access token>";
    case "invalid":
      return "the API key or access token is invalid or revoked";
    case "expired":
      return "the access token has expired; request a new one";
    case "unavailable":
      return "the access token cannot be checked now (its issuer's keys are unreachable); retry later";
    case "throttled":
      return "too many failed authentication attempts from this address; retry later";
  }
}

/** The `WWW-Authenticate` challenge of a failure (RFC 6750 §3). */
export function authChallenge(failure: AuthFailure): string {
  if (failure === "missing") return 'Bearer realm="trellis"';
  const description = failure === "expired" ? "the token has expired" : "invalid credential";
  return `Bearer realm="trellis", error="invalid_token", error_description="${description}"`;
}

/**
 * The error answer of a refused credential: 503 with `Retry-After` when it
 * cannot be checked now, else 401 with its `WWW-Authenticate` challenge.
 */
export function authRefusal(
  failure: AuthFailure,
  requestId: string,
  retryAfterSeconds?: number,
): HarnErrorResponse {
  if (failure === "throttled") {
    return harnError("rate_limited", authFailureMessage(failure), {
      requestId,
      headers: { "retry-after": String(retryAfterSeconds ?? 60) },
    });
  }
  return failure === "unavailable"
    ? harnError("service_unavailable", authFailureMessage(failure), {
        requestId,
        headers: { "retry-after": "5" },
      })
    : harnError("unauthenticated", authFailureMessage(failure), {
        requestId,
        headers: { "www-authenticate": authChallenge(failure) },
      });
}

/** Create an {@link Authenticator} over a key store and access tokens. */
export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  return {
    async authenticate(authorization) {
      const bearer = bearerToken(authorization);
      if (!bearer.ok) return bearer;
      const token = bearer.token;
      if (looksLikeJwt(token)) {
        if (options.tokens === undefined) return { ok: false, failure: "invalid" };
        const verified = await options.tokens.verify(token);
        if (!verified.ok) return verified;
        return {
          ok: true,
          caller: verified.caller,
          credential: {
            kind: "access_token",
            issuer: verified.issuer,
            clientId: verified.clientId,
          },
        };
      }
      const record =
        options.keyCache === undefined
          ? await options.keys.authenticate(token)
          : await options.keyCache.lookup(token, (key) => options.keys.authenticate(key));
      if (record === undefined) return { ok: false, failure: "invalid" };
      return {
        ok: true,
        caller: {
          actorId: record.actorId,
          workspaceId: record.workspaceId,
          scopes: record.scopes,
        },
        credential: { kind: "api_key", keyId: record.id },
      };
    },
  };
}
