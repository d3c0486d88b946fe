/**
 * Context compaction of the tasks service (see `./compactor.ts`): what a turn
 * is handed when its history passes the token budget, and the hook the turn
 * runner calls before it runs a turn.
 */

import type { Message } from "@trellis/contracts/core";
import type { AgentExecutor } from "@trellis/execution";
import type { Logger } from "@trellis/runtime";
import type { Claim } from "../store/task-store.js";
import {
  COMPACTION_STRATEGY,
  type ContextItem,
  type ContextPlan,
  firstText,
  type PlannedCheckpoint,
  planContext,
  summarize,
  summaryMessage,
  withSummary,
} from "./compactor.js";
import { type CompactionConfig, settingsFor } from "./config.js";
import { MODEL_STRATEGY, renderTurns, summarizeWithModel, summaryDigest } from "./model-summary.js";
import type { ContextSummaryStore, StoredSummary } from "./summary-store.js";

// The planner's own steps stay in `./compactor.ts`: the compactor below is their one user.
export { type ContextItem, planContext } from "./compactor.js";
export {
  type CompactionConfig,
  type CompactionSettings,
  type CompactionStrategy,
  compactionConfigSchema,
  loadCompactionConfig,
  settingsFor,
} from "./config.js";
export {
  MODEL_STRATEGY,
  renderTurns,
  SUMMARY_INSTRUCTION,
  SummaryUnavailableError,
  summaryDigest,
  summaryRequest,
} from "./model-summary.js";
export {
  type ContextSummaryStore,
  PostgresContextSummaryStore,
  type StoredSummary,
} from "./summary-store.js";
export { CHARS_PER_TOKEN, estimateTokens, messageChars } from "./tokens.js";

/** What the `model` strategy needs; without it every agent is summarised deterministically. */
export interface ModelSummaryOptions {
  /** Runs the summarising call (the agent's own backend). */
  executor: AgentExecutor;
  /** Where written summaries are kept and looked up. */
  summaries: ContextSummaryStore;
  /** Whether a task (one with a parent) is a replay: a replay never calls the model. */
  isReplay(taskId: string): Promise<boolean>;
}

/** Header of a model-written summary message. */
function modelSummaryText(turns: number, text: string): string {
  return (
    `Summary of the ${turns} earlier turn${turns === 1 ? "" : "s"} of this conversation ` +
    "(compacted to fit the context budget; the full history stays in the session), " +
    `written by the agent's model:\n${text}`
  );
}

/** Compacts turn histories for the turn runner. */
export class ContextCompactor {
  readonly #config: CompactionConfig;
  readonly #logger: Logger;
  readonly #model: ModelSummaryOptions | undefined;

  constructor(config: CompactionConfig, logger: Logger, model?: ModelSummaryOptions) {
    this.#config = config;
    this.#logger = logger;
    this.#model = model;
  }

  /**
   * The history to give the claimed turn; records its `context.compacted` /
   * `context.warning` events through `record` (the turn's progress sink)
   * before the turn runs. A failed write is logged, not fatal: the plan is
   * deterministic, so the turn gets the same context either way.
   *
   * With the `model` strategy the checkpoint's summary is the stored one, or
   * (stored now) the agent's model's, or — when that call fails — the
   * deterministic one; summarising never fails the turn. `signal` is the
   * turn's: a turn canceled while summarising stores nothing.
   */
  async prepare(
    claim: Claim,
    history: readonly Message[],
    record: (items: readonly ContextItem[]) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<readonly Message[]> {
    const settings = settingsFor(this.#config, claim.agent.definition ?? {}, claim.agent.backend);
    if (settings.budgetTokens <= 0) return history;
    let plan = planContext(claim.task.sessionId, history, claim.task.input, settings);
    if (plan.checkpoint && settings.strategy === "model") {
      plan = await this.#modelSummary(claim, plan, plan.checkpoint, signal);
    }
    // A resumed turn (after a signal) has the same history as when it first
    // ran, whose run recorded the compaction already: record it once.
    if (plan.items.length > 0 && claim.resume === undefined) {
      try {
        await record(plan.items);
      } catch (error) {
        this.#logger.warn("recording context compaction failed", {
          task_id: claim.task.id,
          error: String(error),
        });
      }
    }
    return plan.history;
  }

  async #modelSummary(
    claim: Claim,
    plan: ContextPlan,
    checkpoint: PlannedCheckpoint,
    signal: AbortSignal | undefined,
  ): Promise<ContextPlan> {
    const log = { task_id: claim.task.id, session_id: claim.task.sessionId };
    const model = this.#model;
    if (!model) {
      return withSummary(plan, plan.history[checkpoint.index]!, COMPACTION_STRATEGY, {
        requested_strategy: MODEL_STRATEGY,
        fallback_reason: "this replica has no model summariser configured",
      });
    }
    const rendered = renderTurns(checkpoint.turns);
    const digest = summaryDigest(claim.agent.id, rendered);
    let stored: StoredSummary | undefined;
    try {
      stored = await model.summaries.get(digest);
    } catch (error) {
      this.#logger.warn("reading a stored context summary failed", {
        ...log,
        error: String(error),
      });
    }
    const reused = stored !== undefined;
    if (!stored) {
      const fresh = await this.#writeSummary(claim, checkpoint, rendered, digest, signal);
      if (!fresh) return plan;
      stored = fresh;
    }
    return withSummary(plan, summaryMessage(stored.summary), stored.strategy, {
      requested_strategy: MODEL_STRATEGY,
      summary_reused: reused,
      ...(stored.fallbackReason ? { fallback_reason: stored.fallbackReason } : {}),
    });
  }

  /**
   * A new summary for the checkpoint: the model's, or the deterministic one
   * when the call fails; stored (first write wins) unless the task is a
   * replay. Undefined when the turn was canceled meanwhile.
   */
  async #writeSummary(
    claim: Claim,
    checkpoint: PlannedCheckpoint,
    rendered: string,
    digest: string,
    signal: AbortSignal | undefined,
  ): Promise<StoredSummary | undefined> {
    const model = this.#model!;
    const log = { task_id: claim.task.id, session_id: claim.task.sessionId };
    const base = {
      digest,
      agentId: claim.agent.id,
      sessionId: claim.task.sessionId,
      taskId: claim.task.id,
      throughPosition: checkpoint.through,
    };
    const deterministic = (reason: string): StoredSummary => ({
      ...base,
      strategy: COMPACTION_STRATEGY,
      summary: firstText(summarize(checkpoint.turns, 0)),
      fallbackReason: reason,
    });
    let replay = false;
    if (claim.task.parentTaskId) {
      try {
        replay = await model.isReplay(claim.task.id);
      } catch (error) {
        // Unsure: never risk a live call in a replay.
        replay = true;
        this.#logger.warn("looking up whether a task is a replay failed", {
          ...log,
          error: String(error),
        });
      }
    }
    if (replay) {
      // A replay reuses the recorded summary; without one it gets the deterministic one.
      return deterministic("replay: the source recorded no summary for this checkpoint");
    }
    let written: StoredSummary;
    const timeout = AbortSignal.timeout(this.#config.TRELLIS_CONTEXT_SUMMARY_TIMEOUT);
    try {
      const text = await summarizeWithModel(model.executor, {
        taskId: claim.task.id,
        sessionId: claim.task.sessionId,
        workspaceId: claim.task.workspaceId,
        agent: {
          id: claim.agent.id,
          backend: claim.agent.backend,
          definition: claim.agent.definition ?? {},
        },
        rendered,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      written = {
        ...base,
        strategy: MODEL_STRATEGY,
        summary: modelSummaryText(checkpoint.turns.length, text),
        fallbackReason: "",
      };
    } catch (error) {
      if (signal?.aborted) return undefined;
      const reason = timeout.aborted
        ? `the model did not summarise within ${this.#config.TRELLIS_CONTEXT_SUMMARY_TIMEOUT} ms`
        : error instanceof Error
          ? error.message
          : String(error);
      this.#logger.warn(
        "summarising with the agent's model failed; using the deterministic summary",
        {
          ...log,
          reason,
        },
      );
      written = deterministic(reason);
    }
    try {
      return await model.summaries.put(written);
    } catch (error) {
      this.#logger.warn("storing a context summary failed", { ...log, error: String(error) });
      return written;
    }
  }
}
