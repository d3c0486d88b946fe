/**
 * harness-chat §3.1 / §5.1: what is checked at the send() boundary before any
 * session load or agent run. Pure.
 */
import type { Message } from "@trellis/contracts/core";
import { type ShapeProblem, validateChatMessage } from "@trellis/messages";

/** The part of a Send request that is validated up front. */
export interface InboundTurn {
  sessionId: string;
  message: Message | undefined;
}

/**
 * The first problem with an inbound turn, or undefined: a non-empty
 * `session_id` (harness-chat §5.1), then the message's role, per-role
 * content, content blocks and tool-call fields (§3.1, llm-provider §3).
 */
export function inboundProblem(turn: InboundTurn): ShapeProblem | undefined {
  if (turn.sessionId.trim() === "") {
    return { path: "session_id", message: "session_id must not be empty" };
  }
  if (turn.message === undefined) {
    return { path: "message", message: "a message is required" };
  }
  return validateChatMessage(turn.message, { path: "message" });
}
