/**
 * Keys an embedded deployment generates for itself when the operator set
 * none (the vault key, webhook signing secrets' sealing key): 32 random bytes kept in a
 * file of the data directory (mode 0600, base64), or — in memory, without a
 * data directory — for the lifetime of an owner object (the database), so
 * the key lives exactly as long as what it seals.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** The error for a key file that does not hold a key. */
export type KeyFileInvalid = (file: string) => Error;

const defaultInvalid: KeyFileInvalid = (file) =>
  new Error(`${file} must hold 32 bytes in base64 (delete it to make a new key)`);

function decode(text: string, file: string, invalid: KeyFileInvalid): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, "base64");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || key.length !== 32) throw invalid(file);
  return key;
}

/**
 * The key in `<dataDir>/<fileName>`, made on first use. Two processes
 * starting at once keep the first one written (the file is never overwritten).
 * `invalid` makes the error for a file that holds no key (default: an Error).
 */
export async function generatedKeyFile(
  dataDir: string,
  fileName: string,
  invalid: KeyFileInvalid = defaultInvalid,
): Promise<Buffer> {
  const file = join(dataDir, fileName);
  try {
    return decode(await readFile(file, "utf8"), file, invalid);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    },
  );
  await chmod(file, 0o600);
  return decode(await readFile(file, "utf8"), file, invalid);
}

const memoryKeys = new WeakMap<object, Map<string, Buffer>>();

/** A key made for `owner`'s lifetime (the same for the same owner and name). */
export function memoryKey(owner: object, name: string): Buffer {
  let keys = memoryKeys.get(owner);
  if (!keys) {
    keys = new Map();
    memoryKeys.set(owner, keys);
  }
  let key = keys.get(name);
  if (!key) {
    key = randomBytes(32);
    keys.set(name, key);
  }
  return key;
}
