/**
 * Settings of context compaction, from the tasks service's environment, and
 * the per-agent override an agent definition may carry under `context`:
 *
 * ```json
 * { "context": { "budget_tokens": 8000, "warn_percent": 80, "keep_recent_turns": 2, "strategy": "model" } }
 * ```
 *
 * A budget of 0 (the default) turns compaction off.
 *
 * `strategy` is how the compaction checkpoint's summary is written:
 * - `"model"` — the agent's own backend summarises the older turns (one
 *   tool-less call through the executor; see `./model-summary.ts`); the
 *   summary is stored and reused by every later turn, and a failed call falls
 *   back to the deterministic summary;
 * - `"deterministic"` — the `first_line` summary (no model call);
 * - absent (or `TRELLIS_CONTEXT_STRATEGY=auto`, the default): `"model"` for
 *   built-in harness agents (backend `harness`), `"deterministic"` for every
 *   other backend (scripted agents, remote adapters).
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { HARNESS_BACKEND } from "@trellis/execution";
import { type ConfigOf, env, loadConfig } from "@trellis/runtime";

/** Environment variables of compaction. */
export const compactionConfigSchema = {
  /** Estimated tokens (chars / 4) a turn's history may reach before older turns are summarised; 0: never. */
  TRELLIS_CONTEXT_BUDGET_TOKENS: env.int({ min: 0, max: 100_000_000 }).default(0),
  /** A `context.warning` is recorded when the history reaches this share of the budget (percent). */
  TRELLIS_CONTEXT_WARN_PERCENT: env.int({ min: 1, max: 100 }).default(80),
  /** Most recent turns kept verbatim when compacting (at least 1). */
  TRELLIS_CONTEXT_KEEP_RECENT_TURNS: env.int({ min: 1, max: 1000 }).default(2),
  /** How summaries are written when an agent does not say: `auto` = model for harness agents, deterministic otherwise. */
  TRELLIS_CONTEXT_STRATEGY: env.enum(["auto", "model", "deterministic"]).default("auto"),
  /** Longest a model summary may take before the deterministic summary is used instead. */
  TRELLIS_CONTEXT_SUMMARY_TIMEOUT: env.duration({ minMs: 100, maxMs: 3_600_000 }).default(60_000),
};

/** Compaction's validated environment. */
export type CompactionConfig = ConfigOf<typeof compactionConfigSchema>;

/** Reads {@link CompactionConfig} from an environment. */
export function loadCompactionConfig(
  source: Readonly<Record<string, string | undefined>>,
): CompactionConfig {
  return loadConfig(compactionConfigSchema, source);
}

/** How a checkpoint's summary is written (see the module comment). */
export type CompactionStrategy = "model" | "deterministic";

/** The backend whose agents are summarised by their model by default. */
export const MODEL_SUMMARY_BACKEND = HARNESS_BACKEND;

/** The settings one turn is compacted with. */
export interface CompactionSettings {
  budgetTokens: number;
  warnPercent: number;
  keepRecentTurns: number;
  strategy: CompactionStrategy;
}

function intIn(value: JsonValue | undefined, min: number, max: number): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= min && value <= max
    ? value
    : undefined;
}

/**
 * The settings for an agent: its definition's `context` fields where they are
 * valid integers in range, the service's environment otherwise. (Agent
 * definitions are validated by their backend; an out-of-range value here
 * falls back to the service default rather than failing the turn.)
 */
export function settingsFor(
  config: CompactionConfig,
  definition: JsonObject,
  backend = "",
): CompactionSettings {
  const raw = definition.context;
  const own = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? raw : {};
  const chosen =
    own.strategy === "model" || own.strategy === "deterministic"
      ? own.strategy
      : config.TRELLIS_CONTEXT_STRATEGY;
  return {
    strategy:
      chosen === "auto" ? (backend === MODEL_SUMMARY_BACKEND ? "model" : "deterministic") : chosen,
    budgetTokens: intIn(own.budget_tokens, 0, 100_000_000) ?? config.TRELLIS_CONTEXT_BUDGET_TOKENS,
    warnPercent: intIn(own.warn_percent, 1, 100) ?? config.TRELLIS_CONTEXT_WARN_PERCENT,
    keepRecentTurns:
      intIn(own.keep_recent_turns, 1, 1000) ?? config.TRELLIS_CONTEXT_KEEP_RECENT_TURNS,
  };
}
