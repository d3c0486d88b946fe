// Context compaction as a pure plan over a transcript: under budget nothing
// changes; past it the older turns become one deterministic summary message
// and only the checkpoint's move is recorded; warnings come once per approach
// to the budget; the estimate is chars / 4 plus framing.
import { create } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import {
  type CompactionSettings,
  estimateTokens,
  loadCompactionConfig,
  planContext,
  settingsFor,
} from "../src/compaction/index.js";

function msg(role: Role, value: string): Message {
  return create(MessageSchema, {
    role,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
}

/** A transcript of `n` turns: a user line and a 2-line assistant reply of ~`size` chars each. */
function transcript(n: number, size = 200): Message[] {
  const out: Message[] = [msg(Role.SYSTEM, "You are terse.")];
  for (let i = 1; i <= n; i++) {
    out.push(msg(Role.USER, `question ${i}\n${"q".repeat(size)}`));
    out.push(msg(Role.ASSISTANT, `answer ${i}\n${"a".repeat(size)}`));
  }
  return out;
}

const textOf = (m: Message) =>
  m.parts.map((p) => (p.kind.case === "text" ? p.kind.value.text : "")).join("");

const settings = (budgetTokens: number, keepRecentTurns = 2): CompactionSettings => ({
  budgetTokens,
  warnPercent: 80,
  keepRecentTurns,
  strategy: "deterministic",
});

describe("context compaction plan", () => {
  it("estimates tokens as ceil(chars / 4) plus 4 per message", () => {
    expect(estimateTokens(msg(Role.USER, "x".repeat(10)))).toBe(3 + 4);
    expect(estimateTokens(msg(Role.USER, ""))).toBe(4);
  });

  it("gives the history unchanged and records nothing under the budget, or with budget 0", () => {
    const history = transcript(3);
    for (const budget of [0, 100_000]) {
      const plan = planContext("ses_1", history, msg(Role.USER, "next"), settings(budget));
      expect(plan.history).toEqual(history);
      expect(plan.items).toEqual([]);
    }
  });

  it("summarises all but the recent turns into one checkpoint message past the budget", () => {
    // 6 turns of ~2 × 57 tokens each ≈ 690 tokens; budget 500.
    const history = transcript(6);
    const before = structuredClone(history);
    const plan = planContext("ses_1", history, msg(Role.USER, "question 7"), settings(500));
    // The input history is untouched (the transcript in storage is never rewritten).
    expect(history).toEqual(before);
    // [preamble, summary, turns 5 and 6]
    expect(plan.history.map((m) => textOf(m).split("\n")[0])).toEqual([
      "You are terse.",
      expect.stringMatching(/^Summary of the 4 earlier turns/),
      "question 5",
      "answer 5",
      "question 6",
      "answer 6",
    ]);
    const summary = plan.history[1]!;
    expect(summary.role).toBe(Role.SYSTEM);
    expect(textOf(summary)).toContain("1. user: question 1\n   assistant: answer 1");
    expect(textOf(summary)).toContain("4. user: question 4\n   assistant: answer 4");
    expect(textOf(summary)).not.toContain("question 5");
    const compacted = plan.items.find((i) => i.kind === "context.compacted")!;
    expect(compacted.data).toMatchObject({
      strategy: "first_line",
      original_count: 13,
      compacted_count: 6,
      summarized_messages: 8,
      summarized_turns: 4,
      summarized_through_position: 8,
      budget_tokens: 500,
      resume_cursor: "compact:ses_1:9",
      summary: textOf(summary),
    });
    // Turn 5 already passed the budget (a first checkpoint kept turns 3–4);
    // this turn passes it again and the checkpoint moves up to turn 4.
    expect(compacted.data.tokens_saved).toBeGreaterThan(150);
    expect(Number(compacted.data.tokens_after)).toBeLessThanOrEqual(500);
    // Deterministic: the same transcript plans the same context.
    expect(planContext("ses_1", history, msg(Role.USER, "question 7"), settings(500))).toEqual(
      plan,
    );
  });

  it("keeps the checkpoint on the next turn (no new event) until the budget is passed again", () => {
    const history = transcript(6);
    const first = planContext("ses_1", history, msg(Role.USER, "question 7"), settings(500));
    expect(first.items.map((i) => i.kind)).toContain("context.compacted");
    // Turn 7 ran; turn 8 sees the same checkpoint plus turn 7.
    const next = [...history, msg(Role.USER, "question 7"), msg(Role.ASSISTANT, "answer 7")];
    const second = planContext("ses_1", next, msg(Role.USER, "question 8"), settings(500));
    expect(second.items.filter((i) => i.kind === "context.compacted")).toEqual([]);
    expect(textOf(second.history[1]!)).toBe(textOf(first.history[1]!));
    expect(second.history.map((m) => textOf(m).split("\n")[0]).slice(2)).toEqual([
      "question 5",
      "answer 5",
      "question 6",
      "answer 6",
      "question 7",
      "answer 7",
    ]);
  });

  it("warns once when the history approaches the budget, not on every turn", () => {
    // Each turn ≈ 114 tokens; budget 600, warning at 480 (turn 5's history + input).
    const next = (n: number) => msg(Role.USER, `question ${n + 1}\n${"q".repeat(200)}`);
    const warnings = (n: number) =>
      planContext("ses_1", transcript(n), next(n), settings(600, 4)).items.filter(
        (i) => i.kind === "context.warning",
      );
    const fired = [1, 2, 3, 4].map((n) => warnings(n).length);
    expect(fired.filter((c) => c === 1)).toHaveLength(1);
    const at = fired.indexOf(1) + 1;
    expect(warnings(at)[0]!.data).toMatchObject({ budget_tokens: 600 });
    expect(Number(warnings(at)[0]!.data.usage_percent)).toBeGreaterThanOrEqual(80);
    // Turn 6 passes the budget: compacted, and still past the warning level after it.
    const sixth = planContext("ses_1", transcript(5), next(5), settings(600, 4));
    expect(sixth.items.map((i) => i.kind)).toEqual(["context.compacted", "context.warning"]);
  });

  it("reads per-agent settings from the definition's `context`, falling back to the environment", () => {
    const config = loadCompactionConfig({ TRELLIS_CONTEXT_BUDGET_TOKENS: "4000" });
    expect(settingsFor(config, {})).toEqual({
      budgetTokens: 4000,
      warnPercent: 80,
      keepRecentTurns: 2,
      strategy: "deterministic",
    });
    expect(
      settingsFor(config, {
        context: { budget_tokens: 900, keep_recent_turns: 1, warn_percent: -3 },
      }),
    ).toEqual({
      budgetTokens: 900,
      warnPercent: 80,
      keepRecentTurns: 1,
      strategy: "deterministic",
    });
  });

  it("chooses the summary strategy per agent: model for harness agents unless told otherwise", () => {
    const auto = loadCompactionConfig({});
    expect(settingsFor(auto, {}, "harness").strategy).toBe("model");
    expect(settingsFor(auto, {}, "scripted").strategy).toBe("deterministic");
    expect(settingsFor(auto, { context: { strategy: "deterministic" } }, "harness").strategy).toBe(
      "deterministic",
    );
    expect(settingsFor(auto, { context: { strategy: "model" } }, "recorder").strategy).toBe(
      "model",
    );
    // An unknown value falls back to the service's choice.
    expect(settingsFor(auto, { context: { strategy: "magic" } }, "harness").strategy).toBe("model");
    const forced = loadCompactionConfig({ TRELLIS_CONTEXT_STRATEGY: "deterministic" });
    expect(settingsFor(forced, {}, "harness").strategy).toBe("deterministic");
    expect(() => loadCompactionConfig({ TRELLIS_CONTEXT_STRATEGY: "llm" })).toThrow(
      /TRELLIS_CONTEXT_STRATEGY/,
    );
    expect(() => loadCompactionConfig({ TRELLIS_CONTEXT_BUDGET_TOKENS: "lots" })).toThrow(
      /TRELLIS_CONTEXT_BUDGET_TOKENS/,
    );
  });
});
