/**
 * The key ring: the key new receipts are signed with, and the public key of
 * every key id that ever signed one.
 *
 * Where the signing key comes from, first match wins:
 * 1. `TRELLIS_RECEIPT_SIGNING_KEY` (Kubernetes secret in production);
 * 2. embedded mode with a data directory: `<dataDir>/receipt-signing-key.pem`
 *    (PKCS#8, mode 0600), generated on first start;
 * 3. otherwise a key generated once and kept in the `signing_keys` table
 *    (tests, in-memory embedded; distributed mode warns: configure a key).
 *
 * Every key used, and every key in `TRELLIS_RECEIPT_OLD_PUBLIC_KEYS`, is
 * registered in `signing_keys` by key id, so after a rotation old receipts
 * still verify, on every replica.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import type { ReceiptsConfig } from "./config.js";
import { SIGNATURE_ALGORITHM } from "./domain/receipt.js";
import {
  parsePublicKey,
  publicKeyPem,
  type SigningKey,
  signingKeyFromPem,
} from "./domain/signing.js";
import type { ReceiptStore } from "./store/receipt-store.js";

/** A public key known to the ring. */
export interface KnownKey {
  keyId: string;
  publicKey: KeyObject;
  source: string;
  createdAt: Date;
}

/** Keys for signing and verifying. */
export interface KeyRing {
  /** The key new receipts are signed with. */
  readonly current: SigningKey;
  /** Public key of a key id (cached; see {@link refresh}). */
  publicKey(keyId: string): KeyObject | undefined;
  /**
   * Re-read the keys table when `keyId` is not known, or when no key id is
   * given (another replica may have registered a key); at most once a second.
   */
  ensure(keyId?: string): Promise<void>;
  list(): KnownKey[];
}

/** Options of {@link loadKeyRing}. */
export interface LoadKeyRingOptions {
  config: ReceiptsConfig;
  store: ReceiptStore;
  database: Database<unknown>;
  logger: Logger;
  mode: "embedded" | "distributed";
  dataDir?: string;
}

function generatePem(): string {
  const { privateKey } = generateKeyPairSync("ed25519");
  return privateKey.export({ type: "pkcs8", format: "pem" }).toString();
}

/** File name of the generated signing key in the embedded data directory. */
export const SIGNING_KEY_FILE = "receipt-signing-key.pem";

async function keyFromDataDir(dataDir: string, keyId: string | undefined): Promise<SigningKey> {
  const file = join(dataDir, SIGNING_KEY_FILE);
  try {
    return signingKeyFromPem(await readFile(file, "utf8"), keyId);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await mkdir(dataDir, { recursive: true });
  const pem = generatePem();
  // wx: never overwrite a key another process wrote meanwhile.
  await writeFile(file, pem, { mode: 0o600, flag: "wx" }).catch(async (error) => {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  });
  await chmod(file, 0o600);
  return signingKeyFromPem(await readFile(file, "utf8"), keyId);
}

async function keyFromDatabase(options: LoadKeyRingOptions): Promise<SigningKey> {
  const lease = await options.database.acquireLock("trellis.receipts.keygen");
  try {
    const existing = await options.store.generatedPrivateKey();
    if (existing?.private_key_pem) {
      return signingKeyFromPem(existing.private_key_pem, existing.key_id);
    }
    const pem = generatePem();
    const key = signingKeyFromPem(pem, options.config.keyId);
    await options.store.savePublicKey({
      keyId: key.keyId,
      algorithm: SIGNATURE_ALGORITHM,
      publicKeyPem: publicKeyPem(key.publicKey),
      privateKeyPem: pem,
      source: "generated",
    });
    return key;
  } finally {
    await lease.release();
  }
}

/** Load (or create) the signing key and the known public keys. */
export async function loadKeyRing(options: LoadKeyRingOptions): Promise<KeyRing> {
  const { config, store, logger } = options;
  for (const [keyId, text] of Object.entries(config.oldPublicKeys)) {
    await store.savePublicKey({
      keyId,
      algorithm: SIGNATURE_ALGORITHM,
      publicKeyPem: publicKeyPem(parsePublicKey(text)),
      source: "retired-config",
    });
  }

  let current: SigningKey;
  let source: string;
  if (config.signingKeyPem) {
    current = signingKeyFromPem(config.signingKeyPem, config.keyId);
    source = "config";
  } else if (options.dataDir) {
    current = await keyFromDataDir(options.dataDir, config.keyId);
    source = "generated-file";
  } else {
    current = await keyFromDatabase(options);
    source = "generated";
    if (options.mode === "distributed") {
      logger.warn(
        "no TRELLIS_RECEIPT_SIGNING_KEY: signing with a key generated and kept in the database; configure a key from a secret in production",
        { key_id: current.keyId },
      );
    }
  }
  await store.savePublicKey({
    keyId: current.keyId,
    algorithm: SIGNATURE_ALGORITHM,
    publicKeyPem: publicKeyPem(current.publicKey),
    source,
  });

  const known = new Map<string, KnownKey>();
  const reload = async () => {
    for (const row of await store.publicKeys()) {
      if (known.has(row.key_id)) continue;
      try {
        known.set(row.key_id, {
          keyId: row.key_id,
          publicKey: parsePublicKey(row.public_key_pem),
          source: row.source,
          createdAt: row.created_at,
        });
      } catch (error) {
        logger.warn("ignoring an unreadable public key", {
          key_id: row.key_id,
          error: String(error),
        });
      }
    }
  };
  await reload();
  // A key registered with the same id but another public key would make old
  // receipts unverifiable: refuse to start rather than sign with it.
  const registered = known.get(current.keyId);
  if (registered && publicKeyPem(registered.publicKey) !== publicKeyPem(current.publicKey)) {
    throw new Error(
      `key id ${current.keyId} is already registered with a different public key; give the new key its own TRELLIS_RECEIPT_KEY_ID`,
    );
  }
  let lastReload = Date.now();
  return {
    current,
    publicKey: (keyId) => known.get(keyId)?.publicKey,
    async ensure(keyId) {
      if ((keyId !== undefined && known.has(keyId)) || Date.now() - lastReload < 1000) return;
      lastReload = Date.now();
      await reload();
    },
    list: () => [...known.values()],
  };
}
