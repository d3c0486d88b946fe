/**
 * Shared pieces of the wire mappings: canonical messages as chat JSON
 * (llm-provider §3) and the assistant message a provider answered.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { type Message, Role } from "@trellis/contracts/core";
import {
  type ChatBlockJson,
  type ChatMessageJson,
  type ChatToolCallJson,
  chatToMessage,
  messageToChat,
} from "@trellis/messages";
import { ProviderError } from "./provider-error.js";
import { findUnstorableText } from "./unstorable-text.js";

/** A message ready for a wire mapping: a chat role the providers know. */
export interface WireMessage {
  role: "system" | "user" | "assistant" | "tool";
  /** Text, or content blocks (text, image, thinking, redacted thinking). */
  content: string | ChatBlockJson[];
  toolCalls: ChatToolCallJson[];
  toolCallId: string;
}

/**
 * Canonical messages as chat JSON for a provider. Agent-role messages (Harn:
 * another agent spoke) become user messages; an unknown role is a request the
 * provider cannot take (`provider_invalid_request`, llm-provider §3).
 */
export function toWireMessages(messages: readonly Message[]): WireMessage[] {
  return messages.map((message, index) => {
    const chat: ChatMessageJson = messageToChat(message);
    const role = message.role === Role.AGENT ? "user" : chat.role;
    if (role !== "system" && role !== "user" && role !== "assistant" && role !== "tool") {
      throw new ProviderError({
        category: "provider_invalid_request",
        message: `message ${index} has no chat role`,
      });
    }
    if (role === "tool" && !chat.tool_call_id) {
      throw new ProviderError({
        category: "provider_invalid_request",
        message: `tool message ${index} has no tool_call_id`,
      });
    }
    return {
      role,
      content: chat.content ?? "",
      toolCalls: chat.tool_calls ?? [],
      toolCallId: chat.tool_call_id ?? "",
    };
  });
}

/** The text of chat content (text blocks joined), for roles that take only text. */
export function plainText(content: string | ChatBlockJson[]): string {
  if (typeof content === "string") return content;
  return content
    .map((block) => (block.type === "text" ? block.text : ""))
    .filter((text) => text !== "")
    .join("\n");
}

/**
 * Builds the canonical assistant message of a response. Tool-call arguments
 * must be JSON objects unless the provider reported an error (llm-provider §3,
 * "Validation under finish_reason: error"); otherwise the response is
 * `provider_invalid_response`.
 */
export function assistantMessage(
  blocks: ChatBlockJson[],
  toolCalls: { id: string; name: string; argumentsText?: string; arguments?: JsonValue }[],
  degraded: boolean,
): Message {
  const calls: ChatToolCallJson[] = toolCalls.map((call, index) => {
    let args: JsonValue | null | undefined = call.arguments;
    if (args === undefined) {
      args = parseObject(call.argumentsText ?? "");
    }
    const valid =
      typeof args === "object" && args !== null && !Array.isArray(args) && call.name !== "";
    if (!valid && !degraded) {
      throw new ProviderError({
        category: "provider_invalid_response",
        message: `tool call ${index} (${call.id || "no id"}) has ${call.name === "" ? "no name" : "arguments that are not a JSON object"}`,
      });
    }
    return { id: call.id, name: call.name, arguments: valid ? (args as JsonObject) : null };
  });
  const content = blocks.filter((block) => block.type !== "text" || block.text !== "");
  // Text no store can hold fails here, typed, instead of at every recording attempt.
  const poison = findUnstorableText(content, "content") ?? findUnstorableText(calls, "tool_calls");
  if (poison) {
    throw new ProviderError({
      category: "provider_invalid_response",
      message: `the response's ${poison.path} holds ${poison.reason}, which cannot be recorded`,
    });
  }
  return chatToMessage({
    role: "assistant",
    content,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  });
}

function parseObject(text: string): JsonValue | null {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return null;
  }
}
