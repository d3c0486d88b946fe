/**
 * The JSON vocabulary every package and service shares: what a JSON object
 * is, and the one canonical JSON form.
 *
 * Canonical JSON is RFC 8785 (JCS), from the maintained `json-canonicalize`
 * package: object members sorted by UTF-16 code units, ECMAScript number
 * serialization, no whitespace. Receipts hash and sign it, so its bytes must
 * never change (services/receipts/test/canonical.test.ts holds the RFC's
 * test vectors). RFC 8785 needs I-JSON, which has no lone surrogates; by
 * default they are refused. Where the text is only compared with other texts
 * of this process's making (an idempotency request hash) they may be kept,
 * escaped as JSON.stringify writes them.
 *
 * Pure: no I/O.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { canonicalize } from "json-canonicalize";

/** Whether `value` is a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The same test as {@link isJsonObject} for a value not known to be JSON
 * (its members stay `unknown`).
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Options of {@link canonicalJson}. */
export interface CanonicalJsonOptions {
  /**
   * Strings holding a lone surrogate: `"refuse"` (default; RFC 8785 needs
   * I-JSON) throws, `"escape"` keeps them as JSON.stringify escapes them.
   */
  loneSurrogates?: "refuse" | "escape";
}

/**
 * RFC 8785 canonical text of a JSON value. Throws for undefined, for values
 * JSON cannot carry (NaN, Infinity; the library's error) and, unless told to
 * escape them, for lone surrogates (a TypeError).
 */
export function canonicalJson(value: unknown, options?: CanonicalJsonOptions): string {
  if (value === undefined) throw new TypeError("cannot canonicalize undefined");
  const text = canonicalize(value);
  if (options?.loneSurrogates !== "escape" && hasLoneSurrogate(text)) {
    throw new TypeError("a string holds a lone surrogate, which RFC 8785 (I-JSON) does not allow");
  }
  return text;
}

/**
 * Whether JSON text escapes a lone surrogate (`\udXXX` with XXX in d800–dfff).
 * ECMAScript's JSON.stringify, which RFC 8785 serializers use for strings,
 * writes a paired surrogate as the character itself and a lone one as a
 * lower-case escape; an escape counts only after an even run of backslashes.
 */
export function hasLoneSurrogate(text: string): boolean {
  return text.includes("\\ud") && LONE_SURROGATE_ESCAPE.test(text);
}

const LONE_SURROGATE_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;
