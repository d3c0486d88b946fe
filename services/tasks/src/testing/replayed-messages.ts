/**
 * What a replayed message must reproduce of its source: the message without
 * what a replay gives anew (its id, its time and its `replay` marker), for
 * tests that compare a replay's transcript with its source's.
 */
import { clone, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Message, MessageSchema } from "@trellis/contracts/core";

/** The message as JSON without its id, its time and its `replay` marker. */
export function comparable(message: Message | undefined): JsonValue {
  const copy = clone(MessageSchema, message as Message);
  copy.id = "";
  copy.createdAt = undefined;
  const metadata: JsonObject = { ...(copy.metadata ?? {}) };
  delete metadata.replay;
  copy.metadata = Object.keys(metadata).length > 0 ? metadata : undefined;
  return toJson(MessageSchema, copy);
}
