/**
 * One chat turn, end to end (harness-chat §5–§8): validate, classify the
 * dispatch path, submit the turn as a task into the session's mailbox, follow
 * it until it settles, and map the task onto a ChatTurnOutcome.
 *
 * Send and SendStreaming share this code; SendStreaming also forwards the
 * task's progress events as chunks.
 */

import { create } from "@bufbuild/protobuf";
import type { CallOptions, HandlerContext } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { createLinkedAbortController } from "@connectrpc/connect/protocol";
import type { ExecutionRequirements } from "@trellis/contracts/adapters";
import { type ChatChunk, ChatChunkSchema, type ChatTurnOutcome } from "@trellis/contracts/chat";
import { type Message, TaskStatus } from "@trellis/contracts/core";
import { BusyPolicy, type Task } from "@trellis/contracts/tasks";
import { callerOf } from "@trellis/platform";
import type { ChatConfig } from "../config.js";
import {
  isSettled,
  outcomeFromDispatchError,
  outcomeFromTask,
  shapeInvalidOutcome,
} from "../domain/outcome.js";
import { chunkOf, settledStatusOf } from "../domain/progress.js";
import { turnTail } from "../domain/tail.js";
import { inboundProblem } from "../domain/validation.js";
import { dispatchFailureOf, onBehalfOf, type TasksPort } from "./tasks-port.js";

/** The fields of SendRequest / SendStreamingRequest. */
export interface TurnRequest {
  sessionId: string;
  message?: Message | undefined;
  agentId: string;
  idempotencyKey: string;
  includeFinalState: boolean;
  /** This turn's own requirements, narrowing the agent's. */
  requirements?: ExecutionRequirements | undefined;
}

/** What a turn yields: progress chunks (streaming only), then one outcome. */
export type TurnStep = { chunk: ChatChunk } | { outcome: ChatTurnOutcome };

/** Dependencies of the turn runner. */
export interface TurnDeps {
  port: TasksPort;
  config: ChatConfig;
}

/** Read a session's whole history, in transcript order. */
export async function loadHistory(
  port: TasksPort,
  sessionId: string,
  options: CallOptions,
): Promise<Message[]> {
  const messages: Message[] = [];
  let pageToken = "";
  do {
    const page = await port.sessions.listMessages(
      { sessionId, pageSize: 1000, pageToken },
      options,
    );
    for (const entry of page.messages) if (entry.message) messages.push(entry.message);
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return messages;
}

/**
 * How long SubmitTask may hold Send's call waiting for the turn to settle
 * (the tasks service's maximum); a longer turn is followed with WatchTask.
 */
const SUBMIT_WAIT_MS = 60_000;

/** Why a turn's watch is ended once its task settled (one value: no DOMException per turn). */
const SETTLED = new Error("the task settled");

/** The settled task: WatchTask until it completes, fails or suspends. */
async function settle(port: TasksPort, taskId: string, options: CallOptions): Promise<Task> {
  let last: Task | undefined;
  // Leaving the loop early does not end a Connect client stream: abort it, so
  // the watch (and its client span) ends as soon as the task settles.
  const done = createLinkedAbortController(options.signal);
  try {
    for await (const response of port.tasks.watchTask(
      { taskId, untilSettled: true },
      { ...options, signal: done.signal },
    )) {
      if (response.task) last = response.task;
      if (last && isSettled(last.status)) return last;
    }
  } finally {
    done.abort(SETTLED);
  }
  if (last && isSettled(last.status)) return last;
  throw new ConnectError(`the watch of task ${taskId} ended before it settled`, Code.Unavailable);
}

/** Map a settled task onto the turn's outcome (harness-chat §7, §8.1, §10). */
export async function outcomeOfTask(
  deps: TurnDeps,
  task: Task,
  options: CallOptions & { includeFinalState?: boolean },
): Promise<ChatTurnOutcome> {
  const finalState =
    options.includeFinalState && task.status === TaskStatus.COMPLETED
      ? await loadHistory(deps.port, task.sessionId, options)
      : undefined;
  return outcomeFromTask(task, {
    templates: deps.config.replies,
    tail: turnTail(task),
    ...(finalState ? { finalState } : {}),
  });
}

/**
 * Run one turn. Yields progress chunks when `stream` is set, then exactly one
 * outcome. Never throws for a turn-level failure (those are `errored`
 * outcomes); rethrows when the caller's call itself is refused or canceled.
 */
export async function* runTurn(
  deps: TurnDeps,
  request: TurnRequest,
  context: HandlerContext,
  stream: boolean,
): AsyncGenerator<TurnStep> {
  const templates = deps.config.replies;
  // harness-chat §3.1 / §5.1: validate before any session load or agent run.
  const problem = inboundProblem({ sessionId: request.sessionId, message: request.message });
  if (problem || !request.message) {
    yield {
      outcome: shapeInvalidOutcome(
        request.sessionId,
        problem ?? { path: "message", message: "a message is required" },
        templates,
      ),
    };
    return;
  }
  const options = onBehalfOf(context);
  const failed = (error: unknown, taskId?: string): ChatTurnOutcome => {
    if (context.signal.aborted) throw error;
    const outcome = outcomeFromDispatchError(
      request.sessionId,
      dispatchFailureOf(error),
      templates,
    );
    if (!outcome) throw error;
    if (taskId) outcome.taskId = taskId;
    return outcome;
  };

  let taskId: string;
  let settledTask: Task | undefined;
  try {
    // The caller's workspace ("" for an internal call: the tasks service's default).
    const workspaceId = callerOf(context)?.workspaceId ?? "";
    // harness-chat §5.3: ENQUEUE into the session's mailbox serializes turns of
    // one session across every chat replica (no process-local lock).
    const submitted = await deps.port.tasks.submitTask(
      {
        sessionId: request.sessionId,
        input: request.message,
        busyPolicy: BusyPolicy.ENQUEUE,
        idempotencyKey: request.idempotencyKey,
        // harness-chat §6: get or create the session in the same transaction. A
        // new session (the new-session path) is bound to agent_id; an existing
        // one runs its own agent. The tasks service also checks a tool result
        // against the session's earlier tool calls, under the session lock.
        createSession: true,
        agentId: request.agentId,
        workspaceId,
        // Send: the tasks service answers once the turn settled (most turns
        // are short), which saves a WatchTask call; a turn still running then
        // is followed below. SendStreaming follows the events instead.
        waitMs: stream ? 0 : SUBMIT_WAIT_MS,
        ...(request.requirements ? { requirements: request.requirements } : {}),
      },
      options,
    );
    if (!submitted.task) throw new ConnectError("SubmitTask returned no task", Code.Internal);
    taskId = submitted.task.id;
    if (!stream && isSettled(submitted.task.status)) settledTask = submitted.task;
  } catch (error) {
    yield { outcome: failed(error) };
    return;
  }

  let outcome: ChatTurnOutcome;
  const streamed = new Set<string>();
  try {
    if (stream) {
      // Leaving the loop does not end a Connect client stream (see settle):
      // abort it, or the task's event stream stays open until the whole call
      // ends — past the outcome, for a caller that then leaves without a word.
      const done = createLinkedAbortController(options.signal);
      try {
        // harness-chat §9: the task's events, in order, until it settles.
        for await (const response of deps.port.events.streamEvents(
          { taskId },
          { ...options, signal: done.signal },
        )) {
          const event = response.event;
          if (!event) continue;
          const chunk = chunkOf(event);
          if (chunk) {
            if (chunk.kind.case === "message") streamed.add(chunk.kind.value.id);
            yield { chunk };
          }
          if (settledStatusOf(event) !== undefined) break;
        }
      } finally {
        done.abort(SETTLED);
      }
    }
    // harness §5.3: returns as soon as the task completes, fails or suspends.
    const task = settledTask ?? (await settle(deps.port, taskId, options));
    if (stream) {
      // Every new message is also a chunk, whatever order the events came in
      // (pending messages of a suspension have no event until the task ends).
      for (const message of turnTail(task)) {
        if (message.id !== "" && streamed.has(message.id)) continue;
        yield { chunk: create(ChatChunkSchema, { kind: { case: "message", value: message } }) };
      }
    }
    outcome = await outcomeOfTask(deps, task, {
      ...options,
      includeFinalState: request.includeFinalState,
    });
  } catch (error) {
    outcome = failed(error, taskId);
  }
  yield { outcome };
}
