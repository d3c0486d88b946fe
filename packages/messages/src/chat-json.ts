/**
 * The chat (llm-provider §3) JSON shape of a message, and its mapping onto the
 * one canonical proto {@link Message}.
 *
 * `content` is a string or a list of blocks; `tool_calls` sit on the message,
 * not in the content. Converting chat JSON → proto → chat JSON gives back an
 * equivalent document (a one-text-block list comes back as a string, which
 * llm-provider §3.1.1 declares equivalent).
 */
import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ImageDetail,
  type Message,
  MessageSchema,
  type Part,
  PartSchema,
  Role,
  ToolCallSchema,
  Visibility,
} from "@trellis/contracts/core";

/** A content block as chat JSON (llm-provider §3.1). */
export type ChatBlockJson =
  | { type: "text"; text: string; signature?: string }
  | {
      type: "image";
      source: { type: "url"; url: string } | { type: "inline"; base64_data: string };
      media_type?: string;
      detail?: "auto" | "low" | "high";
    }
  | { type: "thinking"; text: string; signature?: string }
  | { type: "redacted_thinking"; data: string };

/** A tool call as chat JSON. */
export interface ChatToolCallJson {
  id: string;
  name: string;
  arguments?: JsonValue;
  signature?: string;
}

/** A message as chat JSON (llm-provider §3). */
export interface ChatMessageJson {
  role: string;
  content?: string | ChatBlockJson[];
  tool_calls?: ChatToolCallJson[];
  tool_call_id?: string;
  name?: string;
}

const roleByName: Record<string, Role> = {
  system: Role.SYSTEM,
  user: Role.USER,
  assistant: Role.ASSISTANT,
  tool: Role.TOOL,
  agent: Role.AGENT,
};

/** The wire name of a role ("user", …), or "" when unspecified. */
export function roleName(role: Role): string {
  switch (role) {
    case Role.SYSTEM:
      return "system";
    case Role.USER:
      return "user";
    case Role.ASSISTANT:
      return "assistant";
    case Role.TOOL:
      return "tool";
    case Role.AGENT:
      return "agent";
    default:
      return "";
  }
}

/** Parse a role name; unknown names give {@link Role.UNSPECIFIED}. */
export function parseRole(name: string): Role {
  return roleByName[name] ?? Role.UNSPECIFIED;
}

function toValue(json: JsonValue | undefined): Value | undefined {
  return json === undefined ? undefined : fromJson(ValueSchema, json);
}

const detailByName: Record<string, ImageDetail> = {
  auto: ImageDetail.AUTO,
  low: ImageDetail.LOW,
  high: ImageDetail.HIGH,
};

function blockToPart(block: ChatBlockJson): Part {
  switch (block.type) {
    case "text":
      return create(PartSchema, {
        kind: { case: "text", value: { text: block.text, signature: block.signature ?? "" } },
      });
    case "thinking":
      return create(PartSchema, {
        visibility: Visibility.INTERNAL,
        kind: { case: "thinking", value: { text: block.text, signature: block.signature ?? "" } },
      });
    case "redacted_thinking":
      return create(PartSchema, {
        visibility: Visibility.INTERNAL,
        kind: { case: "redactedThinking", value: { data: block.data } },
      });
    case "image":
      return create(PartSchema, {
        kind: {
          case: "image",
          value: {
            source:
              block.source.type === "url"
                ? { case: "url", value: block.source.url }
                : { case: "base64Data", value: block.source.base64_data },
            mediaType: block.media_type ?? "",
            detail: block.detail
              ? (detailByName[block.detail] ?? ImageDetail.UNSPECIFIED)
              : ImageDetail.UNSPECIFIED,
          },
        },
      });
  }
}

/**
 * Convert chat JSON to a proto Message. Shape is NOT validated here (use
 * {@link validateChatMessage}); unknown block types are kept out and reported by
 * {@link chatJsonProblems}.
 */
export function chatToMessage(json: ChatMessageJson): Message {
  const parts: Part[] =
    typeof json.content === "string"
      ? json.content === ""
        ? []
        : [create(PartSchema, { kind: { case: "text", value: { text: json.content } } })]
      : (json.content ?? []).map(blockToPart);
  return create(MessageSchema, {
    role: parseRole(json.role),
    parts,
    toolCalls: (json.tool_calls ?? []).map((call) =>
      create(ToolCallSchema, {
        id: call.id,
        name: call.name,
        ...(call.arguments !== undefined ? { arguments: toValue(call.arguments) } : {}),
        signature: call.signature ?? "",
      }),
    ),
    toolCallId: json.tool_call_id ?? "",
    name: json.name ?? "",
  });
}

function partToBlock(part: Part): ChatBlockJson | undefined {
  const kind = part.kind;
  switch (kind.case) {
    case "text":
      return {
        type: "text",
        text: kind.value.text,
        ...(kind.value.signature ? { signature: kind.value.signature } : {}),
      };
    case "thinking":
      return {
        type: "thinking",
        text: kind.value.text,
        ...(kind.value.signature ? { signature: kind.value.signature } : {}),
      };
    case "redactedThinking":
      return { type: "redacted_thinking", data: kind.value.data };
    case "image": {
      const source = kind.value.source;
      const detail =
        kind.value.detail === ImageDetail.LOW
          ? "low"
          : kind.value.detail === ImageDetail.HIGH
            ? "high"
            : kind.value.detail === ImageDetail.AUTO
              ? "auto"
              : undefined;
      return {
        type: "image",
        source:
          source.case === "url"
            ? { type: "url", url: source.value }
            : { type: "inline", base64_data: source.value ?? "" },
        ...(kind.value.mediaType ? { media_type: kind.value.mediaType } : {}),
        ...(detail ? { detail } : {}),
      };
    }
    default:
      // Harn-only parts (json, tool_call, …) have no chat block form.
      return undefined;
  }
}

/** Convert a proto Message to chat JSON. */
export function messageToChat(message: Message): ChatMessageJson {
  const blocks = message.parts.map(partToBlock).filter((b): b is ChatBlockJson => b !== undefined);
  const only = blocks[0];
  const content: string | ChatBlockJson[] | undefined =
    blocks.length === 1 && only?.type === "text" && !only.signature
      ? only.text
      : blocks.length === 0
        ? message.role === Role.ASSISTANT && message.toolCalls.length > 0
          ? undefined
          : ""
        : blocks;
  const json: ChatMessageJson = { role: roleName(message.role) };
  if (content !== undefined) json.content = content;
  if (message.toolCalls.length > 0) {
    json.tool_calls = message.toolCalls.map((call) => ({
      id: call.id,
      name: call.name,
      arguments: call.arguments ? toJson(ValueSchema, call.arguments) : null,
      ...(call.signature ? { signature: call.signature } : {}),
    }));
  }
  if (message.toolCallId) json.tool_call_id = message.toolCallId;
  if (message.name) json.name = message.name;
  return json;
}

/** The concatenated text of a message's text parts. */
export function textOf(message: Message): string {
  return message.parts
    .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
    .filter((t) => t !== "")
    .join("\n");
}
