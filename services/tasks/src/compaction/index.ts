/**
 * Context compaction of the tasks service (see `./compactor.ts`): what a turn
 * is handed when its history passes the token budget, and the hook the turn
 * runner calls before it runs a turn.
 */
import type { Message } from "@trellis/contracts/core";
import type { Logger } from "@trellis/runtime";
import type { Claim } from "../store/task-store.js";
import { type ContextItem, planContext } from "./compactor.js";
import { type CompactionConfig, settingsFor } from "./config.js";

export {
  COMPACTION_STRATEGY,
  type ContextItem,
  type ContextPlan,
  planContext,
  summarize,
} from "./compactor.js";
export {
  type CompactionConfig,
  type CompactionSettings,
  compactionConfigSchema,
  loadCompactionConfig,
  settingsFor,
} from "./config.js";
export { CHARS_PER_TOKEN, estimateTokens, messageChars } from "./tokens.js";

/** Compacts turn histories for the turn runner. */
export class ContextCompactor {
  readonly #config: CompactionConfig;
  readonly #logger: Logger;

  constructor(config: CompactionConfig, logger: Logger) {
    this.#config = config;
    this.#logger = logger;
  }

  /**
   * The history to give the claimed turn; records its `context.compacted` /
   * `context.warning` events through `record` (the turn's progress sink)
   * before the turn runs. A failed write is logged, not fatal: the plan is
   * deterministic, so the turn gets the same context either way.
   */
  async prepare(
    claim: Claim,
    history: readonly Message[],
    record: (items: readonly ContextItem[]) => Promise<void>,
  ): Promise<readonly Message[]> {
    const settings = settingsFor(this.#config, claim.agent.definition ?? {});
    if (settings.budgetTokens <= 0) return history;
    const plan = planContext(claim.task.sessionId, history, claim.task.input, settings);
    if (plan.items.length > 0) {
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
}
