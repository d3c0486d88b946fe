/**
 * The per-session mailbox rules: turns of one session run one at a time, in
 * arrival order. Pure decisions; the store applies them inside a transaction
 * that holds the session's row lock, so the view they decide on is current.
 *
 * Vocabulary (the `run_state` of a task):
 * - `queued`  — wants to run: a new task, or a suspended one whose signal arrived;
 * - `running` — holds the mailbox: claimed by one replica under a lease;
 * - `waiting` — suspended (INPUT_REQUIRED / AUTH_REQUIRED); does NOT hold the mailbox;
 * - `done`    — terminal, output committed.
 *
 * A canceled task keeps `running` until its runner has committed the partial
 * output (or its lease ran out): the next turn only starts after the
 * interrupted one's transcript is closed.
 */
import { BusyPolicy } from "@trellis/contracts/tasks";
import { conflict } from "./errors.js";

/** Where a task stands in its session's mailbox. */
export type RunState = "queued" | "running" | "waiting" | "done";

/** What the mailbox holds when a task is submitted. */
export interface MailboxView {
  /** The task holding the mailbox, if any. */
  running?: { id: string; canceled: boolean };
  /** Tasks waiting for their turn. */
  queued: number;
}

/** What SubmitTask does. */
export interface SubmitDecision {
  /** Claim the new task at once (the mailbox is free). */
  runNow: boolean;
  /** Cancel this running task first (BUSY_POLICY_INTERRUPT). */
  interrupt?: string;
}

/** Whether the session has a turn running or waiting to run. */
export function isBusy(view: MailboxView): boolean {
  return view.running !== undefined || view.queued > 0;
}

/**
 * Decide a submit against the mailbox:
 * - free → run now, whatever the policy;
 * - busy + ENQUEUE (default) → queue behind the others, in arrival order;
 * - busy + REJECT → `conflict` (nothing is stored: the caller rolls back);
 * - busy + INTERRUPT → cancel the running turn, queue the new one. Turns
 *   queued before it keep their place: an interrupt stops the current turn,
 *   it does not drop other people's input.
 */
export function decideSubmit(
  policy: BusyPolicy,
  view: MailboxView,
  sessionId: string,
): SubmitDecision {
  if (!isBusy(view)) return { runNow: true };
  switch (policy) {
    case BusyPolicy.REJECT:
      throw conflict(`session ${sessionId} is busy running a turn`, {
        session_id: sessionId,
        ...(view.running ? { running_task_id: view.running.id } : {}),
      });
    case BusyPolicy.INTERRUPT:
      return view.running && !view.running.canceled
        ? { runNow: false, interrupt: view.running.id }
        : { runNow: false };
    default:
      return { runNow: false };
  }
}

/** What recovery does with a task whose runner's lease expired. */
export type RecoveryAction = "finalize_canceled" | "requeue" | "fail";

/**
 * A WORKING task whose worker is gone: re-run it when the agent is safe to
 * retry (its output was never committed, so nothing is duplicated), fail it
 * with `worker_lost` otherwise; a task already canceled only gets its
 * transcript closed. Never left WORKING.
 */
export function recoveryAction(task: { canceled: boolean }, safeToRetry: boolean): RecoveryAction {
  if (task.canceled) return "finalize_canceled";
  return safeToRetry ? "requeue" : "fail";
}
