/**
 * Message-shape validation (llm-provider §3, harness-chat §3.1): per-role
 * content rules, valid content blocks, tool call ids. Pure; returns the first
 * problem with the path of the offending field.
 */
import { ImageDetail, type Message, Role } from "@trellis/contracts/core";

/** One reason a message is malformed. */
export interface ShapeProblem {
  /** Dotted path of the field, e.g. "message.parts[1].image.media_type". */
  path: string;
  /** What is wrong, in words a user can act on. */
  message: string;
}

const INLINE_MEDIA_TYPES = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"]);

function roleWord(role: Role): string {
  return ["unspecified", "system", "user", "assistant", "tool", "agent"][role] ?? `role ${role}`;
}

/**
 * Validate one chat message on its own. `allowedRoles` defaults to the four
 * chat roles (`agent` is a Harn-only role).
 */
export function validateChatMessage(
  message: Message,
  options: { path?: string; allowedRoles?: readonly Role[] } = {},
): ShapeProblem | undefined {
  const at = options.path ?? "message";
  const allowed = options.allowedRoles ?? [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL];
  if (!allowed.includes(message.role)) {
    return {
      path: `${at}.role`,
      message: `role must be one of ${allowed.map(roleWord).join(", ")} (got ${roleWord(message.role)})`,
    };
  }
  const role = roleWord(message.role);
  // Every part must be a chat content block allowed for this role.
  for (const [i, part] of message.parts.entries()) {
    const p = `${at}.parts[${i}]`;
    switch (part.kind.case) {
      case "text":
        if (part.kind.value.text === "")
          return { path: `${p}.text`, message: "a text block must not be empty" };
        break;
      case "image": {
        if (message.role !== Role.USER) {
          return {
            path: p,
            message: `image blocks are only allowed in user messages, not ${role}`,
          };
        }
        const img = part.kind.value;
        if (img.source.case === undefined) {
          return {
            path: `${p}.image`,
            message: "an image needs a url or inline base64_data source",
          };
        }
        if (img.source.case === "url" && img.source.value === "") {
          return { path: `${p}.image.url`, message: "the image url must not be empty" };
        }
        if (img.source.case === "base64Data") {
          if (img.source.value === "") {
            return {
              path: `${p}.image.base64_data`,
              message: "inline image data must not be empty",
            };
          }
          if (!/^[A-Za-z0-9+/]+={0,2}$/.test(img.source.value)) {
            return { path: `${p}.image.base64_data`, message: "inline image data must be base64" };
          }
          if (img.mediaType === "") {
            return { path: `${p}.image.media_type`, message: "an inline image needs a media_type" };
          }
          if (!INLINE_MEDIA_TYPES.has(img.mediaType)) {
            return {
              path: `${p}.image.media_type`,
              message: `unsupported image media type ${img.mediaType} (use image/png, image/jpeg or image/webp)`,
            };
          }
        }
        if (img.detail > ImageDetail.HIGH) {
          return { path: `${p}.image.detail`, message: "detail must be auto, low or high" };
        }
        break;
      }
      case "thinking":
      case "redactedThinking":
        if (message.role !== Role.ASSISTANT) {
          return {
            path: p,
            message: `thinking blocks are only allowed in assistant messages, not ${role}`,
          };
        }
        if (part.kind.case === "thinking" && part.kind.value.text === "") {
          return { path: `${p}.thinking.text`, message: "a thinking block must not be empty" };
        }
        break;
      case undefined:
        return { path: p, message: "the content block has no type" };
      default:
        return {
          path: p,
          message: `unsupported content block type ${part.kind.case} (chat messages take text, image, thinking, redacted_thinking)`,
        };
    }
  }
  const hasContent = message.parts.length > 0;
  switch (message.role) {
    case Role.SYSTEM:
      if (!hasContent || message.parts.some((p) => p.kind.case !== "text")) {
        return { path: `${at}.content`, message: "a system message needs non-empty text content" };
      }
      // llm-provider §3: system content is a string (one text block is its equivalent).
      if (message.parts.length > 1) {
        return {
          path: `${at}.content`,
          message: "a system message's content must be a single string, not a list of blocks",
        };
      }
      break;
    case Role.USER:
      if (!hasContent) return { path: `${at}.content`, message: "a user message needs content" };
      break;
    case Role.ASSISTANT:
      if (!hasContent && message.toolCalls.length === 0) {
        return {
          path: `${at}.content`,
          message: "an assistant message needs content or tool_calls",
        };
      }
      break;
    case Role.TOOL:
      if (message.toolCallId === "") {
        return {
          path: `${at}.tool_call_id`,
          message: "a tool message needs the tool_call_id it answers",
        };
      }
      if (message.parts.some((p) => p.kind.case !== "text")) {
        return { path: `${at}.content`, message: "a tool message's content must be text" };
      }
      // llm-provider §3: a tool result is one string (structured results are serialized).
      if (message.parts.length > 1) {
        return {
          path: `${at}.content`,
          message: "a tool message's content must be a single string, not a list of blocks",
        };
      }
      break;
    default:
      break;
  }
  if (message.role !== Role.ASSISTANT && message.toolCalls.length > 0) {
    return {
      path: `${at}.tool_calls`,
      message: `tool_calls are only allowed on assistant messages, not ${role}`,
    };
  }
  if (message.role !== Role.TOOL && message.toolCallId !== "") {
    return {
      path: `${at}.tool_call_id`,
      message: `tool_call_id is only allowed on tool messages, not ${role}`,
    };
  }
  const seen = new Set<string>();
  for (const [i, call] of message.toolCalls.entries()) {
    if (call.id === "")
      return { path: `${at}.tool_calls[${i}].id`, message: "a tool call needs an id" };
    if (call.name === "")
      return { path: `${at}.tool_calls[${i}].name`, message: "a tool call needs a name" };
    // llm-provider §3: arguments are a mapping (null only when unparseable).
    const args = call.arguments?.kind;
    if (args && args.case !== "structValue" && args.case !== "nullValue") {
      return {
        path: `${at}.tool_calls[${i}].arguments`,
        message: "tool call arguments must be a JSON object",
      };
    }
    if (seen.has(call.id)) {
      return {
        path: `${at}.tool_calls[${i}].id`,
        message: `tool call id ${call.id} is used twice`,
      };
    }
    seen.add(call.id);
  }
  return undefined;
}

/**
 * Check that a tool message answers a tool call of an assistant message among
 * `earlier` (llm-provider §3: `tool_call_id` MUST match the `id` of an earlier
 * assistant ToolCall). Messages of other roles always pass.
 */
export function validateToolCallReference(
  message: Message,
  earlier: readonly Message[],
  options: { path?: string } = {},
): ShapeProblem | undefined {
  if (message.role !== Role.TOOL) return undefined;
  const answered = earlier.some(
    (m) => m.role === Role.ASSISTANT && m.toolCalls.some((c) => c.id === message.toolCallId),
  );
  if (answered) return undefined;
  return {
    path: `${options.path ?? "message"}.tool_call_id`,
    message: `tool_call_id ${message.toolCallId} does not match an earlier assistant tool call`,
  };
}

/**
 * Validate a message list: each message, and every tool message answering a
 * tool call of an earlier assistant message (llm-provider §3).
 */
export function validateTranscript(messages: readonly Message[]): ShapeProblem | undefined {
  const calls = new Set<string>();
  for (const [i, message] of messages.entries()) {
    const path = `messages[${i}]`;
    const problem = validateChatMessage(message, { path });
    if (problem) return problem;
    if (message.role === Role.TOOL && !calls.has(message.toolCallId)) {
      return {
        path: `${path}.tool_call_id`,
        message: `tool_call_id ${message.toolCallId} does not match an earlier assistant tool call`,
      };
    }
    for (const call of message.toolCalls) calls.add(call.id);
  }
  return undefined;
}
