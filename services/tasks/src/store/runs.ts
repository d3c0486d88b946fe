/**
 * How runs and tasks end: a run's result (completed, suspended, failed,
 * canceled) applied under the fencing rule — a run whose lease was taken
 * over, or that was finalized after a cancel, commits nothing — and a task's
 * final change (output into the transcript, outcome, lifecycle event).
 */
import { create, fromBinary, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { type Event, type Message, SessionState, TaskStatus } from "@trellis/contracts/core";
import { SuspensionSchema } from "@trellis/contracts/tasks";
import { CompiledQuery, type UpdateObject } from "kysely";
import type { TaskEndFailure } from "../domain/blocking.js";
import { agentActor, dataEvent, taskStatusEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { cancelEndReason, cancelRequested, transition } from "../domain/lifecycle.js";
import type { RunOutcome } from "../domain/run.js";
import { signalIdFor } from "../domain/signals.js";
import { closeToolCalls } from "../domain/transcript.js";
import { decodeMessages, encodeMessages } from "./codec.js";
import { toTask } from "./rows.js";
import type { TaskRow, TasksDatabase } from "./schema.js";
import { finishedStep } from "./step-records.js";
import { NOW, type StoreContext } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { Claim, FinishResult } from "./task-store.js";
import { endedColumns, endedOutcome, runEnd } from "./turn-events.js";
import type { LockedSession, TaskWrite, Tx } from "./write-unit.js";

/** How a task ends (see `Runs.finalize`). */
export interface TaskEnd {
  status: TaskStatus;
  extra: Message[];
  note: string;
  failure?: TaskEndFailure;
  /** The lifecycle event, emitted after the output's message events. */
  event?: Event;
}

declare module "./store-parts.js" {
  interface StoreParts {
    /** How a run and a task end: finish, progress, outcomes. */
    runs: Runs;
  }
}

/** The end of runs and tasks (see the module header). */
export class Runs {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  /**
   * Ends a task of a locked session for good: its output (pending messages of
   * a suspension, then `extra`, then synthetic results for open tool calls)
   * joins the transcript — only if the task ever started — and it gets an
   * Outcome. `status` is the terminal status it ends in (already recorded or
   * recorded now).
   */
  async finalize(tx: Tx, session: LockedSession, row: TaskRow, end: TaskEnd): Promise<TaskRow> {
    return this.#updateTask(tx, await this.#finalChange(tx, session, row, end));
  }

  /** Writes a task change now (see `WriteUnit.saveSessionWithTask` to write it with the session). */
  async #updateTask(tx: Tx, change: Extract<TaskWrite, { kind: "update" }>): Promise<TaskRow> {
    const updated = await tx.db
      .updateTable("tasks")
      .set(change.set)
      .where("id", "=", change.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    tx.changed.set(updated.id, updated);
    return updated;
  }

  /**
   * Ends a task (#finalize without the row's update, which is returned):
   * appends its output, emits its events, and queues its outcome.
   */
  async #finalChange(
    tx: Tx,
    session: LockedSession,
    row: TaskRow,
    end: TaskEnd,
  ): Promise<Extract<TaskWrite, { kind: "update" }>> {
    const pending = row.suspension
      ? fromBinary(SuspensionSchema, row.suspension).pendingMessages
      : [];
    // harness-chat §8.1: pending messages joined the transcript (and the
    // output) when the task suspended; only what is new is appended now.
    const earlier = decodeMessages(row.output);
    const already = new Set(earlier.map((m) => m.id));
    const output =
      row.input_position === null
        ? []
        : closeToolCalls([...pending, ...end.extra], end.note).filter(
            (m) => m.id === "" || !already.has(m.id),
          );
    const appended = await this.#p.transcript.appendMessages(
      tx,
      session,
      output,
      row.id,
      agentActor(row.agent_id),
    );
    const messages = [...earlier, ...appended.map((m) => m.message as Message)];
    // Before the lifecycle event: whoever issues a receipt on task.completed has it.
    if (row.parent_task_id !== "")
      await this.#p.replays.emitReplayEnd(tx, session, row, end, messages);
    if (end.event) this.#p.unit.emit(tx, end.event);
    const outcomeId = row.outcome_id || newId("out");
    const outcome = row.outcome_id ? undefined : endedOutcome(row, outcomeId, end, messages);
    if (this.#p.unit.journaled) {
      // The Outcome rides on the step record; the read model projects it.
      tx.steps.push(
        finishedStep(session, row.id, {
          status: end.status,
          output: appended.map((m) => m.message as Message),
          ...(outcome ? { outcome } : {}),
        }),
      );
    } else if (outcome) {
      tx.pendingOutcomes.push({
        id: outcomeId,
        task_id: row.id,
        session_id: row.session_id,
        workspace_id: row.workspace_id,
        status: outcome.status,
        summary: outcome.summary,
        messages: encodeMessages(messages),
        artifact_ids: "[]",
      });
    }
    return {
      kind: "update",
      id: row.id,
      set: { ...endedColumns(row, end, messages, outcomeId, NOW), updated_at: NOW },
    };
  }

  async recordProgress(
    claim: Claim,
    items: readonly { kind: string; data: { [key: string]: JsonValue } }[],
  ): Promise<void> {
    if (items.length === 0) return;
    const task = claim.task;
    const scope = {
      workspaceId: task.workspaceId,
      sessionId: task.sessionId,
      actor: agentActor(claim.agent.id),
    };
    const resource = { object: "task", id: task.id };
    await this.#p.unit.write(async (tx) => {
      for (const item of items) {
        this.#p.unit.emit(tx, dataEvent(scope, item.kind, resource, task.id, item.data));
      }
    });
  }

  async finishRun(claim: Claim, outcome: RunOutcome, owner: string): Promise<FinishResult> {
    return this.#p.unit.write(async (tx): Promise<FinishResult> => {
      const session = await this.#p.unit.lockSession(
        tx,
        claim.task.sessionId,
        claim.task.workspaceId,
      );
      // This run's task and the head of the queue, in one read (under the session lock).
      const { rows } = await tx.raw.executeQuery<TaskRow>(
        CompiledQuery.raw(this.#ctx.hot.finishedRun, [
          session.workspace_id,
          session.id,
          claim.task.id,
          "queued",
          claim.task.id,
          2,
        ]),
      );
      const row = rows[0]?.id === claim.task.id ? rows[0] : undefined;
      const head = rows.find((r) => r.run_state === "queued" && r.id !== claim.task.id);
      // Fencing: only the replica that still holds the claim may commit.
      if (row?.run_state !== "running" || row.lease_owner !== owner) return { applied: false };
      const canceled = row.status === TaskStatus.CANCELED || cancelRequested(row);
      const change = canceled
        ? // A requested cancel is recorded now that the runner is done with the backend.
          await this.#finalChange(tx, session, row, {
            status: TaskStatus.CANCELED,
            extra: outcome.messages,
            note: "the turn was canceled",
            ...this.canceledEvent(
              session,
              row,
              cancelEndReason(row.cancel_reason, outcome.cancelConfirmed ?? true),
            ),
          })
        : await this.#outcomeChange(tx, session, row, outcome);
      change.set = { ...change.set, ...(await this.#ranWith(tx, row, outcome, !canceled)) };
      if (outcome.backendId) {
        const step = tx.steps.findLast((s) => s.record.taskId === row.id)?.record.step;
        if (step?.case === "finished") step.value.assignedBackend = outcome.backendId;
      }
      if (head === undefined || session.state === SessionState.CLOSED) {
        // Nothing to claim next: the task's row is written with the session.
        const updated = await this.#p.unit.saveSessionWithTask(tx, session, change);
        return {
          applied: true,
          task: toTask(updated),
          transcriptLength: session.message_count,
        };
      }
      const updated = await this.#updateTask(tx, change);
      const next = await this.#p.mailbox.claimHead(tx, session, owner, { head });
      const saved = await this.#p.unit.saveSession(tx, session);
      return {
        applied: true,
        task: toTask(updated),
        transcriptLength: saved.messageCount,
        ...(next ? { next } : {}),
      };
    });
  }
  /**
   * What a finished run records besides its outcome: the backend that really
   * ran it (the router's choice, which need not be the agent's own backend),
   * and — for a completed or suspended run that was not canceled — the agent
   * state it left, on the task and as the session's latest.
   */
  async #ranWith(
    tx: Tx,
    row: TaskRow,
    outcome: RunOutcome,
    keepState: boolean,
  ): Promise<UpdateObject<TasksDatabase, "tasks">> {
    const set: UpdateObject<TasksDatabase, "tasks"> = {};
    if (outcome.backendId) set.assigned_backend = outcome.backendId;
    if (
      keepState &&
      outcome.state !== undefined &&
      (outcome.status === "completed" || outcome.status === "suspended")
    ) {
      const state = JSON.stringify(outcome.state);
      set.state = state;
      await tx.db
        .insertInto("session_states")
        .values({
          workspace_id: row.workspace_id,
          session_id: row.session_id,
          state,
          task_id: row.id,
        })
        .onConflict((oc) =>
          oc
            .columns(["workspace_id", "session_id"])
            .doUpdateSet({ state, task_id: row.id, updated_at: NOW }),
        )
        .execute();
    }
    return set;
  }

  /**
   * How a WORKING task's run ended (the executor's result): everything but
   * the task row's update, which is returned.
   */
  async #outcomeChange(
    tx: Tx,
    session: LockedSession,
    row: TaskRow,
    outcome: RunOutcome,
  ): Promise<Extract<TaskWrite, { kind: "update" }>> {
    const from = row.status as TaskStatus;
    const scope = this.#p.unit.scopeOf(session, agentActor(row.agent_id));
    switch (outcome.status) {
      case "suspended": {
        const to = transition(
          from,
          outcome.kind === "auth" ? TaskStatus.AUTH_REQUIRED : TaskStatus.INPUT_REQUIRED,
          row.id,
        );
        const signalId = signalIdFor(row.id, outcome.signalLabel);
        // harness-chat §8.1: the messages made before suspending are persisted
        // with the suspension — in the transcript (agent.message) and the
        // task's output — and also kept as the suspension's pending messages.
        const appended = await this.#p.transcript.appendMessages(
          tx,
          session,
          outcome.messages,
          row.id,
          agentActor(row.agent_id),
        );
        const made = appended.map((m) => m.message as Message);
        const waitEvent = taskStatusEvent(
          scope,
          row.id,
          to,
          from,
          `waiting for signal ${signalId}`,
        );
        this.#p.unit.emit(tx, waitEvent);
        const pending = row.suspension
          ? fromBinary(SuspensionSchema, row.suspension).pendingMessages
          : [];
        const output = [...decodeMessages(row.output), ...made];
        // Kept for good (the row forgets it on resume): a from_checkpoint replay restores it.
        const checkpointId = newId("chk");
        await tx.db
          .insertInto("task_checkpoints")
          .values({
            id: checkpointId,
            task_id: row.id,
            signal_id: signalId,
            event_id: waitEvent.id,
            checkpoint: JSON.stringify(outcome.checkpoint ?? null),
            transcript_length: session.message_count,
            output_count: output.length,
          })
          .execute();
        if (this.#p.unit.journaled) {
          tx.steps.push(finishedStep(session, row.id, { status: to, output: made, signalId }));
        }
        const suspension = create(SuspensionSchema, {
          signalId,
          metadata: outcome.metadata,
          pendingMessages: [...pending, ...made],
          checkpointId,
        });
        return {
          kind: "update",
          id: row.id,
          set: {
            status: to,
            run_state: "waiting",
            output: encodeMessages(output),
            suspension: toBinary(SuspensionSchema, suspension),
            signal_id: signalId,
            checkpoint: JSON.stringify(outcome.checkpoint ?? null),
            resume_payload: null,
            lease_owner: null,
            lease_expires_at: null,
            updated_at: NOW,
          },
        };
      }
      default:
        // Completed, failed or canceled by the agent: built as the owner builds them.
        return this.#finalChange(tx, session, row, {
          ...runEnd(outcome, from, row.id, scope),
          extra: outcome.messages,
        });
    }
  }

  /** task.canceled for a requested cancel being recorded (none when CANCELED already is). */
  canceledEvent(session: LockedSession, row: TaskRow, reason: string): { event?: Event } {
    const from = row.status as TaskStatus;
    if (from === TaskStatus.CANCELED) return {};
    transition(from, TaskStatus.CANCELED, row.id);
    return {
      event: taskStatusEvent(
        this.#p.unit.scopeOf(session),
        row.id,
        TaskStatus.CANCELED,
        from,
        reason,
      ),
    };
  }
}
