/**
 * The rules of a memory record, pure: which scopes there are, whose owner id
 * each takes, what content may be (a string or a JSON object of at most
 * {@link MAX_MEMORY_CONTENT_BYTES} as JSON), and how a record looks.
 * A write that breaks one is refused before anything is stored.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isJsonObject, TrellisError } from "@trellis/runtime";

/** Whose memory it is (Harn v1 "Memory" scopes). */
export const MEMORY_SCOPES = ["persona", "session", "workspace", "tenant"] as const;
export type MemoryScopeName = (typeof MEMORY_SCOPES)[number];

/** Largest content, in bytes of its JSON text. */
export const MAX_MEMORY_CONTENT_BYTES = 64 * 1024;
/** Largest provenance or metadata object, in bytes of its JSON text. */
export const MAX_MEMORY_OBJECT_BYTES = 8 * 1024;
/** The owner id of tenant-scoped memory when none is given (one tenant per deployment). */
export const DEFAULT_TENANT = "default";

/** One memory record as the store keeps it. */
export interface MemoryRecord {
  id: string;
  /** Null for tenant scope. */
  workspaceId: string | null;
  scope: MemoryScopeName;
  ownerId: string;
  content: JsonValue;
  provenance: JsonObject;
  metadata: JsonObject;
  createdAt: Date;
  updatedAt: Date;
}

/** Whether `value` names a scope. */
export function isMemoryScope(value: string): value is MemoryScopeName {
  return (MEMORY_SCOPES as readonly string[]).includes(value);
}

/** @throws TrellisError `invalid_request` naming the known scopes. */
export function memoryScopeOf(value: string): MemoryScopeName {
  if (isMemoryScope(value)) return value;
  throw new TrellisError({
    reason: "invalid_request",
    message: `unknown memory scope ${JSON.stringify(value)}; scopes: ${MEMORY_SCOPES.join(", ")}`,
    param: "scope",
  });
}

/**
 * Checks content: a non-empty string or a JSON object, within the size limit.
 *
 * @throws TrellisError `invalid_request` for another shape, `payload_too_large` past the limit.
 */
export function checkMemoryContent(content: JsonValue | undefined): JsonValue {
  if (!(typeof content === "string" && content !== "") && !isJsonObject(content)) {
    throw new TrellisError({
      reason: "invalid_request",
      message: "memory content is a non-empty string or a JSON object",
      param: "content",
    });
  }
  const bytes = Buffer.byteLength(JSON.stringify(content), "utf8");
  if (bytes > MAX_MEMORY_CONTENT_BYTES) {
    throw new TrellisError({
      reason: "payload_too_large",
      message: `memory content is ${bytes} bytes as JSON; the limit is ${MAX_MEMORY_CONTENT_BYTES}`,
      param: "content",
      metadata: { limit_bytes: String(MAX_MEMORY_CONTENT_BYTES) },
    });
  }
  return content;
}

/** Checks a provenance or metadata object's size. */
export function checkMemoryObject(value: JsonObject, param: string): JsonObject {
  if (Buffer.byteLength(JSON.stringify(value), "utf8") > MAX_MEMORY_OBJECT_BYTES) {
    throw new TrellisError({
      reason: "payload_too_large",
      message: `memory ${param} is larger than ${MAX_MEMORY_OBJECT_BYTES} bytes as JSON`,
      param,
    });
  }
  return value;
}
