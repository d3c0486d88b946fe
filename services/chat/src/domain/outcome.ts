/**
 * Building ChatTurnOutcomes (harness-chat §5.2) from what the tasks service
 * reports. Pure.
 *
 * A chat turn is a task (docs/architecture.md). Its terminal or suspended
 * state maps onto the three outcome variants:
 *
 * | task status | outcome |
 * |---|---|
 * | COMPLETED | `completed { replies }` |
 * | FAILED | `errored { bucket of the category, category, reply }` |
 * | CANCELED | `errored { retryable_transient, "turn_canceled" }` |
 * | INPUT_REQUIRED / AUTH_REQUIRED | `suspended { signal_descriptor, pending_messages, invocation_id = task id }` |
 *
 * The descriptor's `signal_id` is the id the graph's author wrote (the label);
 * the tasks service's task-unique `<task_id>:<label>` is `global_signal_id`.
 */

import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  type ChatState,
  ChatStateSchema,
  type ChatTurnOutcome,
  ChatTurnOutcomeSchema,
  ErrorBucket,
  SuspensionKind,
} from "@trellis/contracts/chat";
import { type BlockingReasons, type Message, TaskStatus } from "@trellis/contracts/core";
import type { Task } from "@trellis/contracts/tasks";
import type { ShapeProblem } from "@trellis/messages";
import { isTerminalStatus as isTerminal } from "@trellis/messages";
import { bucketOf, CHAT_MESSAGE_SHAPE_INVALID, canonicalCategory } from "./buckets.js";
import { errorReply, type ReplyTemplates } from "./replies.js";

/** Category of a canceled turn (CancelTask, or interrupted by a newer turn). */
export const TURN_CANCELED = "turn_canceled";

/** Whether a task has settled: terminal, or suspended waiting for a signal. */
export function isSettled(status: TaskStatus): boolean {
  return isTerminal(status) || isSuspended(status);
}

export { isTerminal };

/** Whether a task status is a suspension (INPUT_REQUIRED, AUTH_REQUIRED). */
export function isSuspended(status: TaskStatus): boolean {
  return status === TaskStatus.INPUT_REQUIRED || status === TaskStatus.AUTH_REQUIRED;
}

/** An `errored` outcome for a failure in the given bucket. */
export function erroredOutcome(options: {
  sessionId: string;
  taskId?: string;
  bucket: ErrorBucket;
  category: string;
  diagnostic: string;
  templates: ReplyTemplates;
  partialReplies?: readonly Message[];
  /** Why no backend could run the turn, typed (from the task's failure). */
  blocking?: BlockingReasons | undefined;
}): ChatTurnOutcome {
  return create(ChatTurnOutcomeSchema, {
    sessionId: options.sessionId,
    taskId: options.taskId ?? "",
    kind: {
      case: "errored",
      value: {
        errorBucket: options.bucket,
        errorCategory: options.category,
        diagnostic: options.diagnostic,
        reply: errorReply(options.templates, options.bucket, {
          diagnostic: options.diagnostic,
          category: options.category,
        }),
        partialReplies: [...(options.partialReplies ?? [])],
        ...(options.blocking ? { blocking: options.blocking } : {}),
      },
    },
  });
}

/**
 * harness-chat §3.1 / §10.4: the inbound request failed validation before any
 * session load — `errored`, user-correctable, `chat_message_shape_invalid`,
 * with a reply saying what is wrong.
 */
export function shapeInvalidOutcome(
  sessionId: string,
  problem: ShapeProblem,
  templates: ReplyTemplates,
): ChatTurnOutcome {
  return erroredOutcome({
    sessionId,
    bucket: ErrorBucket.USER_CORRECTABLE,
    category: CHAT_MESSAGE_SHAPE_INVALID,
    diagnostic: `${problem.path}: ${problem.message}`,
    templates,
  });
}

/** What {@link outcomeFromTask} needs besides the task. */
export interface TaskOutcomeOptions {
  templates: ReplyTemplates;
  /**
   * The new-message tail of this (part of the) turn, extracted by index
   * (harness-chat §7, see `tail.ts`): replies, pending messages, or the
   * messages before a failure.
   */
  tail: readonly Message[];
  /** The session's messages after the turn, when the caller asked for them. */
  finalState?: readonly Message[];
}

/**
 * The signal id as the agent's author wrote it: the task-unique id the tasks
 * service reports is `<task_id>:<label>` (an id of another form is kept whole).
 */
export function authoredSignalId(taskId: string, globalSignalId: string): string {
  const prefix = `${taskId}:`;
  return globalSignalId.startsWith(prefix) ? globalSignalId.slice(prefix.length) : globalSignalId;
}

/**
 * The outcome of a settled task.
 *
 * @throws Error when the task has not settled (SUBMITTED / WORKING).
 */
export function outcomeFromTask(task: Task, options: TaskOutcomeOptions): ChatTurnOutcome {
  const base = { sessionId: task.sessionId, taskId: task.id };
  switch (task.status) {
    case TaskStatus.COMPLETED: {
      // harness-chat §5.2: the whole session state, the transcript and the
      // graph's other fields (as this task's run left them).
      const finalState: ChatState | undefined = options.finalState
        ? create(ChatStateSchema, {
            messages: [...options.finalState],
            ...(task.state ? { state: task.state } : {}),
          })
        : undefined;
      return create(ChatTurnOutcomeSchema, {
        ...base,
        kind: {
          case: "completed",
          value: { replies: [...options.tail], ...(finalState ? { finalState } : {}) },
        },
      });
    }
    case TaskStatus.FAILED: {
      const failure = task.failure;
      const category = canonicalCategory(failure?.category || "internal_error");
      const reason = failure?.detail?.reason;
      return erroredOutcome({
        ...base,
        bucket: bucketOf(category, {
          retryable: failure?.retryable ?? false,
          ...(reason ? { reason } : {}),
        }),
        category,
        diagnostic: failure?.message || category,
        templates: options.templates,
        partialReplies: options.tail,
        blocking: failure?.blocking,
      });
    }
    case TaskStatus.CANCELED:
      return erroredOutcome({
        ...base,
        bucket: ErrorBucket.RETRYABLE_TRANSIENT,
        category: TURN_CANCELED,
        diagnostic: "the turn was canceled",
        templates: options.templates,
        partialReplies: options.tail,
      });
    case TaskStatus.INPUT_REQUIRED:
    case TaskStatus.AUTH_REQUIRED: {
      const suspension = task.suspension;
      return create(ChatTurnOutcomeSchema, {
        ...base,
        kind: {
          case: "suspended",
          value: {
            signalDescriptor: {
              signalId: authoredSignalId(task.id, suspension?.signalId ?? ""),
              globalSignalId: suspension?.signalId ?? "",
              ...(suspension?.metadata ? { metadata: suspension.metadata } : {}),
              kind:
                task.status === TaskStatus.AUTH_REQUIRED
                  ? SuspensionKind.AUTH
                  : SuspensionKind.INPUT,
            },
            pendingMessages: [...options.tail],
            // harness-chat §5.2: the paused invocation's id is the task's.
            invocationId: task.id,
          },
        },
      });
    }
    default:
      throw new Error(`task ${task.id} has not settled (status ${TaskStatus[task.status]})`);
  }
}

/** An error a call to the tasks service failed with, as far as the outcome cares. */
export interface DispatchFailure {
  code: Code;
  /** ErrorDetail.reason, when the error carried one. */
  reason?: string;
  /** ErrorDetail.param: the request field at fault, e.g. `input.tool_call_id`. */
  param?: string;
  /** ErrorDetail.metadata. */
  metadata?: Readonly<Record<string, string>>;
  /** The error's message (safe to show: services never put secrets in it). */
  message: string;
  /** Why no backend could run the turn, when the tasks service refused it for that. */
  blocking?: BlockingReasons;
}

/**
 * The outcome of a turn whose dispatch failed (the tasks service refused or
 * could not be reached), or undefined when the error is not the turn's but the
 * caller's standing (unauthenticated, permission denied) and must stay an RPC
 * error.
 *
 * - the message refused by the tasks service (`param` `input…`) →
 *   `chat_message_shape_invalid`, user-correctable (harness-chat §10.4);
 * - a session that cannot be found on the existing-session path →
 *   `session_load_failed` (harness §3.2: the engine resolves intent vs store);
 * - a closed or failed session (`metadata.session_state`) → `session_closed`,
 *   session-terminating (harness-chat §10.1: start a new conversation);
 * - other validation or not-found errors → user-correctable, with the message;
 * - unreachable, overloaded, timed out, internal → retryable-transient.
 */
export function outcomeFromDispatchError(
  sessionId: string,
  failure: DispatchFailure,
  templates: ReplyTemplates,
): ChatTurnOutcome | undefined {
  if (failure.code === Code.Unauthenticated || failure.code === Code.PermissionDenied) {
    return undefined;
  }
  const object = failure.metadata?.object;
  const errored = (bucket: ErrorBucket, category: string) =>
    erroredOutcome({ sessionId, bucket, category, diagnostic: failure.message, templates });
  // No backend the agent allows can run the turn (its requirements): typed reasons.
  if (failure.blocking) {
    const category = canonicalCategory(failure.blocking.category || "unsupported");
    return erroredOutcome({
      sessionId,
      bucket: bucketOf(category, {
        retryable: failure.blocking.retryable,
        ...(failure.reason ? { reason: failure.reason } : {}),
      }),
      category,
      diagnostic: failure.message,
      templates,
      blocking: failure.blocking,
    });
  }
  // The tasks service refused the message itself (e.g. a tool result that
  // answers no earlier tool call, llm-provider §3): harness-chat §10.4.
  if (failure.code === Code.InvalidArgument && failure.param?.startsWith("input")) {
    return shapeInvalidOutcome(
      sessionId,
      { path: `message${failure.param.slice("input".length)}`, message: failure.message },
      templates,
    );
  }
  if (failure.code === Code.NotFound && (object === "session" || object === undefined)) {
    return errored(ErrorBucket.SESSION_TERMINATING, "session_load_failed");
  }
  // A closed or failed session refuses new turns: the conversation cannot continue.
  const sessionState = failure.metadata?.session_state;
  if (
    sessionState === "CLOSED" ||
    sessionState === "FAILED" ||
    (failure.code === Code.FailedPrecondition && object === "session")
  ) {
    return errored(ErrorBucket.SESSION_TERMINATING, "session_closed");
  }
  // A message too large is the user's to fix, whichever code carried it
  // (the runtime answers ResourceExhausted, which alone reads as overload).
  if (failure.reason === "payload_too_large") {
    return errored(ErrorBucket.USER_CORRECTABLE, "payload_too_large");
  }
  switch (failure.code) {
    case Code.InvalidArgument:
    case Code.NotFound:
    case Code.FailedPrecondition:
    case Code.OutOfRange:
    case Code.AlreadyExists: {
      const category = canonicalCategory(failure.reason || "invalid_request");
      return errored(ErrorBucket.USER_CORRECTABLE, category);
    }
    case Code.Unavailable:
    case Code.DeadlineExceeded:
    case Code.ResourceExhausted:
    case Code.Aborted:
    // The caller's own cancellation never gets here (`runTurn` rethrows it):
    // a Canceled downstream call is a connection the callee dropped (its
    // process died mid-call), so the dependency is what failed.
    case Code.Canceled:
      return errored(
        ErrorBucket.RETRYABLE_TRANSIENT,
        canonicalCategory(failure.reason || "upstream_unavailable"),
      );
    default:
      return errored(
        ErrorBucket.RETRYABLE_TRANSIENT,
        canonicalCategory(failure.reason || "internal_error"),
      );
  }
}
