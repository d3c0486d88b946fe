/**
 * Optional encryption at rest of webhook signing secrets: with
 * `TRELLIS_WEBHOOK_SECRET_KEY` set, secrets are stored AES-256-GCM sealed
 * (`enc:v1:<iv>.<tag>.<ciphertext>`, base64) under SHA-256 of that value.
 * Without it they are stored as given. Sealed secrets need the same key to be
 * opened; rows written before a key was set stay readable.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const prefix = "enc:v1:";

export class SecretBox {
  private readonly key: Buffer | undefined;

  constructor(material: string | undefined) {
    this.key = material ? createHash("sha256").update(material).digest() : undefined;
  }

  /** The stored form of `secret`. */
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
      throw new Error("the signing secret is encrypted and TRELLIS_WEBHOOK_SECRET_KEY is not set");
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
      throw new Error("the signing secret cannot be decrypted with TRELLIS_WEBHOOK_SECRET_KEY");
    }
  }
}
