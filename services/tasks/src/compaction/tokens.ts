/**
 * Token estimates for context budgets. Deliberately simple and model-free:
 * one token per four characters of what the agent would read — text parts,
 * tool call names and their JSON arguments, tool results' JSON output, JSON
 * parts and thinking text — rounded up, plus four tokens of framing per message. Good
 * enough to decide when to compact; never used for billing.
 */
import { toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Message } from "@trellis/contracts/core";

/** Characters per estimated token. */
export const CHARS_PER_TOKEN = 4;
/** Estimated tokens of one message's role and framing. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

function jsonLength(value: Value | undefined): number {
  return value === undefined ? 0 : JSON.stringify(toJson(ValueSchema, value)).length;
}

/** The characters of `message` an agent reads. */
export function messageChars(message: Message): number {
  let chars = message.name.length;
  for (const part of message.parts) {
    switch (part.kind.case) {
      case "text":
        chars += part.kind.value.text.length;
        break;
      case "toolCall":
        chars += part.kind.value.name.length + jsonLength(part.kind.value.input);
        break;
      case "toolResult":
        chars += jsonLength(part.kind.value.output);
        break;
      case "json":
        chars += jsonLength(part.kind.value.value);
        break;
      case "thinking":
        chars += part.kind.value.text.length;
        break;
      default:
        break;
    }
  }
  for (const call of message.toolCalls) chars += call.name.length + jsonLength(call.arguments);
  return chars;
}

/** Estimated tokens of one message: ceil(chars / 4) + 4. */
export function estimateTokens(message: Message): number {
  return Math.ceil(messageChars(message) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS;
}
