/**
 * The keys the gateway signs OAuth2 access tokens with, and the public keys it
 * publishes at `/.well-known/jwks.json` and accepts.
 *
 * - Configured (distributed mode; a Kubernetes Secret): `TRELLIS_OAUTH_SIGNING_KEY`
 *   or the file named by `TRELLIS_OAUTH_SIGNING_KEY_FILE` holds a private key,
 *   PKCS#8 PEM or a private JWK, Ed25519 (EdDSA) or P-256 (ES256). Keys retired
 *   by a rotation stay accepted while they are listed (public JWKS) in
 *   `TRELLIS_OAUTH_PREVIOUS_KEYS`. Every replica gets the same Secret.
 * - Not configured, embedded mode: an Ed25519 key is generated once and kept
 *   in the gateway's database (`signing_keys`), so tokens survive a restart.
 * - Not configured, distributed mode: the gateway issues no tokens (the token
 *   endpoint says so); tokens of an external issuer are still accepted.
 */
import { createPrivateKey, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import {
  type CryptoKey,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
} from "jose";
import type { Kysely } from "kysely";
import type { GatewayDatabase } from "../store/schema.js";

/** Signature algorithms of the gateway's own tokens. */
export type SigningAlgorithm = "EdDSA" | "ES256";

/** A key to sign with. */
export interface SigningKey {
  kid: string;
  alg: SigningAlgorithm;
  privateKey: CryptoKey;
}

/** The gateway's keys: the one it signs with (if any) and every public key it accepts. */
export interface SigningKeyRing {
  current: SigningKey | undefined;
  /** Public JWKs (with `kid`, `alg`, `use`), the current key's first. */
  publicKeys: readonly JWK[];
  /** Where the keys came from (for the start-up log). */
  source: "config" | "database" | "none";
}

/** Settings {@link loadSigningKeys} reads. */
export interface SigningKeySettings {
  TRELLIS_OAUTH_SIGNING_KEY?: string | undefined;
  TRELLIS_OAUTH_SIGNING_KEY_FILE?: string | undefined;
  TRELLIS_OAUTH_PREVIOUS_KEYS?: string | undefined;
}

function configError(message: string, param: string): TrellisError {
  return new TrellisError({ reason: "config_invalid", message, param });
}

function algorithmOf(jwk: JWK, param: string): SigningAlgorithm {
  if (jwk.kty === "OKP" && jwk.crv === "Ed25519") return "EdDSA";
  if (jwk.kty === "EC" && jwk.crv === "P-256") return "ES256";
  throw configError(
    `${param}: the key must be Ed25519 (EdDSA) or P-256 (ES256), got ${String(jwk.kty)} ${String(jwk.crv ?? "")}`.trim(),
    param,
  );
}

function publicPart(jwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...rest } = jwk;
  return rest;
}

async function publishable(jwk: JWK, alg: SigningAlgorithm, kid: string): Promise<JWK> {
  const { key_ops: _ops, ext: _ext, ...rest } = publicPart(jwk);
  return { ...rest, kid, alg, use: "sig" };
}

/** Parse a configured private key (PEM or JWK text). */
export async function parsePrivateKey(
  text: string,
  param: string,
): Promise<SigningKey & { publicJwk: JWK }> {
  const trimmed = text.trim();
  let jwk: JWK;
  if (trimmed.startsWith("{")) {
    try {
      jwk = JSON.parse(trimmed) as JWK;
    } catch {
      throw configError(`${param} is neither a PEM private key nor a JSON Web Key`, param);
    }
  } else {
    let key: KeyObject;
    try {
      key = createPrivateKey(trimmed);
    } catch {
      throw configError(`${param} is neither a PEM private key nor a JSON Web Key`, param);
    }
    jwk = key.export({ format: "jwk" }) as JWK;
  }
  if (typeof jwk.d !== "string") throw configError(`${param} must be a private key`, param);
  const alg = algorithmOf(jwk, param);
  const publicJwk = publicPart(jwk);
  const kid =
    typeof jwk.kid === "string" && jwk.kid !== ""
      ? jwk.kid
      : await calculateJwkThumbprint(publicJwk);
  let privateKey: CryptoKey;
  try {
    privateKey = (await importJWK({ ...jwk, alg }, alg)) as CryptoKey;
  } catch {
    throw configError(`${param}: the key cannot be used for ${alg}`, param);
  }
  return { kid, alg, privateKey, publicJwk: await publishable(publicJwk, alg, kid) };
}

/** Parse `TRELLIS_OAUTH_PREVIOUS_KEYS`: a JWKS (or one JWK) of public keys with `kid`. */
export async function parsePreviousKeys(text: string | undefined): Promise<JWK[]> {
  if (text === undefined || text.trim() === "") return [];
  const param = "TRELLIS_OAUTH_PREVIOUS_KEYS";
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw configError(`${param} must be a JSON Web Key Set`, param);
  }
  const list =
    typeof parsed === "object" &&
    parsed !== null &&
    Array.isArray((parsed as { keys?: unknown }).keys)
      ? (parsed as { keys: unknown[] }).keys
      : [parsed];
  const keys: JWK[] = [];
  for (const item of list) {
    if (typeof item !== "object" || item === null) throw configError(`${param}: not a key`, param);
    const jwk = item as JWK;
    if (typeof jwk.kid !== "string" || jwk.kid === "") {
      throw configError(`${param}: every key needs a kid`, param);
    }
    const alg = algorithmOf(jwk, param);
    keys.push(await publishable(jwk, alg, jwk.kid));
  }
  return keys;
}

/** Options of {@link loadSigningKeys}. */
export interface LoadSigningKeysOptions {
  settings: SigningKeySettings;
  mode: "embedded" | "distributed";
  db: Database<unknown>;
  schema: string;
}

/** Load (or, embedded, create) the gateway's signing keys. */
export async function loadSigningKeys(options: LoadSigningKeysOptions): Promise<SigningKeyRing> {
  const { settings } = options;
  const previous = await parsePreviousKeys(settings.TRELLIS_OAUTH_PREVIOUS_KEYS);
  if (settings.TRELLIS_OAUTH_SIGNING_KEY && settings.TRELLIS_OAUTH_SIGNING_KEY_FILE) {
    throw configError(
      "set TRELLIS_OAUTH_SIGNING_KEY or TRELLIS_OAUTH_SIGNING_KEY_FILE, not both",
      "TRELLIS_OAUTH_SIGNING_KEY_FILE",
    );
  }
  let configured: string | undefined = settings.TRELLIS_OAUTH_SIGNING_KEY;
  let param = "TRELLIS_OAUTH_SIGNING_KEY";
  if (settings.TRELLIS_OAUTH_SIGNING_KEY_FILE) {
    param = "TRELLIS_OAUTH_SIGNING_KEY_FILE";
    try {
      configured = readFileSync(settings.TRELLIS_OAUTH_SIGNING_KEY_FILE, "utf8");
    } catch (error) {
      throw configError(
        `${param}: cannot read ${settings.TRELLIS_OAUTH_SIGNING_KEY_FILE} (${(error as NodeJS.ErrnoException).code ?? "error"})`,
        param,
      );
    }
  }
  if (configured) {
    const key = await parsePrivateKey(configured, param);
    return {
      current: { kid: key.kid, alg: key.alg, privateKey: key.privateKey },
      publicKeys: [key.publicJwk, ...previous.filter((k) => k.kid !== key.kid)],
      source: "config",
    };
  }
  if (options.mode === "distributed")
    return { current: undefined, publicKeys: previous, source: "none" };
  return loadDatabaseKeys(options.db, options.schema, previous);
}

async function loadDatabaseKeys(
  database: Database<unknown>,
  schema: string,
  previous: JWK[],
): Promise<SigningKeyRing> {
  const db = (database.kysely as unknown as Kysely<GatewayDatabase>).withSchema(schema);
  const lease = await database.acquireLock("trellis.gateway.signing-key");
  try {
    let rows = await db
      .selectFrom("signing_keys")
      .selectAll()
      .orderBy("created_at", "desc")
      .execute();
    if (rows.length === 0) {
      const pair = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
      const privateJwk = await exportJWK(pair.privateKey);
      const publicJwk = await exportJWK(pair.publicKey);
      const kid = await calculateJwkThumbprint(publicJwk);
      await db
        .insertInto("signing_keys")
        .values({
          kid,
          alg: "EdDSA",
          private_jwk: JSON.stringify(privateJwk),
          public_jwk: JSON.stringify(publicJwk),
          created_at: new Date(),
        })
        .execute();
      rows = await db
        .selectFrom("signing_keys")
        .selectAll()
        .orderBy("created_at", "desc")
        .execute();
    }
    const newest = rows[0]!;
    const alg = newest.alg as SigningAlgorithm;
    const privateKey = (await importJWK(
      { ...(JSON.parse(newest.private_jwk) as JWK), alg },
      alg,
    )) as CryptoKey;
    const stored = await Promise.all(
      rows.map((row) =>
        publishable(JSON.parse(row.public_jwk) as JWK, row.alg as SigningAlgorithm, row.kid),
      ),
    );
    return {
      current: { kid: newest.kid, alg, privateKey },
      publicKeys: [...stored, ...previous.filter((k) => !rows.some((r) => r.kid === k.kid))],
      source: "database",
    };
  } finally {
    await lease.release();
  }
}
