/**
 * Encryption at rest of stored secrets: AES-256-GCM, stored as
 * `enc:v1:<iv>.<tag>.<ciphertext>` (base64). The key is either 32 raw bytes
 * (vaults: `TRELLIS_VAULT_KEY`) or derived as SHA-256 of operator key
 * material (webhook signing secrets: `TRELLIS_WEBHOOK_SECRET_KEY`).
 *
 * A box without a key stores secrets as given (webhooks: encryption is
 * optional) — {@link SecretBox.canSeal} tells, so a caller that must never
 * store plaintext (vaults) refuses instead. Sealed secrets need the same key
 * to be opened; values stored before a key was set stay readable.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const prefix = "enc:v1:";

/** Options of {@link SecretBox}. */
export interface SecretBoxOptions {
  /** The setting the key comes from, named in errors (never its value). */
  keyName: string;
}

export class SecretBox {
  private readonly key: Buffer | undefined;
  private readonly keyName: string;

  /**
   * @param key 32 raw bytes, or key material (a string) whose SHA-256 is the
   *   key; undefined: no key (secrets are stored as given).
   * @throws Error when `key` is bytes of another length than 32.
   */
  constructor(key: string | Uint8Array | undefined, options: SecretBoxOptions) {
    this.keyName = options.keyName;
    if (typeof key === "string") {
      this.key = key ? createHash("sha256").update(key).digest() : undefined;
    } else if (key !== undefined) {
      if (key.length !== 32) {
        throw new Error(`${this.keyName} must be 32 bytes (base64), not ${key.length}`);
      }
      this.key = Buffer.from(key);
    } else {
      this.key = undefined;
    }
  }

  /** Whether this box has a key, so {@link seal} encrypts. */
  get canSeal(): boolean {
    return this.key !== undefined;
  }

  /** Whether a stored form is sealed (encrypted). */
  static isSealed(stored: string): boolean {
    return stored.startsWith(prefix);
  }

  /** The stored form of `secret` (as given when the box has no key). */
  seal(secret: string): string {
    if (this.key === undefined) return secret;
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    const sealed = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    const tag = cipher.getAuthTag();
    return `${prefix}${iv.toString("base64")}.${tag.toString("base64")}.${sealed.toString("base64")}`;
  }

  /** The secret of a stored form; throws when it is sealed and cannot be opened. */
  open(stored: string): string {
    if (!stored.startsWith(prefix)) return stored;
    if (this.key === undefined) {
      throw new Error(`the secret is encrypted and ${this.keyName} is not set`);
    }
    const [iv, tag, sealed] = stored.slice(prefix.length).split(".");
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(iv ?? "", "base64"));
      decipher.setAuthTag(Buffer.from(tag ?? "", "base64"));
      return Buffer.concat([
        decipher.update(Buffer.from(sealed ?? "", "base64")),
        decipher.final(),
      ]).toString("utf8");
    } catch {
      throw new Error(`the secret cannot be decrypted with ${this.keyName}`);
    }
  }
}
