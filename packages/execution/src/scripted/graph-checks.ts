/** Validation of the parts of a graph document: messages and stream options. */

import { isRecord } from "@trellis/runtime";
import { GraphDefinitionError, type GraphMessage } from "./graph-types.js";

const ROLES = new Set(["system", "user", "assistant", "tool"]);

/** Check one message of an update node (llm-provider §3 shape). */
export function checkMessage(value: unknown, path: string): GraphMessage {
  if (!isRecord(value)) throw new GraphDefinitionError("must be an object", path);
  if (typeof value.role !== "string" || !ROLES.has(value.role)) {
    throw new GraphDefinitionError("role must be system, user, assistant or tool", `${path}.role`);
  }
  if (
    value.content !== undefined &&
    typeof value.content !== "string" &&
    !Array.isArray(value.content)
  ) {
    throw new GraphDefinitionError(
      "content must be a string or a list of blocks",
      `${path}.content`,
    );
  }
  if (value.tool_calls !== undefined) {
    if (!Array.isArray(value.tool_calls)) {
      throw new GraphDefinitionError("tool_calls must be a list", `${path}.tool_calls`);
    }
    value.tool_calls.forEach((call, i) => {
      if (!isRecord(call) || typeof call.id !== "string" || typeof call.name !== "string") {
        throw new GraphDefinitionError(
          "a tool call needs string id and name",
          `${path}.tool_calls[${i}]`,
        );
      }
    });
  }
  if (value.tool_call_id !== undefined && typeof value.tool_call_id !== "string") {
    throw new GraphDefinitionError("tool_call_id must be a string", `${path}.tool_call_id`);
  }
  return value as unknown as GraphMessage;
}

const STREAM_FIELDS = new Set(["chunk_chars", "delay_ms"]);

/** Check an update node's `stream` option. */
export function checkStream(value: unknown, path: string): void {
  if (!isRecord(value)) {
    throw new GraphDefinitionError("stream must be an object like {chunk_chars, delay_ms}", path);
  }
  for (const key of Object.keys(value)) {
    if (!STREAM_FIELDS.has(key)) {
      throw new GraphDefinitionError(
        "unknown stream field (expected chunk_chars, delay_ms)",
        `${path}.${key}`,
      );
    }
  }
  const chars = value.chunk_chars;
  if (
    chars !== undefined &&
    (typeof chars !== "number" || !Number.isInteger(chars) || chars < 1 || chars > 10_000)
  ) {
    throw new GraphDefinitionError(
      "chunk_chars must be a whole number of characters in 1…10000",
      `${path}.chunk_chars`,
    );
  }
  const delay = value.delay_ms;
  if (
    delay !== undefined &&
    (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0 || delay > 60_000)
  ) {
    throw new GraphDefinitionError(
      "delay_ms must be a number of milliseconds in 0…60000",
      `${path}.delay_ms`,
    );
  }
}
