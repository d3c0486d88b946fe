/**
 * Context compaction: when the history a turn would be given passes its
 * token budget, the older turns are replaced by one summary message (the
 * compaction checkpoint) and the agent gets `[preamble, summary, recent
 * turns]`. The transcript in storage is never touched: compaction only
 * changes what one turn is handed.
 *
 * Strategy `first_line` (deterministic): each summarised turn becomes the
 * first line of its user message and of its first assistant reply, plus the
 * names of the tools it called. The plan is always made with it; where the
 * agent's strategy is `model`, the compactor (`./index.ts`) then swaps the
 * checkpoint's summary for the model's (stored once per checkpoint) with
 * {@link withSummary}. Where the checkpoint lies never depends on the
 * strategy: it is planned with the deterministic summary's size.
 *
 * The plan is a pure function of the transcript and the settings. Where the
 * checkpoint lies is found by replaying the rule over the transcript's turns
 * (each user message is a turn's input): at each turn, if the history it saw
 * (with the current checkpoint applied) plus its input passed the budget, the
 * checkpoint moved up to keep only the last `keep_recent_turns` turns. So a
 * restarted replica, or another one, reaches the same checkpoint without
 * storing it, and a turn records `context.compacted` exactly when the
 * checkpoint moved at that turn (and `context.warning` when the history
 * first reaches `warn_percent` of the budget after the last checkpoint). The
 * `context.compacted` event carries the summary, so the checkpoint is in the
 * log too.
 */
import { create, type JsonValue } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { CONTEXT_SUMMARY_NAME } from "@trellis/execution";
import type { CompactionSettings } from "./config.js";
import { estimateTokens } from "./tokens.js";

/** The summarising strategy's name, recorded on `context.compacted`. */
export const COMPACTION_STRATEGY = "first_line";

// Longest line kept per summarised message.
const LINE_CHARS = 160;

/** An event the turn records (same shape as turn progress). */
export interface ContextItem {
  kind: typeof EVENT_KIND.contextCompacted | typeof EVENT_KIND.contextWarning;
  data: { [key: string]: JsonValue };
}

/** The compaction checkpoint a turn's history is cut at. */
export interface PlannedCheckpoint {
  /** History index the summary ends at (exclusive): `history.slice(preamble, through)` is summarised. */
  through: number;
  /** Where the summary message sits in the plan's `history`. */
  index: number;
  /** The summarised turns (each a run of messages starting at a user message). */
  turns: Message[][];
  /** Estimated tokens of the (deterministic) summary the plan was made with. */
  summaryTokens: number;
}

/** What one turn is given, and what it records. */
export interface ContextPlan {
  history: Message[];
  items: ContextItem[];
  /** Set when older turns are summarised. */
  checkpoint?: PlannedCheckpoint;
}

function firstLine(message: Message): string {
  const text = message.parts
    .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
    .join("")
    .trim();
  const line = text.split(/\r?\n/, 1)[0] ?? "";
  return line.length > LINE_CHARS ? `${line.slice(0, LINE_CHARS)}…` : line;
}

function toolNames(message: Message): string[] {
  const names = message.parts.flatMap((p) =>
    p.kind.case === "toolCall" ? [p.kind.value.name] : [],
  );
  for (const call of message.toolCalls) if (!names.includes(call.name)) names.push(call.name);
  return names;
}

const isAgentRole = (role: Role) => role === Role.ASSISTANT || role === Role.AGENT;

/** A summary message (the compaction checkpoint) with `text`. */
export function summaryMessage(text: string): Message {
  return create(MessageSchema, {
    role: Role.SYSTEM,
    name: CONTEXT_SUMMARY_NAME,
    parts: [{ kind: { case: "text", value: { text } } }],
  });
}

/** The summary message of `turns` (each a run of messages starting at a user message). */
export function summarize(turns: readonly (readonly Message[])[], fromTurn: number): Message {
  const lines = [
    `Summary of the ${turns.length} earlier turn${turns.length === 1 ? "" : "s"} of this conversation ` +
      "(compacted to fit the context budget; the full history stays in the session). " +
      "First line of each message:",
  ];
  turns.forEach((turn, i) => {
    const user = turn.find((m) => m.role === Role.USER);
    const reply = turn.find((m) => isAgentRole(m.role) && firstLine(m) !== "");
    const tools = [...new Set(turn.flatMap((m) => (isAgentRole(m.role) ? toolNames(m) : [])))];
    lines.push(`${fromTurn + i + 1}. user: ${user ? firstLine(user) : ""}`);
    if (reply) lines.push(`   assistant: ${firstLine(reply)}`);
    if (tools.length > 0) lines.push(`   tools: ${tools.join(", ")}`);
  });
  return summaryMessage(lines.join("\n"));
}

interface Checkpoint {
  /** History index the summary ends at (exclusive); `preamble` when nothing is summarised. */
  through: number;
  summary: Message | undefined;
  summaryTokens: number;
}

/**
 * Plan the context of a turn whose history is `history` and input `input`,
 * in session `sessionId`. With a budget of 0 the history is given unchanged.
 */
export function planContext(
  sessionId: string,
  history: readonly Message[],
  input: Message | undefined,
  settings: CompactionSettings,
): ContextPlan {
  const budget = settings.budgetTokens;
  if (budget <= 0) return { history: [...history], items: [] };
  const tokens = history.map(estimateTokens);
  const prefix = [0];
  for (const t of tokens) prefix.push(prefix.at(-1)! + t);
  const sum = (from: number, to: number) => prefix[to]! - prefix[from]!;
  // Leading system / developer messages (before the first user message) are always kept.
  let preamble = history.findIndex((m) => m.role === Role.USER);
  if (preamble < 0) preamble = history.length;
  const turnStarts: number[] = [];
  for (let i = preamble; i < history.length; i++) {
    if (history[i]!.role === Role.USER) turnStarts.push(i);
  }
  const turnsOf = (from: number, to: number) => {
    const starts = turnStarts.filter((s) => s >= from && s < to);
    return starts.map((s, i) => history.slice(s, starts[i + 1] ?? to));
  };

  let checkpoint: Checkpoint = { through: preamble, summary: undefined, summaryTokens: 0 };
  const effective = (cp: Checkpoint, point: number, inputTokens: number) =>
    sum(0, preamble) + cp.summaryTokens + sum(cp.through, point) + inputTokens;
  const warnAt = (budget * settings.warnPercent) / 100;

  // Replay the rule at every earlier turn's input, then at this turn.
  const points = [
    ...turnStarts.map((s) => ({ at: s, input: tokens[s]! })),
    {
      at: history.length,
      input: input ? estimateTokens(input) : 0,
    },
  ];
  let previousTokens = 0;
  let compactedNow = false;
  let beforeNow = 0;
  let currentTokens = 0;
  for (const [index, point] of points.entries()) {
    const current = index === points.length - 1;
    const before = effective(checkpoint, point.at, point.input);
    let moved = false;
    if (before > budget) {
      // Keep the last `keepRecentTurns` whole turns before this point.
      const complete = turnStarts.filter((s) => s < point.at);
      const through =
        complete.length > settings.keepRecentTurns
          ? complete[complete.length - settings.keepRecentTurns]!
          : checkpoint.through;
      if (through > checkpoint.through) {
        const summary = summarize(turnsOf(preamble, through), 0);
        checkpoint = { through, summary, summaryTokens: estimateTokens(summary) };
        moved = true;
      }
    }
    const after = effective(checkpoint, point.at, point.input);
    if (current) {
      compactedNow = moved;
      beforeNow = before;
      currentTokens = after;
    } else {
      previousTokens = after;
    }
  }

  const given = [
    ...history.slice(0, preamble),
    ...(checkpoint.summary ? [checkpoint.summary] : []),
    ...history.slice(checkpoint.through),
  ];
  const items: ContextItem[] = [];
  if (compactedNow && checkpoint.summary) {
    const summarizedTurns = turnStarts.filter((s) => s < checkpoint.through).length;
    const summaryText = firstText(checkpoint.summary);
    items.push({
      kind: EVENT_KIND.contextCompacted,
      data: {
        strategy: COMPACTION_STRATEGY,
        original_count: history.length,
        compacted_count: given.length,
        preserved_messages: history.length - (checkpoint.through - preamble),
        summarized_messages: checkpoint.through - preamble,
        summarized_turns: summarizedTurns,
        summarized_through_position: checkpoint.through - 1,
        tokens_before: beforeNow,
        tokens_after: currentTokens,
        tokens_saved: Math.max(0, beforeNow - currentTokens),
        budget_tokens: budget,
        summary: summaryText,
        resume_cursor: `compact:${sessionId}:${checkpoint.through}`,
      },
    });
  }
  // Warn once per approach to the budget: when this turn reaches the warning
  // level and the previous turn (or this turn before compacting) did not.
  if (currentTokens >= warnAt && (compactedNow || previousTokens < warnAt)) {
    items.push({
      kind: EVENT_KIND.contextWarning,
      data: {
        estimated_tokens: currentTokens,
        budget_tokens: budget,
        usage_percent: Math.round((currentTokens / budget) * 100),
        message_count: given.length,
        message:
          currentTokens > budget
            ? "the context is over its budget even after compaction (the recent turns alone exceed it)"
            : `the context is at ${Math.round((currentTokens / budget) * 100)}% of its token budget`,
      },
    });
  }
  return {
    history: given,
    items,
    ...(checkpoint.summary
      ? {
          checkpoint: {
            through: checkpoint.through,
            index: preamble,
            turns: turnsOf(preamble, checkpoint.through),
            summaryTokens: checkpoint.summaryTokens,
          },
        }
      : {}),
  };
}

/**
 * `plan` with its checkpoint's summary replaced by `summary`, written by
 * `strategy`; its `context.compacted` item (if any) says so, carries the new
 * summary and token figures, and `details` (e.g. why a model summary fell
 * back). A plan without a checkpoint is returned as it is.
 */
export function withSummary(
  plan: ContextPlan,
  summary: Message,
  strategy: string,
  details: { [key: string]: JsonValue } = {},
): ContextPlan {
  const checkpoint = plan.checkpoint;
  if (!checkpoint) return plan;
  const history = [...plan.history];
  history[checkpoint.index] = summary;
  const delta = estimateTokens(summary) - checkpoint.summaryTokens;
  const items = plan.items.map((item): ContextItem => {
    if (item.kind !== EVENT_KIND.contextCompacted) return item;
    const before = Number(item.data.tokens_before ?? 0);
    const after = Number(item.data.tokens_after ?? 0) + delta;
    return {
      kind: item.kind,
      data: {
        ...item.data,
        ...details,
        strategy,
        summary: firstText(summary),
        tokens_after: after,
        tokens_saved: Math.max(0, before - after),
      },
    };
  });
  return { history, items, checkpoint };
}

/** The text of a summary message (its first part). */
export function firstText(message: Message): string {
  const part = message.parts[0];
  return part?.kind.case === "text" ? part.kind.value.text : "";
}
