/**
 * The key vault secrets are sealed with (AES-256-GCM, `SecretBox`), first
 * match wins:
 * 1. `TRELLIS_VAULT_KEY` (32 bytes, base64) or `TRELLIS_VAULT_KEY_FILE` (a
 *    file holding that base64) — every replica needs the same key;
 * 2. embedded mode with a data directory: `<dataDir>/vault-key` (mode 0600),
 *    generated on first start;
 * 3. embedded mode in memory: a key generated for the database's lifetime
 *    (the secrets die with it);
 * 4. distributed mode without a key: none — vault metadata still works, but
 *    writing a secret is refused (`config_invalid`) and none can be read.
 */
import { readFile } from "node:fs/promises";
import { generatedKeyFile, memoryKey, SecretBox, TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";

/** The setting named in errors. */
export const VAULT_KEY_NAME = "TRELLIS_VAULT_KEY";
/** File name of the generated key in the embedded data directory. */
export const VAULT_KEY_FILE = "vault-key";

/** Options of {@link loadVaultBox}. */
export interface VaultKeyOptions {
  mode: "embedded" | "distributed";
  env: Readonly<Record<string, string | undefined>>;
  dataDir?: string | undefined;
  /** Embedded in memory: the key lives as long as this database object. */
  db: Database<unknown>;
}

function keyInvalid(message: string): TrellisError {
  return new TrellisError({
    reason: "config_invalid",
    message,
    metadata: { setting: VAULT_KEY_NAME },
    domain: "adapters",
  });
}

function decodeKey(text: string, source: string): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, "base64");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || key.length !== 32) {
    throw keyInvalid(`${source} must be 32 bytes in base64 (e.g. \`openssl rand -base64 32\`)`);
  }
  return key;
}

/**
 * The box of vault secrets (see the module comment); {@link SecretBox.canSeal}
 * is false in distributed mode without a key.
 *
 * @throws TrellisError `config_invalid` when a configured key is not 32 bytes
 *   of base64 or its file cannot be read.
 */
export async function loadVaultBox(options: VaultKeyOptions): Promise<SecretBox> {
  const box = (key: Buffer | undefined) => new SecretBox(key, { keyName: VAULT_KEY_NAME });
  const inline = options.env.TRELLIS_VAULT_KEY;
  if (inline) return box(decodeKey(inline, VAULT_KEY_NAME));
  const file = options.env.TRELLIS_VAULT_KEY_FILE;
  if (file) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      throw keyInvalid(
        `TRELLIS_VAULT_KEY_FILE ${file} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      );
    }
    return box(decodeKey(text, "TRELLIS_VAULT_KEY_FILE"));
  }
  if (options.mode === "distributed") return box(undefined);
  if (options.dataDir) {
    return box(
      await generatedKeyFile(options.dataDir, VAULT_KEY_FILE, (file) =>
        keyInvalid(`${file} must be 32 bytes in base64 (e.g. \`openssl rand -base64 32\`)`),
      ),
    );
  }
  // In-memory embedded databases: one key per database, shared by every service of the process.
  return box(memoryKey(options.db, VAULT_KEY_NAME));
}
