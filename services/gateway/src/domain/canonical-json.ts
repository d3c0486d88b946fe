/**
 * Canonical JSON: object keys sorted (by UTF-16 code units, as RFC 8785 does),
 * no whitespace. Used to compare request bodies for idempotency ("equivalent
 * request body" means the same JSON value, whatever the key order or spacing)
 * and to give free-form values (metadata, tool input) one stable key order so
 * that two reads of the same data serialize byte-identically.
 */
import { createHash } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";

/** `value` with every object's keys in sorted order (a deep copy). */
export function sortKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: { [key: string]: JsonValue } = {};
    for (const key of Object.keys(value).sort()) {
      const v = value[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/** The canonical text of a JSON value. */
export function canonicalJson(value: JsonValue): string {
  return JSON.stringify(sortKeys(value));
}

/** Hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}
