/**
 * How one run of a task ended, as the mailbox records it (the executor's
 * result, or what the runner concluded when the executor threw or never
 * answered). Pure data.
 */
import type { ExecutionResult } from "@trellis/execution";

/**
 * The end of one run (a turn, or the continuation of a suspended one): the
 * executor's result type, so the seam and the mailbox cannot drift apart.
 */
export type RunOutcome = ExecutionResult & {
  /**
   * Set by the runner when the run was aborted (a cancel): true when the
   * backend returned (it stopped), false when the cancel grace ran out first.
   */
  cancelConfirmed?: boolean;
};
