/**
 * The `tasks-read-model` projector: applies the tasks journal's step records
 * (step-records.ts) to the read model, one transaction per batch, behind
 * the writers (docs/turn-journal.md, "Projectors").
 *
 * Built so far: **outcomes**. With the journal on, a finish no longer
 * inserts its Outcome row; the step record carries the Outcome and this
 * projector writes it. Tasks, messages and sessions rows are still written
 * by the turn's own transaction (the next step of the plan moves them here).
 *
 * Reads of outcomes keep read-your-writes by waiting for the projector to
 * pass the journal's head (see `Resources`); listings across sessions may
 * lag one batch.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { StepRecordSchema } from "@trellis/contracts/tasks";
import {
  createProjector,
  type Database,
  type JournalRecord,
  type Projector,
  projectorHealth,
} from "@trellis/storage";
import type { Insertable, Transaction } from "kysely";
import { encodeMessages } from "./codec.js";
import type { OutcomeTable, TasksDatabase } from "./schema.js";
import { FINISHED_STEP } from "./step-records.js";

/** The projector's durable name. */
export const READ_MODEL_PROJECTOR = "tasks-read-model";

/** Options of {@link createTasksReadModel}. */
export interface TasksReadModelOptions {
  database: Database<unknown>;
  schema: string;
  /** LISTEN for other replicas' commits (PostgreSQL, several replicas). */
  listen?: boolean;
  /** Wait this long after a wake-up to gather more steps in one batch (default 5 ms). */
  delayMs?: number;
  onError?: (error: unknown, context: string) => void;
}

/** Starts the read model's projector from its durable position. */
export function createTasksReadModel(options: TasksReadModelOptions): Promise<Projector> {
  const { schema } = options;
  return createProjector({
    database: options.database,
    schema,
    name: READ_MODEL_PROJECTOR,
    delayMs: options.delayMs ?? 5,
    listen: options.listen ?? false,
    ...(options.onError ? { onError: options.onError } : {}),
    project: (batch, trx) =>
      applySteps(batch, (trx as Transaction<TasksDatabase>).withSchema(schema)),
  });
}

/** The read model's health dependency (`trellis health`: lag, failures, stopped). */
export { projectorHealth as readModelHealth };

/** Applies a batch of journal entries (position order) to the read model. */
export async function applySteps(
  batch: readonly JournalRecord[],
  db: Transaction<TasksDatabase>,
): Promise<void> {
  const outcomes: Insertable<OutcomeTable>[] = [];
  for (const entry of batch) {
    if (entry.kind !== FINISHED_STEP) continue;
    const record = fromBinary(StepRecordSchema, entry.body);
    if (record.step.case !== "finished") continue;
    const outcome = record.step.value.outcome;
    if (outcome === undefined) continue;
    outcomes.push({
      id: outcome.id,
      task_id: outcome.taskId,
      session_id: outcome.sessionId,
      workspace_id: outcome.workspaceId,
      status: outcome.status,
      summary: outcome.summary,
      messages: encodeMessages(outcome.messages),
      artifact_ids: JSON.stringify(outcome.artifactIds),
      ...(outcome.createdAt ? { created_at: timestampDate(outcome.createdAt) } : {}),
    });
  }
  if (outcomes.length === 0) return;
  // Exactly once already (the position moves in this transaction); the
  // conflict clause only keeps a task's first Outcome, as the store did.
  await db
    .insertInto("outcomes")
    .values(outcomes)
    .onConflict((oc) => oc.doNothing())
    .execute();
}
