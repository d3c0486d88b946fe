/**
 * Ed25519 signatures over receipt hashes (Receipts README, "Verification
 * contract" step 7: every signature is over `chain.receipt_hash`).
 *
 * What is signed: the UTF-8 bytes of the `chain.receipt_hash` string exactly
 * as it appears in the receipt (`sha256:<64 hex>`, prefix included, so the
 * hash algorithm is bound into the signature). The signature is written
 * `base64:<standard base64 of the 64 signature bytes>`.
 *
 * Key ids: given by configuration, else derived from the public key:
 * `ed25519-<first 16 hex of SHA-256 of its SubjectPublicKeyInfo DER>`.
 *
 * Uses node:crypto only; no I/O.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { isJsonObject, SIGNATURE_ALGORITHM } from "./receipt.js";

/** A key that signs receipts. */
export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** A public key that verifies receipts. */
export interface VerifyingKey {
  keyId: string;
  publicKey: KeyObject;
}

const SIGNATURE_PREFIX = "base64:";

/** Derived key id of a public key (see the module comment). */
export function deriveKeyId(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return `ed25519-${createHash("sha256").update(der).digest("hex").slice(0, 16)}`;
}

function assertEd25519(key: KeyObject, what: string): KeyObject {
  if (key.asymmetricKeyType !== "ed25519") {
    throw new Error(`${what} is a ${key.asymmetricKeyType ?? "symmetric"} key, not Ed25519`);
  }
  return key;
}

/** A signing key from a PKCS#8 PEM private key (the public key is derived from it). */
export function signingKeyFromPem(pem: string, keyId?: string): SigningKey {
  const privateKey = assertEd25519(createPrivateKey(pem), "the signing key");
  const publicKey = createPublicKey(privateKey);
  return { keyId: keyId || deriveKeyId(publicKey), privateKey, publicKey };
}

/**
 * A public key from text: PEM (SPKI, or a PKCS#8 private key whose public
 * half is taken) or a JWK (`{"kty":"OKP","crv":"Ed25519","x":…}`).
 */
export function parsePublicKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    const jwk: unknown = JSON.parse(trimmed);
    if (!isJsonObject(jwk)) throw new Error("a JWK must be a JSON object");
    // A JWKS with one key is accepted too.
    const key = Array.isArray(jwk.keys) && jwk.keys.length === 1 ? jwk.keys[0] : jwk;
    if (!isJsonObject(key) || key.kty !== "OKP" || key.crv !== "Ed25519") {
      throw new Error('the JWK is not an Ed25519 key ({"kty":"OKP","crv":"Ed25519"})');
    }
    const { d: _private, ...publicOnly } = key;
    return assertEd25519(
      createPublicKey({ key: publicOnly as import("node:crypto").JsonWebKey, format: "jwk" }),
      "the public key",
    );
  }
  if (trimmed.includes("PRIVATE KEY")) {
    return assertEd25519(createPublicKey(createPrivateKey(trimmed)), "the public key");
  }
  return assertEd25519(createPublicKey(trimmed), "the public key");
}

/** SPKI PEM of a public key. */
export function publicKeyPem(publicKey: KeyObject): string {
  return publicKey.export({ type: "spki", format: "pem" }).toString();
}

/** The raw public key, base64url (JWK `x`). */
export function publicKeyJwkX(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: "jwk" });
  return String(jwk.x ?? "");
}

/** Sign a receipt hash; returns `base64:<signature>`. */
export function signReceiptHash(receiptHash: string, key: SigningKey): string {
  const signature = sign(null, Buffer.from(receiptHash, "utf8"), key.privateKey);
  return `${SIGNATURE_PREFIX}${signature.toString("base64")}`;
}

/** Whether `signature` (`base64:…`) is a valid signature of `receiptHash` by `publicKey`. */
export function verifyReceiptSignature(
  receiptHash: string,
  signature: string,
  publicKey: KeyObject,
): boolean {
  if (!signature.startsWith(SIGNATURE_PREFIX)) return false;
  const bytes = Buffer.from(signature.slice(SIGNATURE_PREFIX.length), "base64");
  if (bytes.length !== 64) return false;
  try {
    return verify(null, Buffer.from(receiptHash, "utf8"), publicKey, bytes);
  } catch {
    return false;
  }
}

/** The signature algorithm name Trellis writes (`ed25519`). */
export const signatureAlgorithm = SIGNATURE_ALGORITHM;
