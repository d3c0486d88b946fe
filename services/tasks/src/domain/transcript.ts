/**
 * Transcript rules of a session: turns, truncation, forks, tool-call
 * integrity and what an event may show of a message. Pure: no I/O.
 *
 * A session's transcript is its ordered messages; positions are 0, 1, 2, …
 * without gaps. A turn starts at each user message (and at each `agent`
 * message, the Harn role of another agent's input): turn k holds the k-th
 * turn-starting message and everything after it up to the next one. Messages
 * before the first turn start (e.g. a system prompt) are the preamble; they
 * count as turn 0 and truncation always keeps them.
 */
import { create } from "@bufbuild/protobuf";
import {
  type Message,
  MessageSchema,
  type Part,
  Role,
  ToolResultStatus,
  Visibility,
} from "@trellis/contracts/core";
import { invalidRequest } from "./errors.js";

/** Whether `message` starts a new turn. */
export function startsTurn(message: Pick<Message, "role">): boolean {
  return message.role === Role.USER || message.role === Role.AGENT;
}

/** Turn numbers for messages appended to a transcript that already has `turnCount` turns. */
export function assignTurns(
  turnCount: bigint,
  messages: readonly Pick<Message, "role">[],
): { turns: bigint[]; turnCount: bigint } {
  let count = turnCount;
  const turns = messages.map((message) => {
    if (startsTurn(message)) count += 1n;
    return count > 0n ? count - 1n : 0n;
  });
  return { turns, turnCount: count };
}

/** What a truncation does to a transcript. */
export interface TruncationPlan {
  /** Messages at this position and after are dropped. */
  cut: bigint;
  dropped: bigint;
  messageCount: bigint;
  turnCount: bigint;
}

/**
 * Keep the first `keepTurns` turns (Agents Protocol "Session": truncate keeps
 * the first N turns and drops all later turns in place). `nextTurnStart` is
 * the position of the (keepTurns+1)-th turn-starting message, or undefined
 * when the transcript has no more than `keepTurns` turns (nothing to drop).
 */
export function planTruncation(
  transcript: { messageCount: bigint; turnCount: bigint },
  keepTurns: bigint,
  nextTurnStart: bigint | undefined,
): TruncationPlan {
  if (keepTurns < 0n) throw invalidRequest("keep_turns must not be negative", "keep_turns");
  if (nextTurnStart === undefined || keepTurns >= transcript.turnCount) {
    return {
      cut: transcript.messageCount,
      dropped: 0n,
      messageCount: transcript.messageCount,
      turnCount: transcript.turnCount,
    };
  }
  return {
    cut: nextTurnStart,
    dropped: transcript.messageCount - nextTurnStart,
    messageCount: nextTurnStart,
    turnCount: keepTurns,
  };
}

/**
 * How many messages a fork copies: `atMessageCount` when given (at most the
 * whole transcript), else the whole transcript.
 */
export function forkLength(messageCount: bigint, atMessageCount: bigint): bigint {
  if (atMessageCount <= 0n) return messageCount;
  if (atMessageCount > messageCount) {
    throw invalidRequest(
      `at_message_count ${atMessageCount} is past the end of the transcript (${messageCount} messages)`,
      "at_message_count",
    );
  }
  return atMessageCount;
}

/** Text of the synthetic tool result for a call a canceled turn never answered. */
export function interruptedToolText(name: string, reason: string): string {
  return `Tool call ${name || "(unnamed)"} was interrupted: ${reason}. It did not return a result.`;
}

function callsOf(message: Message): { id: string; name: string }[] {
  const calls = message.toolCalls.map((c) => ({ id: c.id, name: c.name }));
  for (const part of message.parts) {
    if (part.kind.case === "toolCall") {
      calls.push({ id: part.kind.value.toolCallId, name: part.kind.value.name });
    }
  }
  return calls;
}

function answersOf(message: Message): string[] {
  const ids = message.role === Role.TOOL && message.toolCallId ? [message.toolCallId] : [];
  for (const part of message.parts) {
    if (part.kind.case === "toolResult") ids.push(part.kind.value.toolCallId);
  }
  return ids;
}

/**
 * Tool messages answering every tool call in `messages` that no later
 * message answers, in call order — so a transcript cut short by a cancel or
 * an interrupt stays valid for the next model call (llm-provider §3: every
 * assistant tool call has a tool result). Each says in words that the call
 * was interrupted (`reason`) and carries `metadata.synthetic = true` and
 * `metadata.status = "interrupted"`.
 */
export function syntheticToolResults(messages: readonly Message[], reason: string): Message[] {
  const open = new Map<string, string>();
  for (const message of messages) {
    for (const id of answersOf(message)) open.delete(id);
    if (message.role === Role.ASSISTANT || message.role === Role.AGENT) {
      for (const call of callsOf(message)) if (call.id) open.set(call.id, call.name);
    }
  }
  return [...open].map(([id, name]) =>
    create(MessageSchema, {
      role: Role.TOOL,
      toolCallId: id,
      parts: [{ kind: { case: "text", value: { text: interruptedToolText(name, reason) } } }],
      metadata: {
        synthetic: true,
        status: "interrupted",
        tool_result_status: ToolResultStatus[ToolResultStatus.INTERRUPTED],
      },
    }),
  );
}

/** A turn's output as it goes into the transcript: `messages`, then synthetic results for open calls. */
export function closeToolCalls(messages: readonly Message[], reason: string): Message[] {
  const synthetic = syntheticToolResults(messages, reason);
  return synthetic.length === 0 ? [...messages] : [...messages, ...synthetic];
}

function effectiveVisibility(part: Part): Visibility {
  if (part.visibility !== Visibility.UNSPECIFIED) return part.visibility;
  return part.kind.case === "thinking" || part.kind.case === "redactedThinking"
    ? Visibility.INTERNAL
    : Visibility.PUBLIC;
}

/**
 * The message as an event may show it: only public parts (Agents Protocol
 * "Privacy and redaction": hidden reasoning never appears in events; thinking
 * is internal unless marked public). The transcript keeps everything.
 */
export function publicView(message: Message): Message {
  if (message.parts.every((p) => effectiveVisibility(p) === Visibility.PUBLIC)) return message;
  return {
    ...message,
    parts: message.parts.filter((p) => effectiveVisibility(p) === Visibility.PUBLIC),
  };
}

/** Plain text of a message's text parts. */
export function textOf(message: Message): string {
  return message.parts.flatMap((p) => (p.kind.case === "text" ? [p.kind.value.text] : [])).join("");
}

/** An Outcome summary: the last assistant text of the output, at most 280 characters. */
export function summarize(messages: readonly Message[], fallback: string): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i] as Message;
    if (message.role !== Role.ASSISTANT && message.role !== Role.AGENT) continue;
    const text = textOf(message).trim();
    if (text) return text.length > 280 ? `${text.slice(0, 279)}…` : text;
  }
  return fallback;
}
