/**
 * The events, the claim and the end (outcome, failure) of a turn's steps,
 * built one way for both writers: the relational mailbox (mailbox.ts,
 * runs.ts) and the session owner (owned-turns.ts). Only the builders are shared: each writer gives the
 * events their ids, sequences and previous ids its own way (the outbox's
 * counters, or the owner's append).
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { ErrorDetailSchema, type Event, type Message, TaskStatus } from "@trellis/contracts/core";
import {
  type Agent,
  type BusyPolicy,
  type Outcome,
  OutcomeSchema,
  OutcomeStatus,
  type Task,
  TaskFailureSchema,
} from "@trellis/contracts/tasks";
import { blockingOf, type TaskEndFailure } from "../domain/blocking.js";
import { type EventScope, taskStatusEvent, taskSubmittedEvent } from "../domain/events.js";
import { cancelRequested, isSuspended, transition } from "../domain/lifecycle.js";
import { decideSubmit, type SubmitDecision } from "../domain/mailbox.js";
import type { RunOutcome } from "../domain/run.js";
import { summarize } from "../domain/transcript.js";
import { decodeRequirements, encodeMessages, resumePayloadOf } from "./codec.js";
import type { SessionRow, TaskRow } from "./schema.js";
import type { Claim, SubmitResult } from "./task-store.js";

/**
 * A submit's events: `task.submitted` (in the caller's scope, which carries
 * its idempotency key), then `task.working` ("started", in the session's
 * scope) when the task runs at once; and the status the task starts in.
 */
export function submitEvents(
  submitScope: EventScope,
  sessionScope: EventScope,
  taskId: string,
  agentId: string,
  runNow: boolean,
): { events: Event[]; status: TaskStatus } {
  const events = [taskSubmittedEvent(submitScope, taskId, agentId)];
  if (!runNow) return { events, status: TaskStatus.SUBMITTED };
  const status = transition(TaskStatus.SUBMITTED, TaskStatus.WORKING, taskId);
  events.push(
    taskStatusEvent(
      sessionScope,
      taskId,
      status,
      TaskStatus.SUBMITTED,
      "started",
      undefined,
      agentId,
    ),
  );
  return { events, status };
}

/**
 * What the busy policy makes of a submit to a session whose mailbox holds
 * `running` (the turn holding it) and `head` (the first queued task).
 */
export function submitDecision(
  policy: BusyPolicy,
  mailbox: { running?: TaskRow | undefined; head?: TaskRow | undefined },
  sessionId: string,
): SubmitDecision {
  const { running, head } = mailbox;
  return decideSubmit(
    policy,
    {
      ...(running ? { running: { id: running.id, canceled: cancelRequested(running) } } : {}),
      queued: head ? 1 : 0,
    },
    sessionId,
  );
}

/**
 * `task.working` for the claimed head of a queue ("started", or "resumed"
 * after a suspension); none when it is WORKING already.
 */
export function claimEvent(
  scope: EventScope,
  head: Pick<TaskRow, "id" | "status" | "agent_id">,
): Event | undefined {
  const from = head.status as TaskStatus;
  if (from === TaskStatus.WORKING) return undefined;
  transition(from, TaskStatus.WORKING, head.id);
  return taskStatusEvent(
    scope,
    head.id,
    TaskStatus.WORKING,
    from,
    isSuspended(from) ? "resumed after its signal arrived" : "started",
    undefined,
    head.agent_id,
  );
}

/** How a run that did not suspend ended. */
export interface RunEnd {
  status: TaskStatus;
  /** Why its open tool calls are closed (closeToolCalls). */
  note: string;
  failure?: TaskEndFailure;
  /** The lifecycle event, emitted after the output's message events. */
  event: Event;
}

/**
 * The end of a WORKING task's run that completed, failed or was canceled by
 * the agent (a suspension is not an end; it throws for one).
 */
export function runEnd(
  outcome: RunOutcome,
  from: TaskStatus,
  taskId: string,
  scope: EventScope,
): RunEnd {
  switch (outcome.status) {
    case "completed":
      transition(from, TaskStatus.COMPLETED, taskId);
      return {
        status: TaskStatus.COMPLETED,
        note: "the turn ended without its result",
        event: taskStatusEvent(scope, taskId, TaskStatus.COMPLETED, from, "completed"),
      };
    case "failed":
      transition(from, TaskStatus.FAILED, taskId);
      return {
        status: TaskStatus.FAILED,
        note: "the turn failed",
        failure: {
          category: outcome.category,
          message: outcome.message,
          retryable: outcome.retryable,
          ...blockingOf(outcome),
        },
        event: taskStatusEvent(
          scope,
          taskId,
          TaskStatus.FAILED,
          from,
          outcome.message,
          create(ErrorDetailSchema, { reason: outcome.category, domain: "tasks.trellis.dev" }),
        ),
      };
    case "cancelled":
      transition(from, TaskStatus.CANCELED, taskId);
      return {
        status: TaskStatus.CANCELED,
        note: "the turn was canceled",
        event: taskStatusEvent(
          scope,
          taskId,
          TaskStatus.CANCELED,
          from,
          "the agent canceled the turn",
        ),
      };
    default:
      throw new Error(`a run's end: unexpected outcome ${outcome.status}`);
  }
}

/** How a task ended, as its outcome and its row record it. */
type Ended = Pick<RunEnd, "status" | "note" | "failure">;

/**
 * The Outcome of a task that ended with `messages` (its whole output): its
 * summary is the last agent text, else the failure's message or the note.
 */
export function endedOutcome(
  row: Pick<TaskRow, "id" | "session_id" | "workspace_id">,
  id: string,
  end: Ended,
  messages: Message[],
): Outcome {
  return create(OutcomeSchema, {
    id,
    taskId: row.id,
    sessionId: row.session_id,
    workspaceId: row.workspace_id,
    status:
      end.status === TaskStatus.COMPLETED
        ? OutcomeStatus.SUCCEEDED
        : end.status === TaskStatus.CANCELED
          ? OutcomeStatus.CANCELED
          : OutcomeStatus.FAILED,
    summary: summarize(messages, end.failure?.message ?? end.note),
    messages,
    artifactIds: [],
    createdAt: timestampNow(),
  });
}

/**
 * The `failure` column of a task that ended: its end's failure with the
 * error detail naming the task, else what the row held.
 */
export function endedFailure(
  row: Pick<TaskRow, "id" | "failure">,
  end: Pick<Ended, "failure">,
): Uint8Array | null {
  if (!end.failure) return row.failure;
  return toBinary(
    TaskFailureSchema,
    create(TaskFailureSchema, {
      ...end.failure,
      detail: create(ErrorDetailSchema, {
        reason: end.failure.category,
        domain: "tasks.trellis.dev",
        metadata: { task_id: row.id },
      }),
    }),
  );
}

/**
 * The columns a task's end sets (its writer adds `updated_at`): its status,
 * output and outcome, and nothing left holding it (suspension, signal,
 * checkpoint, lease). `at` is when, on the writer's clock; a requested
 * cancel's `canceled_at` stays.
 */
export function endedColumns<At>(
  row: Pick<TaskRow, "id" | "failure" | "canceled_at">,
  end: Ended,
  messages: readonly Message[],
  outcomeId: string,
  at: At,
) {
  return {
    status: end.status,
    run_state: "done",
    output: encodeMessages(messages),
    outcome_id: outcomeId,
    failure: endedFailure(row, end),
    suspension: null,
    signal_id: null,
    checkpoint: null,
    resume_payload: null,
    lease_owner: null,
    lease_expires_at: null,
    ...(end.status === TaskStatus.CANCELED
      ? row.canceled_at
        ? {}
        : { canceled_at: at }
      : { completed_at: at }),
  };
}

/**
 * What a submit that created `task` answers (relational and owned alike):
 * its claim when the mailbox was free (run it now), and the running turn it
 * interrupted.
 */
export function submitResult(
  directory: { safeToRetry(agent: Agent): boolean },
  task: Task,
  agent: Agent,
  decision: SubmitDecision,
  inputPosition: bigint | null,
  owner: string,
  row: Pick<TaskRow, "checkpoint" | "resume_payload" | "requirements">,
  session: Pick<SessionRow, "transcript_epoch">,
): SubmitResult {
  return {
    task,
    replayed: false,
    ...(decision.runNow
      ? { claim: claimOf(directory, task, agent, inputPosition ?? 0n, owner, row, session) }
      : {}),
    ...(decision.interrupt ? { interrupted: decision.interrupt } : {}),
  };
}

/** The claim handed to the runner for a task its owner now runs. */
export function claimOf(
  directory: { safeToRetry(agent: Agent): boolean },
  task: Task,
  agent: Agent,
  inputPosition: bigint,
  owner: string,
  row: Pick<TaskRow, "checkpoint" | "resume_payload" | "requirements">,
  session: Pick<SessionRow, "transcript_epoch">,
): Claim {
  const resume = resumePayloadOf(row.resume_payload);
  return {
    task,
    agent,
    safeToRetry: directory.safeToRetry(agent),
    inputPosition,
    transcriptEpoch: session.transcript_epoch,
    leaseOwner: owner,
    ...decodeRequirements(row.requirements),
    ...(resume ? { resume: { checkpoint: row.checkpoint, payload: resume.payload } } : {}),
  };
}
