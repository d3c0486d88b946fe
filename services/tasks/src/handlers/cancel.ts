/**
 * Cancellation that really stops, shared by CancelTask, a cancel signal and
 * CloseSession:
 *
 * - a running task's cancel is only requested by the store; the runner
 *   aborts the backend and records CANCELED when the backend confirmed it
 *   stopped (or its cancel grace ran out, saying so). CancelTask waits for
 *   that record, up to the grace plus a margin, so its answer is what the
 *   worker confirmed — a task still WORKING (with `canceled_at`) when it
 *   could not be confirmed in time;
 * - a canceled task's delegated tasks (`parent_task_id`) that are not
 *   terminal are canceled too, down the tree.
 */

import { TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import { isTrellisError } from "@trellis/runtime";
import { conflict } from "../domain/errors.js";
import { isTerminal } from "../domain/lifecycle.js";
import type { WriteContext } from "../store/task-store.js";
import type { HandlerDeps } from "./common.js";

/** Past the cancel grace, how long CancelTask still waits for the runner's record. */
const RECORD_MARGIN_MS = 5_000;
/** How often a wait re-reads the task (a run on another replica notifies nobody here). */
const POLL_MS = 250;
const OPEN_STATUSES = [
  TaskStatus.SUBMITTED,
  TaskStatus.WORKING,
  TaskStatus.INPUT_REQUIRED,
  TaskStatus.AUTH_REQUIRED,
];

type CancelDeps = Pick<
  HandlerDeps,
  "store" | "runner" | "watchers" | "owner" | "logger" | "cancelGraceMs"
>;

/**
 * Cancels `taskId` and, down the tree, the tasks it delegated to; resolves
 * with the task once its cancel is recorded (or the wait gave up).
 */
export async function cancelTaskTree(
  deps: CancelDeps,
  taskId: string,
  reason: string,
  write: WriteContext,
  signal: AbortSignal,
): Promise<Task> {
  // Watched before the cancel: a record committed meanwhile is not missed.
  const changes = deps.watchers.watch(taskId);
  try {
    const result = await deps.store.cancelTask(taskId, reason, write, deps.owner);
    if (result.running) deps.runner.abort(taskId, "canceled");
    deps.runner.dispatch(result.claim);
    const children = cancelChildren(deps, [taskId], write, signal);
    let task = result.task;
    if (!isTerminal(task.status)) {
      const deadline = Date.now() + deps.cancelGraceMs + RECORD_MARGIN_MS;
      while (!isTerminal(task.status) && Date.now() < deadline && !signal.aborted) {
        const snapshot = await changes.next(POLL_MS, signal);
        task = snapshot ?? (await deps.store.getTask(taskId, write.scope));
      }
    }
    await children;
    return task;
  } finally {
    changes.close();
  }
}

/** Ids of a session's tasks that are not terminal (a session's mailbox holds few). */
export async function openTaskIds(
  deps: Pick<HandlerDeps, "store">,
  workspaceId: string,
  sessionId: string,
  scope: string | undefined,
): Promise<string[]> {
  const ids: string[] = [];
  let pageToken = "";
  do {
    const page = await deps.store.listTasks(
      { sessionId, workspaceId, statuses: OPEN_STATUSES },
      { pageSize: 1000, pageToken },
      scope,
    );
    ids.push(...page.items.map((t) => t.id));
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return ids;
}

/**
 * Refuses a task delegated by `parentTaskId` once that task is canceled (or
 * its cancel is requested): a child submitted while the cascade runs would
 * escape it.
 */
export async function ensureParentOpen(
  deps: Pick<HandlerDeps, "store">,
  parentTaskId: string,
  scope: string | undefined,
): Promise<void> {
  if (parentTaskId === "") return;
  const parent = await deps.store.getTask(parentTaskId, scope);
  if (parent.status === TaskStatus.CANCELED || (!isTerminal(parent.status) && parent.canceledAt)) {
    throw conflict(`parent task ${parentTaskId} was canceled; it cannot delegate new tasks`, {
      parent_task_id: parentTaskId,
    });
  }
}

/**
 * Cancels the open tasks `parents` delegated to, and theirs (breadth first).
 * Best effort per child: one that ended meanwhile is left as it is.
 */
export async function cancelChildren(
  deps: CancelDeps,
  parents: readonly string[],
  write: WriteContext,
  signal: AbortSignal,
): Promise<void> {
  const seen = new Set(parents);
  let level = [...parents];
  while (level.length > 0 && !signal.aborted) {
    const next: string[] = [];
    for (const parent of level) {
      for (const child of await deps.store.listOpenChildTasks(parent, write.scope)) {
        if (seen.has(child)) continue;
        seen.add(child);
        next.push(child);
        try {
          const result = await deps.store.cancelTask(
            child,
            `its parent task ${parent} was canceled`,
            write,
            deps.owner,
          );
          if (result.running) deps.runner.abort(child, "its parent task was canceled");
          deps.runner.dispatch(result.claim);
        } catch (error) {
          // Finished before the cancel reached it (invalid_state_transition): nothing to stop.
          if (!isTrellisError(error) || error.reason !== "invalid_state_transition") throw error;
          deps.logger.debug("a delegated task ended before its cancel", { task_id: child });
        }
      }
    }
    level = next;
  }
}
