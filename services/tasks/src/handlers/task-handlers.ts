/** TaskService: submit, read, cancel and watch tasks. */
import { equals } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { createLinkedAbortController } from "@connectrpc/connect/protocol";
import { Role } from "@trellis/contracts/core";
import {
  ReplayTaskRequestSchema,
  SubmitTaskRequestSchema,
  type Task,
  TaskSchema,
  type TaskService,
} from "@trellis/contracts/tasks";
import { validateChatMessage } from "@trellis/messages";
import { invalidRequest } from "../domain/errors.js";
import { isSuspended, isTerminal } from "../domain/lifecycle.js";
import { planReplay } from "../replay/replay-planner.js";
import type { TaskChanges } from "../worker/task-watchers.js";
import { cancelTaskTree, ensureParentOpen } from "./cancel.js";
import {
  type HandlerDeps,
  idempotencyOf,
  pageOf,
  scopeOf,
  workspaceOfRequest,
  writeContext,
} from "./common.js";
import { requirementsCheck } from "./requirements.js";

/** How often a watch re-reads its task when nothing told it about a change. */
const WATCH_POLL_MS = 2_000;

// Abort reasons made once: aborting without one builds a DOMException (and its stack) each time.
const WATCH_ENDED = new Error("watch ended");
const WAIT_ENDED = new Error("submit wait ended");

/** The longest SubmitTask `wait_ms` (a unary call should not hold a task's whole run). */
export const MAX_SUBMIT_WAIT_MS = 60_000;

/**
 * How long before the caller's deadline a SubmitTask wait ends, to answer in
 * time: 250 ms and a fifth of what is left, at most 2 s. A fixed 250 ms was
 * eaten by a late timer on a loaded machine (the caller got DEADLINE_EXCEEDED
 * instead of its task's id).
 */
function deadlineMarginMs(remainingMs: number): number {
  return Math.min(2_000, 250 + Math.floor(remainingMs / 5));
}

/** Whether a watch ends at this state: terminal, or (`untilSettled`) suspended. */
function isSettled(task: Task, untilSettled: boolean): boolean {
  return isTerminal(task.status) || (untilSettled && isSuspended(task.status));
}

/** What {@link followTask} follows. */
interface Follow {
  taskId: string;
  /** Also end when the task suspends. */
  untilSettled: boolean;
  scope: string | undefined;
  /** Ends the watch (the client left, or a wait ran out). */
  signal: AbortSignal;
  /** Registered before `first` was known, so no change committed since is missed. */
  changes: TaskChanges;
  /** The task's current state, when the caller has it; read from the store otherwise. */
  first?: Task;
}

/**
 * The task's states, from the current one until it settles (see
 * {@link isSettled}) or `signal` aborts; `changes` is closed when it ends.
 * Changes come from this replica's commits and, in distributed mode, from
 * the task's events on the log (another replica may run it), with a re-read
 * every WATCH_POLL_MS as the fallback.
 */
async function* followTask(deps: HandlerDeps, follow: Follow): AsyncGenerator<Task> {
  const { store, runner, eventLog } = deps;
  const { changes, scope, signal } = follow;
  const settled = (t: Task) => isSettled(t, follow.untilSettled);
  const stop = new AbortController();
  // A client that goes away may leave a streaming handler suspended at a
  // yield for good (never resumed, never returned): the watch must not
  // outlive the call, or the watchers keep its snapshots forever.
  const onEnd = () => {
    stop.abort(WATCH_ENDED);
    changes.close();
  };
  if (signal.aborted) onEnd();
  else signal.addEventListener("abort", onEnd, { once: true });
  let following = false;
  // Changes committed by other replicas: each of the task's events is a hint
  // to re-read. Not needed while the task runs here (local notifications).
  const followLog = (t: Task) => {
    if (following || !deps.watchThroughLog || runner.isRunning(t.id)) return;
    following = true;
    void (async () => {
      for await (const _ of eventLog.subscribe({
        filter: {
          workspaceId: t.workspaceId,
          sessionId: t.sessionId,
          resource: { object: "task", id: t.id },
        },
        signal: stop.signal,
      })) {
        changes.poke();
      }
    })().catch(() => {});
  };
  try {
    let task = follow.first ?? (await store.getTask(follow.taskId, scope));
    // The last answer: stop watching before handing it out.
    if (settled(task)) changes.close();
    yield task;
    while (!settled(task) && !stop.signal.aborted) {
      followLog(task);
      const snapshot = await changes.next(WATCH_POLL_MS, stop.signal);
      if (stop.signal.aborted) return;
      const next = snapshot ?? (await store.getTask(task.id, scope));
      if (equals(TaskSchema, next, task)) continue;
      task = next;
      if (settled(task)) {
        stop.abort(WATCH_ENDED);
        changes.close();
      }
      yield task;
    }
  } finally {
    stop.abort(WATCH_ENDED);
    signal.removeEventListener("abort", onEnd);
    changes.close();
  }
}

export function createTaskHandlers(deps: HandlerDeps): ServiceImpl<typeof TaskService> {
  const { store, runner, owner, watchers, eventLog } = deps;
  return {
    async submitTask(request, context) {
      if (!request.input) throw invalidRequest("input is required", "input");
      if (request.waitMs > MAX_SUBMIT_WAIT_MS) {
        throw invalidRequest(
          `wait_ms must be at most ${MAX_SUBMIT_WAIT_MS} (${request.waitMs} given); follow a longer task with WatchTask`,
          "wait_ms",
        );
      }
      // Any chat role (llm-provider §3) or Harn's `agent`; a tool message must
      // also answer an earlier tool call of the session (checked by the store).
      const problem = validateChatMessage(request.input, {
        path: "input",
        allowedRoles: [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.AGENT],
      });
      if (problem) throw invalidRequest(problem.message, problem.path);
      // A retry may wait differently: the same task all the same.
      const idempotency = idempotencyOf(SubmitTaskRequestSchema, request, request.idempotencyKey, [
        "waitMs",
      ]);
      await ensureParentOpen(deps, request.parentTaskId, scopeOf(context));
      const workspaceId = workspaceOfRequest(context, request.workspaceId);
      const prepareRequirements = requirementsCheck(deps.executor, request.requirements, {
        sessionId: request.sessionId,
        workspaceId,
        input: request.input,
      });
      const result = await store.submitTask(
        {
          sessionId: request.sessionId,
          agentId: request.agentId,
          input: request.input,
          busyPolicy: request.busyPolicy,
          parentTaskId: request.parentTaskId,
          ...(request.metadata ? { metadata: request.metadata } : {}),
          createSession: request.createSession,
          workspaceId,
          ...(idempotency ? { idempotency } : {}),
          ...(prepareRequirements ? { prepareRequirements } : {}),
        },
        writeContext(context),
        owner,
      );
      if (result.interrupted) runner.abort(result.interrupted, "interrupted by a newer turn");
      if (request.waitMs === 0 || isSettled(result.task, true)) {
        // Durable now; the turn starts in this replica without waiting for a poll.
        runner.dispatch(result.claim);
        return { task: result.task, replayed: result.replayed };
      }
      // Watch before the turn starts, so its end is not missed. A task this
      // call claimed only starts at dispatch, so the submitted state is
      // current; another one (queued, or an earlier submit's) is read again.
      const changes = watchers.watch(result.task.id);
      runner.dispatch(result.claim);
      const wait = createLinkedAbortController(context.signal);
      // Answer before the caller's deadline: a wait that ran into it would
      // leave the caller without the id of the task it submitted.
      const remaining = context.timeoutMs();
      const waitMs =
        remaining === undefined
          ? request.waitMs
          : Math.min(request.waitMs, Math.max(0, remaining - deadlineMarginMs(remaining)));
      const timer = setTimeout(() => wait.abort(WAIT_ENDED), waitMs);
      let task = result.task;
      try {
        for await (const next of followTask(deps, {
          taskId: task.id,
          untilSettled: true,
          scope: scopeOf(context),
          signal: wait.signal,
          changes,
          ...(result.claim ? { first: task } : {}),
        })) {
          task = next;
        }
      } finally {
        clearTimeout(timer);
        wait.abort(WAIT_ENDED);
      }
      return { task, replayed: result.replayed };
    },
    async getTask(request, context) {
      return { task: await store.getTask(request.taskId, scopeOf(context)) };
    },
    async listTasks(request, context) {
      const page = await store.listTasks(
        {
          sessionId: request.sessionId,
          workspaceId: request.workspaceId,
          parentTaskId: request.parentTaskId,
          waitingSignalId: request.waitingSignalId,
          statuses: request.statuses,
        },
        pageOf(request),
        scopeOf(context),
      );
      return { tasks: page.items, nextPageToken: page.nextPageToken };
    },
    async cancelTask(request, context) {
      // Answers once the worker confirmed the stop (see ./cancel.ts), with
      // the tasks it delegated to canceled too.
      const task = await cancelTaskTree(
        deps,
        request.taskId,
        request.reason,
        writeContext(context),
        context.signal,
      );
      return { task };
    },
    async replayTask(request, context) {
      const scope = scopeOf(context);
      const idempotency = idempotencyOf(ReplayTaskRequestSchema, request, request.idempotencyKey);
      // Checked and planned before anything is written: a replay that could
      // not proceed fails here, naming what is missing.
      const replay = await planReplay(
        { store, eventLog, fingerprints: deps.fingerprints },
        request,
        scope,
        idempotency,
      );
      const result = await store.createReplay(replay, writeContext(context), owner);
      runner.dispatch(result.claim);
      return { task: result.task, session: result.session, replayed: result.replayed };
    },
    async *watchTask(request, context) {
      // Watch before the first read: a change committed in between is not missed.
      const changes = watchers.watch(request.taskId);
      for await (const task of followTask(deps, {
        taskId: request.taskId,
        untilSettled: request.untilSettled,
        scope: scopeOf(context),
        signal: context.signal,
        changes,
      })) {
        yield { task };
      }
    },
  };
}
