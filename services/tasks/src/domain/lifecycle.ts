/**
 * The task lifecycle (Harn Agents Protocol v1, "Task lifecycle"): the allowed
 * transitions, exactly the spec's table, and the event each one emits.
 *
 * | From           | To                                                    |
 * |----------------|-------------------------------------------------------|
 * | SUBMITTED      | WORKING, CANCELED, FAILED                             |
 * | WORKING        | INPUT_REQUIRED, AUTH_REQUIRED, COMPLETED, FAILED, CANCELED |
 * | INPUT_REQUIRED | WORKING, FAILED, CANCELED                             |
 * | AUTH_REQUIRED  | WORKING, FAILED, CANCELED                             |
 * | COMPLETED, FAILED, CANCELED | terminal                                 |
 *
 * Pure: no I/O.
 */
import { TaskStatus } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { isTerminalStatus } from "@trellis/messages";
import { invalidTransition } from "./errors.js";

const ALLOWED: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  [TaskStatus.UNSPECIFIED]: [],
  [TaskStatus.SUBMITTED]: [TaskStatus.WORKING, TaskStatus.CANCELED, TaskStatus.FAILED],
  [TaskStatus.WORKING]: [
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.AUTH_REQUIRED,
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELED,
  ],
  [TaskStatus.INPUT_REQUIRED]: [TaskStatus.WORKING, TaskStatus.FAILED, TaskStatus.CANCELED],
  [TaskStatus.AUTH_REQUIRED]: [TaskStatus.WORKING, TaskStatus.FAILED, TaskStatus.CANCELED],
  [TaskStatus.COMPLETED]: [],
  [TaskStatus.FAILED]: [],
  [TaskStatus.CANCELED]: [],
};

/** Whether the spec's table allows `from → to`. */
export function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return ALLOWED[from]?.includes(to) ?? false;
}

/**
 * Checks `from → to` against the table and returns `to`; throws
 * `invalid_state_transition` otherwise. In particular nothing leaves a
 * terminal state, so once CANCELED is recorded no success replaces it.
 */
export function transition(from: TaskStatus, to: TaskStatus, taskId?: string): TaskStatus {
  if (!canTransition(from, to)) throw invalidTransition(from, to, taskId);
  return to;
}

export { isTerminalStatus as isTerminal } from "@trellis/messages";

/**
 * Cancel of a running task is two steps: the request (`canceled_at` set,
 * `user.cancel_requested`; the status stays) and, once the runner is done
 * with the backend, the record (CANCELED, `task.canceled`). True between them.
 */
export function cancelRequested(task: { status: number; canceled_at: Date | null }): boolean {
  return task.canceled_at !== null && !isTerminalStatus(task.status as TaskStatus);
}

/**
 * The reason `task.canceled` gives when a requested cancel is recorded: why
 * it was requested, then whether the backend confirmed it stopped (returned
 * after the abort) or was given up on (the cancel grace ran out, or the
 * worker was lost — `detail`).
 */
export function cancelEndReason(requested: string, confirmed: boolean, detail?: string): string {
  const why = requested || "canceled";
  if (confirmed) return `${why} (the backend confirmed it stopped)`;
  return `${why} (the backend did not confirm it stopped: ${detail ?? "the cancel grace period ran out"})`;
}

/** INPUT_REQUIRED or AUTH_REQUIRED: blocked on a signal, not holding the mailbox. */
export function isSuspended(status: TaskStatus): boolean {
  return status === TaskStatus.INPUT_REQUIRED || status === TaskStatus.AUTH_REQUIRED;
}

/**
 * The Harn event kind announcing that a task entered `status` (Agents
 * Protocol "Task events"): every transition emits exactly one of these.
 */
export function taskEventKind(status: TaskStatus): string {
  switch (status) {
    case TaskStatus.SUBMITTED:
      return EVENT_KIND.taskSubmitted;
    case TaskStatus.WORKING:
      return EVENT_KIND.taskStarted;
    case TaskStatus.INPUT_REQUIRED:
      return EVENT_KIND.taskInputRequired;
    case TaskStatus.AUTH_REQUIRED:
      return EVENT_KIND.taskAuthRequired;
    case TaskStatus.COMPLETED:
      return EVENT_KIND.taskCompleted;
    case TaskStatus.FAILED:
      return EVENT_KIND.taskFailed;
    case TaskStatus.CANCELED:
      return EVENT_KIND.taskCanceled;
    default:
      return EVENT_KIND.taskStatusChanged;
  }
}

/** The wire spelling of a status ("WORKING"). */
export function statusName(status: TaskStatus): string {
  return TaskStatus[status] ?? "UNSPECIFIED";
}
