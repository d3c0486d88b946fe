/**
 * The OAuth-credential vault provider (`oauth`, capability `oauth_refresh`):
 * a vault keeps a refresh grant (RFC 6749 §6) as sealed secrets —
 * `token_endpoint`, `client_id`, `client_secret`, `refresh_token`, and
 * optionally `scope` — and hands out access tokens, never the grant.
 *
 * An access token is fetched from the token endpoint when none is cached or
 * the cached one expires within {@link OAuthTokensOptions.skewMs}; it is
 * cached in memory per vault and grant until then. Concurrent asks for the
 * same vault share one refresh. A rotated refresh token (the endpoint
 * answers a new `refresh_token`) is handed to the caller to store. Errors
 * name the vault and the endpoint's OAuth `error` code, never a secret.
 */
import { createHash } from "node:crypto";

/** The provider name of OAuth-credential vaults. */
export const OAUTH_PROVIDER = "oauth";
/** The capability an OAuth-credential vault has: it refreshes access tokens. */
export const OAUTH_REFRESH = "oauth_refresh";
/** The secrets of a refresh grant (`scope` is optional). */
export const OAUTH_GRANT_FIELDS = [
  "token_endpoint",
  "client_id",
  "client_secret",
  "refresh_token",
  "scope",
] as const;
/** The name under which tools read an OAuth vault's access token (`<vault_id>/access_token`). */
export const ACCESS_TOKEN_NAME = "access_token";

/** A refresh grant, opened from a vault's secrets. */
export interface OAuthGrant {
  tokenEndpoint: string;
  clientId: string;
  clientSecret: string;
  refreshToken: string;
  scope?: string;
}

/** An access token and when it stops working. */
export interface AccessToken {
  accessToken: string;
  expiresAt: Date;
}

/** Why an access token could not be had (names the vault, never a secret). */
export class OAuthRefreshError extends Error {
  constructor(
    readonly vaultId: string,
    detail: string,
  ) {
    super(`vault ${vaultId} could not refresh its access token: ${detail}`);
    this.name = "OAuthRefreshError";
  }
}

/** Options of {@link OAuthTokens}. */
export interface OAuthTokensOptions {
  /** Default: the global fetch. */
  fetch?: typeof fetch;
  /** Default: Date.now. */
  now?: () => number;
  /** Refresh this long before expiry (default 30 s). */
  skewMs?: number;
  /** Lifetime assumed when the endpoint gives no `expires_in` (default 5 min). */
  defaultLifetimeMs?: number;
  /** Per refresh (default 10 s). */
  timeoutMs?: number;
}

/** A refresh grant from a vault's opened secrets; undefined names the first field missing. */
export function grantOf(
  secrets: ReadonlyMap<string, string>,
): { grant: OAuthGrant } | { missing: string } {
  for (const field of ["token_endpoint", "client_id", "client_secret", "refresh_token"] as const) {
    if (!secrets.get(field)) return { missing: field };
  }
  const scope = secrets.get("scope");
  return {
    grant: {
      tokenEndpoint: secrets.get("token_endpoint") as string,
      clientId: secrets.get("client_id") as string,
      clientSecret: secrets.get("client_secret") as string,
      refreshToken: secrets.get("refresh_token") as string,
      ...(scope ? { scope } : {}),
    },
  };
}

/** Whether `value` is an http(s) URL (what a token endpoint must be). */
export function isTokenEndpoint(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:";
  } catch {
    return false;
  }
}

/**
 * What a cached token was issued for. Not the refresh token: a rotated one
 * is the same grant (and changing it by hand forgets the cache, see
 * {@link OAuthTokens.forget}).
 */
function grantKey(grant: OAuthGrant): string {
  return createHash("sha256")
    .update(JSON.stringify([grant.tokenEndpoint, grant.clientId, grant.scope ?? ""]))
    .digest("hex");
}

interface CachedToken extends AccessToken {
  grant: string;
}

/** Access tokens of OAuth-credential vaults, refreshed when needed and cached until expiry. */
export class OAuthTokens {
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #skewMs: number;
  readonly #defaultLifetimeMs: number;
  readonly #timeoutMs: number;
  /** By vault id. */
  readonly #cache = new Map<string, CachedToken>();
  /** By vault id. */
  readonly #inFlight = new Map<string, Promise<AccessToken>>();

  constructor(options: OAuthTokensOptions = {}) {
    this.#fetch = options.fetch ?? fetch;
    this.#now = options.now ?? Date.now;
    this.#skewMs = options.skewMs ?? 30_000;
    this.#defaultLifetimeMs = options.defaultLifetimeMs ?? 300_000;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  /**
   * A working access token for the vault's grant: the cached one, or a new
   * one from the token endpoint. `rotate` stores a new refresh token when
   * the endpoint issues one.
   *
   * @throws OAuthRefreshError when the endpoint refuses or cannot be reached.
   */
  async token(
    vaultId: string,
    grant: OAuthGrant,
    rotate: (refreshToken: string) => Promise<void>,
  ): Promise<AccessToken> {
    const key = grantKey(grant);
    const cached = this.#cache.get(vaultId);
    if (cached && cached.grant === key && cached.expiresAt.getTime() - this.#skewMs > this.#now()) {
      return { accessToken: cached.accessToken, expiresAt: cached.expiresAt };
    }
    let pending = this.#inFlight.get(vaultId);
    if (!pending) {
      pending = this.#refresh(vaultId, grant, rotate)
        .then((token) => {
          this.#cache.set(vaultId, { ...token, grant: key });
          return token;
        })
        .finally(() => this.#inFlight.delete(vaultId));
      this.#inFlight.set(vaultId, pending);
    }
    return pending;
  }

  /** Forgets a vault's cached token (its grant changed or it was deleted). */
  forget(vaultId: string): void {
    this.#cache.delete(vaultId);
  }

  async #refresh(
    vaultId: string,
    grant: OAuthGrant,
    rotate: (refreshToken: string) => Promise<void>,
  ): Promise<AccessToken> {
    const body = new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: grant.refreshToken,
      client_id: grant.clientId,
      client_secret: grant.clientSecret,
      ...(grant.scope ? { scope: grant.scope } : {}),
    });
    let response: Response;
    try {
      response = await this.#fetch(grant.tokenEndpoint, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
        },
        body,
        redirect: "error",
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      throw new OAuthRefreshError(
        vaultId,
        `the token endpoint cannot be reached (${(error as Error).name})`,
      );
    }
    let json: unknown;
    try {
      json = await response.json();
    } catch {
      json = undefined;
    }
    const fields = (typeof json === "object" && json !== null ? json : {}) as Record<
      string,
      unknown
    >;
    if (!response.ok) {
      // Only the OAuth error code: a description may quote what was sent.
      const code =
        typeof fields.error === "string" && /^[\w.-]{1,64}$/.test(fields.error)
          ? fields.error
          : "unknown";
      throw new OAuthRefreshError(
        vaultId,
        `the token endpoint answered ${response.status} (${code})`,
      );
    }
    if (typeof fields.access_token !== "string" || fields.access_token === "") {
      throw new OAuthRefreshError(vaultId, "the token endpoint answered no access_token");
    }
    const lifetime =
      typeof fields.expires_in === "number" && fields.expires_in > 0
        ? fields.expires_in * 1000
        : this.#defaultLifetimeMs;
    if (typeof fields.refresh_token === "string" && fields.refresh_token !== "") {
      if (fields.refresh_token !== grant.refreshToken) await rotate(fields.refresh_token);
    }
    return { accessToken: fields.access_token, expiresAt: new Date(this.#now() + lifetime) };
  }
}
