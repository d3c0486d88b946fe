/**
 * Resource ids: `<prefix>_<time><random>`, unique and roughly sortable by
 * creation time (a 10-character base-32 millisecond clock, then 80 random bits).
 */
import { randomFillSync } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

function time32(ms: number): string {
  let out = "";
  let rest = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

function random32(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += ALPHABET[byte % 32];
  return out;
}

// Random bytes are drawn from the system a pool at a time: one
// `randomBytes(16)` per id was ~1 % of an embedded turn's CPU (a turn makes
// several ids), most of it the per-call crossing into the crypto binding.
const POOL_BYTES = 4096;
const pool = new Uint8Array(POOL_BYTES);
let used = POOL_BYTES;

function randomSlice(n: number): Uint8Array {
  if (used + n > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const slice = pool.subarray(used, used + n);
  used += n;
  return slice;
}

/** A new id, e.g. `newId("task")` → `task_01jd3…`. */
export function newId(prefix: string): string {
  return `${prefix}_${time32(Date.now())}${random32(randomSlice(16))}`;
}
