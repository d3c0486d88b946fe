/**
 * Sorted keys and hashes. {@link sortKeys} gives free-form values (metadata,
 * tool input) one stable key order so that two reads of the same data
 * serialize byte-identically. Canonical JSON itself (idempotency request
 * hashes: "equivalent request body" means the same JSON value, whatever the
 * key order or spacing) is `canonicalJson` of `@trellis/runtime` (RFC 8785).
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

/** Hex SHA-256 of a string (UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}
