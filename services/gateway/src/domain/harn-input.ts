/**
 * Harn JSON → proto: the request bodies' parts, messages, task inputs and
 * enum fields, read through a {@link JsonReader} so a refusal names the
 * field (`invalid_request` with its JSON path). The way out, and the name
 * tables both use, are in `harn-json.ts`.
 *
 * Pure: no I/O.
 */
import { create, type JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import {
  type Message,
  MessageSchema,
  type Part,
  PartSchema,
  Role,
  ToolResultStatus,
  Visibility,
} from "@trellis/contracts/core";
import { type ArtifactKind, AutonomyTier, ReceiptPolicy } from "@trellis/contracts/tasks";
import { parseRole } from "@trellis/messages";
import { errors } from "@trellis/runtime";
import {
  artifactKinds,
  artifactKindValues,
  autonomyTiers,
  autonomyValues,
  receiptPolicies,
  receiptPolicyValues,
  toValue,
  visibilityNames,
  visibilityValue,
} from "./harn-json.js";
import { fieldPath, isJsonObject, JsonReader } from "./json-input.js";

/** Parse a Harn visibility (default public). */
export function parseVisibility(reader: JsonReader, key = "visibility"): Visibility {
  const name = reader.enum(key, visibilityNames);
  return visibilityValue(name ?? "public");
}

/** Parse one PartInput. */
export function partFromHarn(reader: JsonReader): Part {
  const visibility = parseVisibility(reader);
  const type = reader.requiredString("type");
  const jsonOf = (key: string): Value => toValue(reader.raw(key) ?? null);
  switch (type) {
    case "text": {
      const text = reader.string("text");
      if (text === undefined) throw missing(reader, "text");
      return create(PartSchema, { visibility, kind: { case: "text", value: { text } } });
    }
    case "json":
      return create(PartSchema, {
        visibility,
        kind: { case: "json", value: { value: jsonOf("value") } },
      });
    case "tool_call": {
      const input = reader.object("input") ?? {};
      return create(PartSchema, {
        visibility,
        kind: {
          case: "toolCall",
          value: {
            toolCallId: reader.requiredString("tool_call_id"),
            name: reader.requiredString("name"),
            input: toValue(input),
          },
        },
      });
    }
    case "tool_result": {
      const status = reader.enum("status", ["ok", "error"] as const) ?? "ok";
      return create(PartSchema, {
        visibility,
        kind: {
          case: "toolResult",
          value: {
            toolCallId: reader.requiredString("tool_call_id"),
            output: jsonOf("output"),
            status: status === "ok" ? ToolResultStatus.OK : ToolResultStatus.ERROR,
          },
        },
      });
    }
    case "artifact_ref":
      return create(PartSchema, {
        visibility,
        kind: { case: "artifactRef", value: { artifactId: reader.requiredString("artifact_id") } },
      });
    case "file_ref":
      return create(PartSchema, {
        visibility,
        kind: {
          case: "fileRef",
          value: { uri: reader.requiredString("uri"), mimeType: reader.string("mime_type") ?? "" },
        },
      });
    case "image_ref":
      return create(PartSchema, {
        visibility,
        kind: {
          case: "imageRef",
          value: {
            artifactId: reader.requiredString("artifact_id"),
            mimeType: reader.string("mime_type") ?? "",
          },
        },
      });
    default: {
      const param = fieldPath(reader.path, "type");
      throw errors.invalid(
        `${param} must be one of text, json, tool_call, tool_result, artifact_ref, file_ref, image_ref, got ${JSON.stringify(type)}`,
        param,
      );
    }
  }
}

function missing(reader: JsonReader, key: string) {
  const param = fieldPath(reader.path, key);
  return errors.invalid(`missing required field: ${param}`, param);
}

/** Parse a MessageInput (`{role, parts, metadata}`). */
export function messageFromHarn(reader: JsonReader): Message {
  const roleText = reader.string("role");
  if (roleText === undefined) throw missing(reader, "role");
  const role = parseRole(roleText);
  if (role === Role.UNSPECIFIED) {
    const param = fieldPath(reader.path, "role");
    throw errors.invalid(
      `${param} must be one of user, assistant, system, tool, agent, got ${JSON.stringify(roleText)}`,
      param,
    );
  }
  const parts = reader.objects("parts");
  if (parts === undefined) throw missing(reader, "parts");
  const metadata = reader.object("metadata");
  const message = create(MessageSchema, {
    role,
    parts: parts.map(partFromHarn),
    ...(metadata ? { metadata } : {}),
  });
  // A tool message answers one call: keep the chat-style link too.
  const result = message.parts.find((p) => p.kind.case === "toolResult");
  if (role === Role.TOOL && result?.kind.case === "toolResult") {
    message.toolCallId = result.kind.value.toolCallId;
  }
  return message;
}

/**
 * Parse a task `input`: a MessageInput, or any other JSON object (wrapped as
 * a user message with one `json` part), or a plain string (one `text` part).
 */
export function taskInputFromHarn(value: JsonValue | undefined, path: string): Message {
  if (value === undefined || value === null) {
    throw errors.invalid(`missing required field: ${path}`, path);
  }
  if (typeof value === "string") {
    return create(MessageSchema, {
      role: Role.USER,
      parts: [{ visibility: Visibility.PUBLIC, kind: { case: "text", value: { text: value } } }],
    });
  }
  if (!isJsonObject(value)) {
    throw errors.invalid(`${path} must be a message object`, path);
  }
  if ("role" in value || "parts" in value) return messageFromHarn(new JsonReader(value, path));
  return create(MessageSchema, {
    role: Role.USER,
    parts: [
      { visibility: Visibility.PUBLIC, kind: { case: "json", value: { value: toValue(value) } } },
    ],
  });
}

/** Parse an artifact kind. */
export function parseArtifactKind(reader: JsonReader): ArtifactKind {
  const name = reader.enum("kind", artifactKinds);
  if (name === undefined) throw missing(reader, "kind");
  return artifactKindValues[name];
}

/** Parse an autonomy tier (default suggest). */
export function parseAutonomyTier(reader: JsonReader): AutonomyTier {
  const name = reader.enum("autonomy_tier", autonomyTiers);
  return name === undefined ? AutonomyTier.UNSPECIFIED : autonomyValues[name];
}

/** Parse a receipt policy. */
export function parseReceiptPolicy(reader: JsonReader): ReceiptPolicy {
  const name = reader.enum("receipt_policy", receiptPolicies);
  return name === undefined ? ReceiptPolicy.UNSPECIFIED : receiptPolicyValues[name];
}
