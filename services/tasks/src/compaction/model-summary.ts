/**
 * The `model` compaction strategy: the agent's own backend writes the
 * checkpoint's summary. The summarised turns are rendered as plain text (so
 * any provider accepts them, tool calls included) and sent through the
 * executor seam as one tool-less, one-step request: the agent's definition
 * with its `system` replaced by {@link SUMMARY_INSTRUCTION}, no tools, no
 * `ask_user`, `budgets.max_steps` 1 and no streaming. The reply's text is
 * the summary.
 *
 * A summary is identified by {@link summaryDigest}: the agent and the exact
 * text the model was asked to summarise. The compactor stores it under that
 * key once and every later turn (and a replay of the task, whose forked
 * session holds the same turns) reads it back instead of asking again.
 */
import { create, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import type { AgentExecutor, ExecutionRequest } from "@trellis/execution";
import { sha256Of } from "../domain/replay.js";

/** The strategy name recorded on `context.compacted` for a model-written summary. */
export const MODEL_STRATEGY = "model";

/** Version of the rendering and instruction below; part of the digest. */
export const MODEL_SUMMARY_VERSION = 1;

/** The system prompt of a summarising call. */
export const SUMMARY_INSTRUCTION =
  "You compact a conversation so it fits the context window. Summarise the earlier turns given " +
  "below for the assistant that will continue the conversation: the user's goals and requests, " +
  "decisions made, facts learned (including tool results that still matter), commitments and " +
  "open questions. Be concise and factual; do not invent anything; write plain text, no preamble.";

// Longest rendering of one message part, and of the whole transcript sent.
const PART_CHARS = 2_000;
const TRANSCRIPT_CHARS = 60_000;

const ROLE_LABELS: Partial<Record<Role, string>> = {
  [Role.USER]: "user",
  [Role.ASSISTANT]: "assistant",
  [Role.AGENT]: "assistant",
  [Role.SYSTEM]: "system",
  [Role.TOOL]: "tool",
};

function clip(text: string): string {
  return text.length > PART_CHARS ? `${text.slice(0, PART_CHARS)}…` : text;
}

function json(value: Parameters<typeof toJson<typeof ValueSchema>>[1] | undefined): string {
  return value === undefined ? "null" : JSON.stringify(toJson(ValueSchema, value));
}

function renderMessage(message: Message): string[] {
  const label = ROLE_LABELS[message.role] ?? "message";
  const lines: string[] = [];
  const called = new Set<string>();
  for (const part of message.parts) {
    switch (part.kind.case) {
      case "text":
        if (part.kind.value.text.trim() !== "")
          lines.push(`${label}: ${clip(part.kind.value.text)}`);
        break;
      case "json":
        lines.push(`${label} (json): ${clip(json(part.kind.value.value))}`);
        break;
      case "toolCall":
        called.add(part.kind.value.toolCallId);
        lines.push(`${label} called ${part.kind.value.name}(${clip(json(part.kind.value.input))})`);
        break;
      case "toolResult":
        lines.push(`tool result: ${clip(json(part.kind.value.output))}`);
        break;
      default:
        // Thinking, images and references are not summarised.
        break;
    }
  }
  for (const call of message.toolCalls) {
    if (!called.has(call.id))
      lines.push(`${label} called ${call.name}(${clip(json(call.arguments))})`);
  }
  return lines;
}

/**
 * The transcript text a model summarises: one block per turn, numbered.
 * Past {@link TRANSCRIPT_CHARS} the oldest turns are left out (and said to be).
 */
export function renderTurns(turns: readonly (readonly Message[])[]): string {
  const blocks = turns.map((turn, i) =>
    [`Turn ${i + 1}:`, ...turn.flatMap(renderMessage)].join("\n"),
  );
  let total = 0;
  let first = blocks.length;
  while (first > 0 && total + blocks[first - 1]!.length <= TRANSCRIPT_CHARS) {
    first -= 1;
    total += blocks[first]!.length + 2;
  }
  // Always send at least the newest turn (clipped parts keep it bounded).
  if (first === blocks.length && blocks.length > 0) first = blocks.length - 1;
  const omitted = first > 0 ? [`(${first} older turn${first === 1 ? "" : "s"} omitted)`] : [];
  return [...omitted, ...blocks.slice(first)].join("\n\n");
}

/** The key a summary is stored under: the agent and the text it summarises. */
export function summaryDigest(agentId: string, rendered: string): string {
  return sha256Of({ version: MODEL_SUMMARY_VERSION, agent: agentId, transcript: rendered });
}

/** What a summarising call is about. */
export interface SummaryCall {
  taskId: string;
  sessionId: string;
  workspaceId: string;
  agent: { id: string; backend: string; definition: ExecutionRequest["agent"]["definition"] };
  /** {@link renderTurns} of the summarised turns. */
  rendered: string;
  signal: AbortSignal;
}

/** Why a model summary could not be had. */
export class SummaryUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SummaryUnavailableError";
  }
}

/** The one-step, tool-less request asking the agent's backend for a summary. */
export function summaryRequest(call: SummaryCall): ExecutionRequest {
  const {
    tools: _tools,
    require_approval: _approval,
    budgets: _budgets,
    ...definition
  } = call.agent.definition;
  return {
    taskId: call.taskId,
    sessionId: call.sessionId,
    workspaceId: call.workspaceId,
    agent: {
      id: call.agent.id,
      backend: call.agent.backend,
      definition: {
        ...definition,
        system: SUMMARY_INSTRUCTION,
        tools: [],
        ask_user: false,
        stream: false,
        budgets: { max_steps: 1 },
      },
      tools: [],
      // Summarising has no side effect: safe to run again.
      safeToRetry: true,
    },
    history: [],
    input: create(MessageSchema, {
      role: Role.USER,
      parts: [
        {
          kind: {
            case: "text",
            value: {
              text: `Summarise these earlier turns of the conversation:\n\n${call.rendered}`,
            },
          },
        },
      ],
    }),
    signal: call.signal,
  };
}

/** Asks the agent's backend for a summary; throws {@link SummaryUnavailableError} when it gives none. */
export async function summarizeWithModel(
  executor: AgentExecutor,
  call: SummaryCall,
): Promise<string> {
  const result = await executor.execute(summaryRequest(call));
  if (result.status !== "completed") {
    const why =
      result.status === "failed" ? `${result.category}: ${result.message}` : result.status;
    throw new SummaryUnavailableError(`the summarising call ended ${why}`);
  }
  const reply = result.messages
    .filter((m) => m.role === Role.ASSISTANT || m.role === Role.AGENT)
    .map((m) =>
      m.parts
        .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
        .join("")
        .trim(),
    )
    .filter((t) => t !== "")
    .at(-1);
  if (!reply) throw new SummaryUnavailableError("the summarising call returned no text");
  return reply;
}
