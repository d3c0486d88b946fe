/**
 * OAuth2 access tokens (Harn v1 "OAuth2 client credentials"): JWTs the gateway
 * issues to registered clients, and JWTs of an external issuer validated
 * through its JWKS URL. Either way the issuer, audience, expiry and scopes are
 * checked, and the token is bound to one workspace.
 *
 * The gateway's own tokens (RFC 9068 profile, `typ: at+jwt`):
 *   iss  TRELLIS_OAUTH_ISSUER        aud  TRELLIS_OAUTH_AUDIENCE
 *   sub, client_id  the client id    workspace  the client's workspace
 *   scope  space-separated scopes    iat, exp (TRELLIS_OAUTH_TOKEN_TTL), jti
 * A token of a revoked client stops working at once (the client is looked up
 * on every use, like an API key).
 *
 * External tokens (TRELLIS_OAUTH_EXTERNAL_ISSUER + _JWKS_URL): `iss`, `aud`
 * (TRELLIS_OAUTH_EXTERNAL_AUDIENCE), `exp`, `sub` required; the workspace
 * from the claim TRELLIS_OAUTH_EXTERNAL_WORKSPACE_CLAIM (else
 * TRELLIS_OAUTH_EXTERNAL_DEFAULT_WORKSPACE); scopes from `scope` or `scp`.
 * Only named scopes count: no token ever carries `*`.
 */
import { randomBytes } from "node:crypto";
import type { Caller } from "@trellis/platform";
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  type JWTPayload,
  type JWTVerifyGetKey,
  errors as joseErrors,
  jwtVerify,
  SignJWT,
} from "jose";
import { isScope, parseScopeList } from "../domain/scopes.js";
import type { OAuthClientRecord, OAuthClientStore } from "../store/oauth-client-store.js";
import type { SigningKeyRing } from "./signing-keys.js";

/** Settings of an external issuer whose tokens are accepted. */
export interface ExternalIssuerSettings {
  issuer: string;
  jwksUrl: string;
  audience: string;
  /** Claim naming the workspace. */
  workspaceClaim: string;
  /** Workspace of tokens without that claim (undefined: such tokens are refused). */
  defaultWorkspace: string | undefined;
}

/** Settings of {@link AccessTokens}. */
export interface AccessTokenSettings {
  issuer: string;
  audience: string;
  ttlMs: number;
  external: ExternalIssuerSettings | undefined;
  /** Leeway for `exp` / `nbf` (seconds; default 30). */
  clockToleranceSec?: number;
  now?: () => number;
}

/** Why a token was refused. */
export type TokenFailure = "invalid" | "expired" | "unavailable";

/** Result of {@link AccessTokens.verify}. */
export type TokenVerification =
  | { ok: true; caller: Caller; issuer: string; clientId: string | undefined }
  | { ok: false; failure: TokenFailure };

/** A token handed to a client. */
export interface IssuedToken {
  accessToken: string;
  expiresInSec: number;
  scopes: readonly string[];
}

const ownAlgorithms = ["EdDSA", "ES256"];
const externalAlgorithms = ["EdDSA", "ES256", "ES384", "RS256", "RS384", "RS512", "PS256"];
const tokenType = "at+jwt";

/** Whether a bearer credential is shaped like a JWT (three base64url parts, JSON header). */
export function looksLikeJwt(token: string): boolean {
  return /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

function scopesOf(payload: JWTPayload): string[] {
  const raw = payload.scope ?? payload.scp;
  return parseScopeList(raw).filter(isScope);
}

function workspaceValue(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" && value.length <= 200 ? value : undefined;
}

function failureOf(error: unknown): TokenFailure {
  if (error instanceof joseErrors.JWTExpired) return "expired";
  if (error instanceof joseErrors.JWKSTimeout) return "unavailable";
  if (error instanceof joseErrors.JOSEError) return "invalid";
  // A failure to fetch the issuer's JWKS (network, HTTP status).
  return "unavailable";
}

/** Issues and verifies access tokens. */
export class AccessTokens {
  readonly #ring: SigningKeyRing;
  readonly #settings: AccessTokenSettings;
  readonly #clients: OAuthClientStore;
  readonly #own: JWTVerifyGetKey;
  readonly #external: JWTVerifyGetKey | undefined;
  readonly #now: () => number;

  constructor(ring: SigningKeyRing, settings: AccessTokenSettings, clients: OAuthClientStore) {
    this.#ring = ring;
    this.#settings = settings;
    this.#clients = clients;
    this.#own = createLocalJWKSet({ keys: [...ring.publicKeys] });
    this.#external = settings.external
      ? createRemoteJWKSet(new URL(settings.external.jwksUrl), {
          timeoutDuration: 5_000,
          cooldownDuration: 30_000,
          cacheMaxAge: 10 * 60_000,
        })
      : undefined;
    this.#now = settings.now ?? Date.now;
  }

  /** Whether this gateway has a key to sign tokens with. */
  get canIssue(): boolean {
    return this.#ring.current !== undefined;
  }

  /** The public keys of `/.well-known/jwks.json`. */
  get publicKeys() {
    return this.#ring.publicKeys;
  }

  /** A token for `client` with `scopes` (already checked against what it may ask for). */
  async issue(client: OAuthClientRecord, scopes: readonly string[]): Promise<IssuedToken> {
    const key = this.#ring.current;
    if (key === undefined) throw new Error("no signing key");
    const nowSec = Math.floor(this.#now() / 1000);
    const expiresInSec = Math.max(1, Math.floor(this.#settings.ttlMs / 1000));
    const accessToken = await new SignJWT({
      client_id: client.id,
      workspace: client.workspaceId,
      scope: scopes.join(" "),
    })
      .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: tokenType })
      .setIssuer(this.#settings.issuer)
      .setAudience(this.#settings.audience)
      .setSubject(client.id)
      .setIssuedAt(nowSec)
      .setExpirationTime(nowSec + expiresInSec)
      .setJti(randomBytes(12).toString("base64url"))
      .sign(key.privateKey);
    return { accessToken, expiresInSec, scopes };
  }

  /** Verify a bearer JWT and map it to a caller. */
  async verify(token: string): Promise<TokenVerification> {
    let issuer: string | undefined;
    try {
      issuer = decodeJwt(token).iss;
    } catch {
      return { ok: false, failure: "invalid" };
    }
    if (issuer === undefined) return { ok: false, failure: "invalid" };
    if (issuer === this.#settings.issuer) return this.#verifyOwn(token);
    const external = this.#settings.external;
    if (external !== undefined && this.#external !== undefined && issuer === external.issuer) {
      return this.#verifyExternal(token, external, this.#external);
    }
    return { ok: false, failure: "invalid" };
  }

  #claimOptions() {
    return {
      clockTolerance: this.#settings.clockToleranceSec ?? 30,
      currentDate: new Date(this.#now()),
    };
  }

  async #verifyOwn(token: string): Promise<TokenVerification> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.#own, {
        ...this.#claimOptions(),
        issuer: this.#settings.issuer,
        audience: this.#settings.audience,
        algorithms: ownAlgorithms,
        typ: tokenType,
        requiredClaims: ["exp", "sub", "client_id", "workspace"],
      }));
    } catch (error) {
      return { ok: false, failure: failureOf(error) };
    }
    const clientId = typeof payload.client_id === "string" ? payload.client_id : "";
    const workspaceId = workspaceValue(payload.workspace);
    if (clientId === "" || clientId !== payload.sub || workspaceId === undefined) {
      return { ok: false, failure: "invalid" };
    }
    // A revoked client's tokens stop working at once, on every replica.
    const client = await this.#clients.get(clientId);
    if (
      client === undefined ||
      client.revokedAt !== undefined ||
      client.workspaceId !== workspaceId
    ) {
      return { ok: false, failure: "invalid" };
    }
    // Never more than the client may have now (its scopes may have changed).
    const scopes = scopesOf(payload).filter((s) => client.scopes.includes(s));
    return {
      ok: true,
      caller: { actorId: clientId, workspaceId, scopes },
      issuer: this.#settings.issuer,
      clientId,
    };
  }

  async #verifyExternal(
    token: string,
    external: ExternalIssuerSettings,
    keys: JWTVerifyGetKey,
  ): Promise<TokenVerification> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        ...this.#claimOptions(),
        issuer: external.issuer,
        audience: external.audience,
        algorithms: externalAlgorithms,
        requiredClaims: ["exp", "sub"],
      }));
    } catch (error) {
      return { ok: false, failure: failureOf(error) };
    }
    const workspaceId =
      workspaceValue(payload[external.workspaceClaim]) ?? external.defaultWorkspace;
    if (workspaceId === undefined || typeof payload.sub !== "string" || payload.sub === "") {
      return { ok: false, failure: "invalid" };
    }
    const clientId =
      typeof payload.client_id === "string"
        ? payload.client_id
        : typeof payload.azp === "string"
          ? payload.azp
          : undefined;
    return {
      ok: true,
      caller: { actorId: payload.sub, workspaceId, scopes: scopesOf(payload) },
      issuer: external.issuer,
      clientId,
    };
  }
}
