/**
 * The `tasks-read-model` projector: applies the tasks journal's step records
 * (step-records.ts) to the read model, batch by batch, behind the writers
 * (docs/turn-journal.md, "Projectors"). A batch of row changes is ONE
 * statement with the claim of its position (`rowWrites`, the projector's
 * `writes`; a task taking a mailbox another of the batch releases too:
 * the releases run first, see row-changes.ts); one that needs a read first
 * or holds events of an old journal is one transaction (`applySteps`).
 *
 * Step 1 (`TRELLIS_TASKS_JOURNAL=true`): **outcomes**. A finish no longer
 * inserts its Outcome row; the step record carries the Outcome and this
 * projector writes it. Tasks, messages and sessions rows are still written
 * by the turn's own transaction.
 *
 * Step 2 (`TRELLIS_TASKS_JOURNAL=owner`): an owned submit or finish writes
 * nothing but its append (its row changes, no step record; its public
 * events go to the outbox in the append's own transaction: the journal's
 * `AppendOptions.events`); this projector also applies its row changes
 * (tasks, messages, sessions, checkpoints, agent state, idempotency keys,
 * outcomes: row-changes.ts). Journals written before still apply: a
 * finished record's Outcome is written as in step 1, and events appended as
 * journal entries (before session 24) are written to the outbox here, in
 * journal order, then handed to the outbox relay.
 *
 * Reads of outcomes keep read-your-writes by waiting for the projector to
 * pass the journal's head (see `Resources`); listings across sessions may
 * lag one batch.
 */
import { fromBinary } from "@bufbuild/protobuf";
import type { Event } from "@trellis/contracts/core";
import { StepRecordSchema } from "@trellis/contracts/tasks";
import type { LoggedEvent } from "@trellis/eventlog";
import {
  appendToOutboxLogged,
  createProjector,
  type Database,
  type Journal,
  type JournalRecord,
  type Projector,
  projectorHealth,
} from "@trellis/storage";
import type { Transaction } from "kysely";
import {
  applyRowChanges,
  decodeRowChanges,
  outcomeRow,
  ROWS_STEP,
  type Row,
  type RowChange,
  rowWrites,
} from "./row-changes.js";
import type { TasksDatabase } from "./schema.js";
import { decodeStepEvent, FINISHED_STEP, SUBMITTED_STEP } from "./step-records.js";

/** The projector's durable name. */
export const READ_MODEL_PROJECTOR = "tasks-read-model";

/**
 * The read model's default batching delay (`TRELLIS_TASKS_PROJECTOR_DELAY`):
 * long enough that at one turn in flight a turn's submit and finish usually
 * share a transaction (session 15: 1.68 → 1.01 projector transactions per
 * turn), short beside a turn's answer, which never waits for it. Only a
 * small backlog waits it (the projector's `delayUntilBacklog`, 32 entries;
 * a chat turn appends two): under load a wake-up already finds a large
 * batch and applies it at once.
 */
export const DEFAULT_READ_MODEL_DELAY_MS = 30;

/** Options of {@link createTasksReadModel}. */
export interface TasksReadModelOptions {
  database: Database<unknown>;
  schema: string;
  /** LISTEN for other replicas' commits (PostgreSQL, several replicas). */
  listen?: boolean;
  /**
   * Wait up to this long after a wake-up to gather more steps in one batch
   * (default 30 ms: a turn's submit and finish, and other turns', share one
   * transaction); a `waitFor` ends the wait at once, and a backlog of 32
   * entries skips or ends it (the projector's `delayUntilBacklog`).
   */
  delayMs?: number;
  onError?: (error: unknown, context: string) => void;
  /** The journal of this process (owner mode): its commits wake the projector at once. */
  journal?: Journal;
  /**
   * Where events found in the journal go (owner-mode journals written
   * before session 24 appended them as entries): the outbox of this schema,
   * in the projector's transaction; `kick` hands the committed rows to its
   * relay after.
   */
  outbox?: { schema: string; kick(committed?: readonly LoggedEvent[]): void };
}

/** Starts the read model's projector from its durable position. */
export function createTasksReadModel(options: TasksReadModelOptions): Promise<Projector> {
  const { schema, outbox } = options;
  // The outbox rows of the batch being applied (replaced on a retry).
  let logged: LoggedEvent[] = [];
  // The projector hands the same batch to `writes` and, when it declines or
  // its statement fails, to `project`: decoded once.
  let last: { batch: readonly JournalRecord[]; steps: BatchSteps } | undefined;
  const stepsOf = (batch: readonly JournalRecord[]): BatchSteps => {
    if (last?.batch !== batch) last = { batch, steps: decodeSteps(batch) };
    return last.steps;
  };
  return createProjector({
    database: options.database,
    schema,
    name: READ_MODEL_PROJECTOR,
    delayMs: options.delayMs ?? DEFAULT_READ_MODEL_DELAY_MS,
    listen: options.listen ?? false,
    ...(options.onError ? { onError: options.onError } : {}),
    ...(options.journal ? { journal: options.journal } : {}),
    ...(outbox
      ? {
          onApplied: () => {
            const committed = logged;
            logged = [];
            // Only a batch that wrote events: a kick without rows sends the
            // relay to read the outbox back.
            if (committed.length > 0) outbox.kick(committed);
          },
        }
      : {}),
    // A batch of plain row changes is one statement with its claim.
    writes: (batch) => {
      const { rows, outcomes, events } = stepsOf(batch);
      return events.length > 0 ? undefined : rowWrites(rows, outcomes);
    },
    project: async (batch, trx) => {
      const steps = stepsOf(batch);
      logged = await applySteps(steps, (trx as Transaction<TasksDatabase>).withSchema(schema), {
        raw: trx as Transaction<TasksDatabase>,
        ...(outbox ? { outboxSchema: outbox.schema } : {}),
      });
    },
  });
}

/** The read model's health dependency (`trellis health`: lag, failures, stopped). */
export { projectorHealth as readModelHealth };

/**
 * Applies a batch of journal entries (position order, as {@link decodeSteps}
 * decoded them) to the read model; returns the outbox rows it wrote (owned
 * steps' events).
 */
export async function applySteps(
  { rows, outcomes, events, encoded }: BatchSteps,
  db: Transaction<TasksDatabase>,
  owned?: { raw: Transaction<TasksDatabase>; outboxSchema?: string },
): Promise<LoggedEvent[]> {
  // Rows and Outcomes in one statement.
  await applyRowChanges(rows, db, outcomes);
  if (events.length === 0) return [];
  if (!owned?.outboxSchema) throw new Error("tasks-read-model: events in the journal, no outbox");
  // Sequenced by the outbox now, in journal order (one owner per session);
  // the events were decoded here, so the relay and the log may keep them.
  return appendToOutboxLogged(owned.raw, owned.outboxSchema, events, { adopt: true, encoded });
}

/**
 * What a batch asks of the read model: owned steps' row changes, finished
 * step records' Outcome rows, and events journals of before session 24
 * appended as entries (with their journal bodies).
 */
interface BatchSteps {
  rows: RowChange[];
  outcomes: Row[];
  events: Event[];
  encoded: Map<Event, Uint8Array>;
}

function decodeSteps(batch: readonly JournalRecord[]): BatchSteps {
  const outcomes: Row[] = [];
  const rows: RowChange[] = [];
  const events: Event[] = [];
  // Each event's journal body: its outbox row is that body plus the sequence.
  const encoded = new Map<Event, Uint8Array>();
  for (const entry of batch) {
    if (entry.kind === ROWS_STEP) {
      rows.push(...decodeRowChanges(entry.body));
      continue;
    }
    if (entry.kind !== FINISHED_STEP) {
      // Anything but a step record is an owned step's public event.
      if (entry.kind !== SUBMITTED_STEP) {
        const event = decodeStepEvent(entry.body);
        events.push(event);
        encoded.set(event, entry.body);
      }
      continue;
    }
    const record = fromBinary(StepRecordSchema, entry.body);
    if (record.step.case !== "finished") continue;
    const outcome = record.step.value.outcome;
    if (outcome === undefined) continue;
    outcomes.push(outcomeRow(outcome));
  }
  return { rows, outcomes, events, encoded };
}
