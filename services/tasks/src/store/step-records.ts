/**
 * The turn's step records (trellis.tasks.v1.StepRecord): what a submit or a
 * finish appends to the tasks journal besides today's rows, so that the
 * read model can be projected from the journal (docs/turn-journal.md).
 *
 * A write collects its steps on its `Tx`; the write unit appends them as the
 * transaction's last statement (`appendInTransaction`), with the session's
 * counters as the write left them.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema, type Message } from "@trellis/contracts/core";
import {
  type FinishedStep,
  FinishedStepSchema,
  type Outcome,
  SessionCountersSchema,
  type StepRecord,
  StepRecordSchema,
  SubmittedStepSchema,
  type Task,
} from "@trellis/contracts/tasks";
import type { JournalEntry } from "@trellis/storage";
import type { SessionRow } from "./schema.js";
import { sessionStream } from "./session-stream.js";

/** Journal kind of a submit's step record. */
export const SUBMITTED_STEP = "tasks.step.submitted";
/** Journal kind of a finish's step record. */
export const FINISHED_STEP = "tasks.step.finished";

/** A step waiting for its transaction's end (counters are read from `session` then). */
export interface PendingStep {
  session: SessionRow;
  record: StepRecord;
}

/** A submit's step: the task as accepted, its input in full, its place in the queue. */
export function submittedStep(
  session: SessionRow,
  task: Task,
  input: Message,
  details: {
    queueSeq: bigint;
    runNow: boolean;
    inputPosition: bigint | undefined;
    createdBy: string;
    idempotencyKey: string;
  },
): PendingStep {
  return {
    session,
    record: create(StepRecordSchema, {
      sessionId: session.id,
      workspaceId: session.workspace_id,
      taskId: task.id,
      step: {
        case: "submitted",
        value: create(SubmittedStepSchema, {
          task,
          input,
          queueSeq: details.queueSeq,
          runNow: details.runNow,
          ...(details.inputPosition === undefined ? {} : { inputPosition: details.inputPosition }),
          createdBy: details.createdBy,
          idempotencyKey: details.idempotencyKey,
        }),
      },
    }),
  };
}

/** A finish's step: the task's new status, its new output, its Outcome when it ended. */
export function finishedStep(
  session: SessionRow,
  taskId: string,
  change: {
    status: number;
    output: readonly Message[];
    outcome?: Outcome;
    assignedBackend?: string;
    signalId?: string;
  },
): PendingStep {
  const value: FinishedStep = create(FinishedStepSchema, {
    status: change.status,
    output: [...change.output],
    ...(change.outcome ? { outcome: change.outcome } : {}),
    assignedBackend: change.assignedBackend ?? "",
    signalId: change.signalId ?? "",
  });
  return {
    session,
    record: create(StepRecordSchema, {
      sessionId: session.id,
      workspaceId: session.workspace_id,
      taskId,
      step: { case: "finished", value },
    }),
  };
}

/** The journal entries of a write's steps (stream = the session's `sessionStream`), counters filled in now. */
export function stepEntries(steps: readonly PendingStep[]): JournalEntry[] {
  return steps.map(({ session, record }) => {
    record.counters = create(SessionCountersSchema, {
      messageCount: BigInt(session.message_count),
      turnCount: BigInt(session.turn_count),
      transcriptEpoch: BigInt(session.transcript_epoch),
      nextQueueSeq: BigInt(session.next_queue_seq),
    });
    return {
      stream: sessionStream(session),
      kind: record.step.case === "submitted" ? SUBMITTED_STEP : FINISHED_STEP,
      body: toBinary(StepRecordSchema, record),
    };
  });
}

/**
 * The events behind the bodies this process encoded, while the bodies live
 * (see `encodeRowChanges`): the projector of this process is handed the very
 * bodies the owner appended and takes the events back without decoding.
 */
const encodedEvents = new WeakMap<Uint8Array, Event>();

/** An owned step's public event as a journal body. */
export function encodeStepEvent(event: Event): Uint8Array {
  const body = toBinary(EventSchema, event);
  encodedEvents.set(body, event);
  return body;
}

/**
 * Decodes {@link encodeStepEvent} (the event itself for a body this process
 * encoded; the projector completes it with its sequence, as it would a copy).
 */
export function decodeStepEvent(body: Uint8Array): Event {
  return encodedEvents.get(body) ?? fromBinary(EventSchema, body);
}
