/**
 * OAuth2 helpers of the auth suites: a local identity provider (its own key,
 * its JWKS served over HTTP on loopback) standing in for an external issuer,
 * and a token-endpoint client speaking RFC 6749 §4.4 the way OAuth libraries
 * do (form-encoded, client_secret_basic or client_secret_post).
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type CryptoKey,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from "jose";

/** An external issuer for tests: signs tokens, serves its JWKS. */
export class TestIdentityProvider {
  readonly issuer = "https://idp.example.test/";
  /** How many times the JWKS was fetched. */
  fetches = 0;

  private constructor(
    private readonly server: Server,
    private readonly key: CryptoKey,
    readonly kid: string,
    private readonly jwk: JWK,
  ) {}

  static async start(): Promise<TestIdentityProvider> {
    const pair = await generateKeyPair("ES256", { extractable: true });
    const jwk = await exportJWK(pair.publicKey);
    const kid = await calculateJwkThumbprint(jwk);
    let idp: TestIdentityProvider | undefined;
    const server = createServer((req, res) => {
      if (req.url !== "/jwks.json") {
        res.statusCode = 404;
        res.end();
        return;
      }
      if (idp) idp.fetches++;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [{ ...jwk, kid, alg: "ES256", use: "sig" }] }));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    idp = new TestIdentityProvider(server, pair.privateKey, kid, jwk);
    return idp;
  }

  get jwksUrl(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/jwks.json`;
  }

  /** A signed token; `expiresInSec` negative makes an expired one. */
  async token(
    claims: JWTPayload & Record<string, unknown>,
    options: { expiresInSec?: number; kid?: string; issuer?: string } = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const expires = now + (options.expiresInSec ?? 300);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", kid: options.kid ?? this.kid })
      .setIssuer(options.issuer ?? this.issuer)
      .setIssuedAt(Math.min(now, expires - 60))
      .setExpirationTime(expires)
      .sign(this.key);
  }

  /** The public key, as published. */
  get publicJwk(): JWK {
    return { ...this.jwk, kid: this.kid };
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A token request's answer. */
export interface TokenResponse {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read the JSON loosely.
  json: any;
}

/** POST to the token endpoint. */
export async function requestToken(
  baseUrl: string,
  options: {
    form: Record<string, string>;
    /** client_secret_basic credentials. */
    basic?: { id: string; secret: string };
    contentType?: string;
    method?: string;
  },
): Promise<TokenResponse> {
  const headers: Record<string, string> = {
    "content-type": options.contentType ?? "application/x-www-form-urlencoded",
  };
  if (options.basic) {
    const pair = `${encodeURIComponent(options.basic.id)}:${encodeURIComponent(options.basic.secret)}`;
    headers.authorization = `Basic ${Buffer.from(pair).toString("base64")}`;
  }
  const response = await fetch(`${baseUrl}/oauth/token`, {
    method: options.method ?? "POST",
    headers,
    ...(options.method === "GET" ? {} : { body: new URLSearchParams(options.form).toString() }),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, json };
}
