/**
 * How proto values are kept in columns: whole messages as protobuf binary,
 * message lists size-delimited in one `bytea`, JSON documents as JSON text.
 */
import { fromBinary, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { sizeDelimitedEncode, sizeDelimitedPeek } from "@bufbuild/protobuf/wire";
import { ExecutionRequirementsSchema } from "@trellis/contracts/adapters";
import { type Message, MessageSchema } from "@trellis/contracts/core";
import {
  type ExecutionRequirements,
  requirementsFromProto,
  requirementsToProto,
} from "@trellis/execution";

const EMPTY = new Uint8Array(0);

/** Messages, in order, as one size-delimited byte string. */
export function encodeMessages(messages: readonly Message[]): Uint8Array {
  if (messages.length === 0) return EMPTY;
  const chunks = messages.map((m) => sizeDelimitedEncode(MessageSchema, m));
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** The inverse of {@link encodeMessages}; null reads as no messages. */
export function decodeMessages(data: Uint8Array | null): Message[] {
  if (!data || data.length === 0) return [];
  const out: Message[] = [];
  let rest = data;
  for (;;) {
    const peek = sizeDelimitedPeek(rest);
    if (peek.eof) return out;
    out.push(fromBinary(MessageSchema, rest.subarray(peek.offset, peek.offset + peek.size)));
    rest = rest.subarray(peek.offset + peek.size);
  }
}

/** One message as binary. */
export function encodeMessage(message: Message): Uint8Array {
  return toBinary(MessageSchema, message);
}

/** One message from binary. */
export function decodeMessage(data: Uint8Array): Message {
  return fromBinary(MessageSchema, data);
}

/** A JSON value as the text a jsonb parameter takes. */
export function jsonText(value: JsonValue | undefined): string {
  return JSON.stringify(value ?? {});
}

/** The key that marks a wrapped resume_payload (never a payload's own key at the top). */
const RESUME_KEY = "$resume";

/**
 * The resume_payload column's text for a resume with `payload`: the payload
 * wrapped (`{"$resume": …}`), so a signal without a payload (or with JSON
 * null) still marks the task as resuming; a bare jsonb `null` reads back as
 * null, like no resume at all, and the run would start over from its entry.
 */
export function resumeText(payload: JsonValue | undefined): string {
  return JSON.stringify({ [RESUME_KEY]: payload ?? null });
}

/**
 * The payload a resume_payload column holds; undefined when the task is not
 * resuming. Rows written before the wrapper (a task queued for resume across
 * an upgrade) hold the payload bare: read as it is, so nothing is lost.
 */
export function resumePayloadOf(column: JsonValue | null): { payload: JsonValue } | undefined {
  if (column === null) return undefined;
  if (typeof column === "object" && !Array.isArray(column) && Object.hasOwn(column, RESUME_KEY)) {
    return { payload: (column as Record<string, JsonValue>)[RESUME_KEY] ?? null };
  }
  return { payload: column };
}

/** A task's own requirements as stored (ExecutionRequirements, binary); null when none. */
export function encodeRequirements(value: ExecutionRequirements | undefined): Uint8Array | null {
  return value && Object.keys(value).length > 0
    ? toBinary(ExecutionRequirementsSchema, requirementsToProto(value))
    : null;
}

/** The stored requirements back (`{}` when none: spread it into a claim). */
export function decodeRequirements(raw: Uint8Array | null): {
  requirements?: ExecutionRequirements;
} {
  if (raw === null) return {};
  const requirements = requirementsFromProto(fromBinary(ExecutionRequirementsSchema, raw));
  return requirements ? { requirements } : {};
}
