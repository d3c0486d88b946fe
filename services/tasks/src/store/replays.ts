/**
 * Replays: what a task's replay starts from, creating the replay (a forked
 * session and a task), reading its record, and the `replay.completed` /
 * `replay.failed` event when it ends.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { type Message, TaskStatus } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { notFound } from "../domain/errors.js";
import { agentActor, dataEvent, taskSubmittedEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import {
  deltasOf,
  REPLAY_KEY,
  type ReplayPlan,
  replayUnavailable,
  type StoredOverride,
} from "../domain/replay.js";
import { classifySignal } from "../domain/signals.js";
import { decodeMessages, encodeMessage, jsonText, resumeText } from "./codec.js";
import { toSession, toTask } from "./rows.js";
import type { TaskRow } from "./schema.js";
import type { StoreContext } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type {
  NewReplay,
  ReplayRecord,
  ReplayResult,
  ReplaySource,
  WriteContext,
} from "./task-store.js";
import type { LockedSession, Tx } from "./write-unit.js";

declare module "./store-parts.js" {
  interface StoreParts {
    /** Replays: source, create, read, end events. */
    replays: Replays;
  }
}

/** Replays of tasks (see the module header). */
export class Replays {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  async getReplaySource(taskId: string, scope?: string): Promise<ReplaySource> {
    const row = await this.#p.resources.taskRow(this.#ctx.db, taskId, scope);
    const task = toTask(row);
    const agent = await this.#p.directory.loadAgent(undefined, row.agent_id, row.workspace_id);
    if (!agent) throw notFound("agent", row.agent_id);
    let historyIntact = false;
    if (row.input_position !== null) {
      const at = await this.#ctx.db
        .selectFrom("messages")
        .select("id")
        .where("workspace_id", "=", row.workspace_id)
        .where("session_id", "=", row.session_id)
        .where("position", "=", row.input_position)
        .executeTakeFirst();
      historyIntact = at !== undefined && at.id === task.input?.id;
    }
    const checkpoints = await this.#ctx.db
      .selectFrom("task_checkpoints")
      .selectAll()
      .where("task_id", "=", taskId)
      .orderBy("seq")
      .execute();
    const deliveries = await this.#ctx.db
      .selectFrom("signal_deliveries")
      .select(["signal_id", "payload"])
      .where("task_id", "=", taskId)
      .orderBy("created_at")
      .orderBy("delivery_id")
      .execute();
    return {
      task,
      agent,
      inputPosition: row.input_position,
      historyIntact,
      checkpoints: checkpoints.map((c) => ({
        id: c.id,
        signalId: c.signal_id,
        eventId: c.event_id,
        checkpoint: c.checkpoint,
        transcriptLength: c.transcript_length,
        outputCount: c.output_count,
      })),
      signals: deliveries
        .filter((d) => !classifySignal(d.payload ?? null).cancel)
        .map((d) => ({ signalId: d.signal_id, payload: d.payload ?? null })),
    };
  }

  async createReplay(
    input: NewReplay,
    context: WriteContext,
    owner: string,
  ): Promise<ReplayResult> {
    const taskId = input.taskId;
    const sessionId = newId("ses");
    const { plan } = input;
    return this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(context.scope ?? "", context, "ReplayTask", plan.sourceTaskId),
        input.idempotency,
        taskId,
      );
      if (earlier) {
        const row = await this.#p.resources.taskRow(tx.db, earlier, context.scope);
        const session = await this.#p.unit.lockSession(tx, row.session_id, row.workspace_id);
        return { task: toTask(row), session: toSession(session), replayed: true };
      }
      const source = await this.#p.resources.taskRow(tx.db, plan.sourceTaskId, context.scope);
      const parent = await this.#p.unit.lockSession(tx, source.session_id, source.workspace_id);
      if (parent.message_count < input.forkCount) {
        throw replayUnavailable(
          plan.sourceTaskId,
          "transcript",
          `session ${parent.id} no longer holds the ${input.forkCount} messages the replay starts from (it was truncated)`,
        );
      }
      const agent = await this.#p.directory.resolveAgent(
        tx,
        source.agent_id,
        source.workspace_id,
        "task_id",
      );
      const session = await this.#p.sessions.insertFork(tx, parent, {
        id: sessionId,
        agentId: agent.id,
        metadata: { [REPLAY_KEY]: { source_task_id: plan.sourceTaskId, replay_task_id: taskId } },
        branchId: newId("br"),
        fromEventId: input.forkEventId,
        count: input.forkCount,
        note: `forked from session ${parent.id} to replay task ${plan.sourceTaskId} (${input.forkCount} messages)`,
        context,
      });
      const scope = this.#p.unit.scopeOf(session, context.actor, input.idempotency?.key);
      this.#p.unit.emit(tx, taskSubmittedEvent(scope, taskId, agent.id));
      // Harn "replay.started": what is replayed, how, with which substitutions
      // (keys and hashes only: override values may be secrets; a secret's
      // only as its keyed fingerprint).
      this.#p.unit.emit(
        tx,
        dataEvent(scope, EVENT_KIND.replayStarted, { object: "task", id: taskId }, taskId, {
          source_task_id: plan.sourceTaskId,
          replay_task_id: taskId,
          source_session_id: plan.sourceSessionId,
          replay_session_id: sessionId,
          mode: plan.mode,
          strategy: plan.strategy,
          checkpoint_id: plan.checkpoint?.id ?? null,
          checkpoint_event_id: plan.checkpoint?.eventId ?? null,
          overrides: Object.entries(input.overrides).map(([key, o]) => ({
            override_key: key,
            kind: o.kind,
            ...(o.fingerprint
              ? { sha256: null, fingerprint: o.fingerprint }
              : { sha256: o.sha256 ?? null }),
            visibility: o.visibility,
          })),
        }),
      );
      const queueSeq = session.next_queue_seq;
      session.next_queue_seq += 1n;
      const inserted = await tx.db
        .insertInto("tasks")
        .values({
          id: taskId,
          workspace_id: session.workspace_id,
          session_id: session.id,
          agent_id: agent.id,
          status: TaskStatus.SUBMITTED,
          run_state: "queued",
          queue_seq: queueSeq,
          input: encodeMessage(input.input),
          input_position: input.restore?.inputPosition ?? null,
          created_by: context.actor.id,
          parent_task_id: plan.sourceTaskId,
          assigned_backend: agent.backend,
          // The source's own requirements (already narrowed by its agent).
          requirements: source.requirements,
          idempotency_key: input.idempotency?.key ?? "",
          metadata: jsonText(input.metadata),
          ...(input.restore
            ? {
                checkpoint: JSON.stringify(input.restore.checkpoint ?? null),
                resume_payload: resumeText(input.restore.payload),
              }
            : {}),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      tx.changed.set(inserted.id, inserted);
      await tx.db
        .insertInto("replays")
        .values({
          task_id: taskId,
          source_task_id: plan.sourceTaskId,
          workspace_id: session.workspace_id,
          mode: plan.mode,
          overrides: JSON.stringify(input.overrides),
          checkpoint_id: plan.checkpoint?.id ?? "",
          plan: JSON.stringify(plan),
        })
        .execute();
      const claim = await this.#p.mailbox.claimHead(tx, session, owner);
      const saved = await this.#p.unit.saveSession(tx, session);
      return {
        task: claim?.task ?? toTask(inserted),
        session: saved,
        replayed: false,
        ...(claim ? { claim } : {}),
      };
    });
  }

  async getReplay(replayTaskId: string): Promise<ReplayRecord | undefined> {
    const row = await this.#ctx.db
      .selectFrom("replays")
      .selectAll()
      .where("task_id", "=", replayTaskId)
      .executeTakeFirst();
    if (!row) return undefined;
    const plan = row.plan as unknown as ReplayPlan;
    const source = await this.#ctx.db
      .selectFrom("tasks")
      .select("output")
      .where("id", "=", row.source_task_id)
      .executeTakeFirst();
    return {
      replayTaskId,
      plan,
      overrides: row.overrides as unknown as Record<string, StoredOverride>,
      sourceOutput: decodeMessages(source?.output ?? null).slice(0, plan.messages.length),
    };
  }

  /**
   * Harn "replay.completed" / "replay.failed" for a replay task that ends:
   * its status, the receipt deltas its overrides produced (before / after
   * hashes, read from the replayed messages) and the overrides it never used.
   */
  async emitReplayEnd(
    tx: Tx,
    session: LockedSession,
    row: TaskRow,
    end: { status: TaskStatus; failure?: { category: string; message: string } },
    messages: readonly Message[],
  ): Promise<void> {
    const replay = await tx.db
      .selectFrom("replays")
      .select(["source_task_id", "mode", "overrides"])
      .where("task_id", "=", row.id)
      .executeTakeFirst();
    if (!replay) return;
    const deltas = deltasOf(messages);
    const applied = new Set(deltas.map((d) => d.override_key));
    const kind =
      end.status === TaskStatus.COMPLETED ? EVENT_KIND.replayCompleted : EVENT_KIND.replayFailed;
    this.#p.unit.emit(
      tx,
      dataEvent(
        this.#p.unit.scopeOf(session, agentActor(row.agent_id)),
        kind,
        { object: "task", id: row.id },
        row.id,
        {
          source_task_id: replay.source_task_id,
          replay_task_id: row.id,
          mode: replay.mode,
          status: TaskStatus[end.status] ?? String(end.status),
          deltas: deltas as unknown as JsonValue[],
          unused_override_keys: Object.keys(replay.overrides).filter((k) => !applied.has(k)),
          ...(end.failure
            ? { failure: { category: end.failure.category, message: end.failure.message } }
            : {}),
        },
      ),
    );
  }
}
