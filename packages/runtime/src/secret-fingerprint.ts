/**
 * Keyed fingerprints of secret values: `hmac-sha256:<hex>`, the HMAC-SHA256
 * under the deployment's fingerprint key of the value's RFC 8785 form (for a
 * string, its JSON string literal — what `sha256:` hashes of recorded
 * material are taken over too).
 *
 * Where Trellis records that a secret was read or substituted (a harness
 * tool's `secret:<name>` record, a replay's `secret:` override), it keeps
 * this fingerprint, never a plain SHA-256: a plain hash of a low-entropy
 * secret (a PIN, a dictionary password) is brute-forced by anyone who can
 * read the session, a keyed one only by someone who also holds the key.
 * Equal values give equal fingerprints within one deployment (the key is
 * stable across restarts and shared by every service), so records stay
 * comparable; two deployments give different ones.
 *
 * The key comes from the host (`@trellis/platform`, `ServiceContext.fingerprints`).
 */
import { createHmac } from "node:crypto";
import { SecretBox } from "./secret-box.js";

/** A keyed fingerprint as recorded: `hmac-sha256:` and 64 lowercase hex digits. */
export type SecretFingerprint = `hmac-sha256:${string}`;

/** The shape of a {@link SecretFingerprint}. */
export const SECRET_FINGERPRINT_PATTERN = /^hmac-sha256:[0-9a-f]{64}$/;

/** Shortest fingerprint key accepted (bytes). */
export const MIN_FINGERPRINT_KEY_BYTES = 32;

/** Whether `value` is a well-formed {@link SecretFingerprint}. */
export function isSecretFingerprint(value: unknown): value is SecretFingerprint {
  return typeof value === "string" && SECRET_FINGERPRINT_PATTERN.test(value);
}

/**
 * Fingerprints secret values under one key. Build it once per process (the
 * host does) and share it.
 *
 * @example
 * const fingerprints = new SecretFingerprints(randomBytes(32));
 * fingerprints.of("1234"); // "hmac-sha256:…", the same for the same value and key
 */
export class SecretFingerprints {
  readonly #key: Buffer;

  /** @throws Error when the key is shorter than {@link MIN_FINGERPRINT_KEY_BYTES}. */
  constructor(key: Uint8Array) {
    if (key.byteLength < MIN_FINGERPRINT_KEY_BYTES) {
      throw new Error(
        `a secret fingerprint key must be at least ${MIN_FINGERPRINT_KEY_BYTES} bytes, not ${key.byteLength}`,
      );
    }
    this.#key = Buffer.from(key);
  }

  /** The fingerprint of `value`. */
  of(value: string): SecretFingerprint {
    const mac = createHmac("sha256", this.#key).update(JSON.stringify(value), "utf8");
    return `hmac-sha256:${mac.digest("hex")}`;
  }

  /**
   * A box that seals secrets a service must keep to use later (a replay's
   * `secret:` override values), under a key derived from this deployment key
   * for `purpose` (HMAC-SHA256, so it is never the fingerprint key itself and
   * differs per purpose). Every service and restart of the deployment
   * derives the same key, so what one sealed another opens.
   */
  sealingBox(purpose: string): SecretBox {
    const key = createHmac("sha256", this.#key)
      .update(`trellis sealing key v1:${purpose}`, "utf8")
      .digest();
    return new SecretBox(key, { keyName: `the deployment's ${purpose} sealing key` });
  }
}
