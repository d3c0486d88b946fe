/**
 * The mailbox: a session's queue of tasks as a state machine over the locked
 * session — submit (run now, queue, interrupt), claim the head when nothing
 * runs, cancel, deliver a signal to a waiting task.
 *
 * - a run is claimed by setting `run_state = 'running'` with a lease
 *   (`lease_owner`, `lease_expires_at` on the database clock); a partial
 *   unique index allows one running task per session;
 * - every decision ("is the mailbox free?") is made on the session locked by
 *   the write, so it cannot change before commit.
 */
import { fromBinary } from "@bufbuild/protobuf";
import {
  MessageSchema as MessageSchemaForInput,
  Role,
  SessionState,
  TaskStatus,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { Task } from "@trellis/contracts/tasks";
import { CompiledQuery, sql } from "kysely";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { invalidRequest, notFound } from "../domain/errors.js";
import { signalEvent, taskStatusEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { cancelRequested, transition } from "../domain/lifecycle.js";
import { classifySignal } from "../domain/signals.js";
import { encodeMessage, jsonText, resumeText } from "./codec.js";
import { toTask } from "./rows.js";
import type { SessionRow, TaskRow } from "./schema.js";
import { submittedStep } from "./step-records.js";
import { creatorActor, NOW, type StoreContext, visible, withIds } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type {
  CancelResult,
  Claim,
  DeliverResult,
  DeliverySignal,
  NewTask,
  SessionKey,
  SubmitResult,
  WriteContext,
} from "./task-store.js";
import { claimEvent, claimOf, submitDecision, submitEvents, submitResult } from "./turn-events.js";
import type { LockedSession, Tx } from "./write-unit.js";

declare module "./store-parts.js" {
  interface StoreParts {
    /** A session's queue: submit, claim, cancel, signals. */
    mailbox: Mailbox;
  }
}

/** A session's queue of tasks (see the module header). */
export class Mailbox {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  async submitTask(input: NewTask, context: WriteContext, owner: string): Promise<SubmitResult> {
    const taskId = newId("task");
    const input0 = withIds(input.input);
    return this.#p.unit.write(async (tx) => {
      const workspaceHint = context.scope ?? input.workspaceId;
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(workspaceHint, context, "SubmitTask", input.sessionId),
        input.idempotency,
        taskId,
      );
      if (earlier) {
        const row = await this.#p.resources.taskRow(tx.db, earlier, context.scope);
        return { task: toTask(row), replayed: true };
      }
      let session: LockedSession | undefined;
      let created = false;
      if (input.sessionId) {
        const found = await this.#p.unit.findSession(
          tx,
          input.sessionId,
          context.scope,
          // By id alone: the named (or the caller's home) workspace's session, else the oldest.
          input.workspaceId || DEFAULT_WORKSPACE_ID,
        );
        if (found && context.scope !== undefined && found.workspace_id !== context.scope) {
          throw notFound("session", input.sessionId);
        }
        session = found;
      }
      if (!session) {
        if (!input.createSession) {
          throw input.sessionId
            ? notFound("session", input.sessionId)
            : invalidRequest("session_id is required (or set create_session)", "session_id");
        }
        session = await this.#p.sessions.insertSession(tx, {
          id: input.sessionId || newId("ses"),
          workspaceId: this.#p.directory.workspaceFor(input.workspaceId, context),
          // The new session is bound to the requested agent (harness §3.1).
          agentId: input.agentId,
          metadata: undefined,
          context,
        });
        created = true;
      }
      this.#p.transcript.assertOpen(session);
      if (input0.role === Role.TOOL)
        await this.#p.transcript.assertAnswersToolCall(tx, session, input0);
      // With create_session the request describes the session to get or create:
      // an existing one runs its own agent (harness §3.2), whatever agent_id says.
      const agentId = input.createSession && !created ? "" : input.agentId;
      const { agent, requirements } = await this.#p.directory.submitAgent(
        tx,
        agentId || session.agent_id,
        session.workspace_id,
        input,
      );
      const view = await this.#mailbox(tx, session);
      // Decided on the locked session, so "busy" cannot change before commit.
      const decision = submitDecision(input.busyPolicy, view, session.id);
      if (decision.interrupt && view.running) {
        await this.cancelRow(tx, session, view.running, `interrupted by task ${taskId}`, context);
      }
      const { events, status } = submitEvents(
        this.#p.unit.scopeOf(session, context.actor, input.idempotency?.key),
        this.#p.unit.scopeOf(session),
        taskId,
        agent.id,
        decision.runNow,
      );
      for (const event of events) this.#p.unit.emit(tx, event);
      const queueSeq = session.next_queue_seq;
      session.next_queue_seq += 1n;
      let inputPosition: bigint | null = null;
      if (decision.runNow) {
        inputPosition = session.message_count;
        await this.#p.transcript.appendMessages(tx, session, [input0], taskId, context.actor);
      }
      const row = await this.#p.unit.saveSessionWithTask(tx, session, {
        kind: "insert",
        values: {
          id: taskId,
          workspace_id: session.workspace_id,
          session_id: session.id,
          agent_id: agent.id,
          status,
          run_state: decision.runNow ? "running" : "queued",
          queue_seq: queueSeq,
          input: encodeMessage(input0),
          input_position: inputPosition,
          created_by: context.actor.id,
          parent_task_id: input.parentTaskId,
          assigned_backend: agent.backend,
          busy_policy: input.busyPolicy,
          idempotency_key: input.idempotency?.key ?? "",
          metadata: jsonText(input.metadata),
          ...(requirements ? { requirements } : {}),
          ...(decision.runNow
            ? {
                started_at: NOW,
                lease_owner: owner,
                lease_expires_at: this.#leaseUntil(),
              }
            : {}),
        },
      });
      const task = toTask(row);
      if (this.#p.unit.journaled) {
        tx.steps.push(
          submittedStep(session, task, input0, {
            queueSeq,
            runNow: decision.runNow,
            inputPosition: inputPosition ?? undefined,
            createdBy: context.actor.id,
            idempotencyKey: input.idempotency?.key ?? "",
          }),
        );
      }
      return submitResult(
        this.#p.directory,
        task,
        agent,
        decision,
        inputPosition,
        owner,
        row,
        session,
      );
    });
  }

  #leaseUntil() {
    return sql<Date>`now() + make_interval(secs => ${this.#ctx.leaseMs / 1000})`;
  }

  /** The task holding the session's mailbox, and the head of its queue. */
  async #mailbox(
    tx: Tx,
    session: Pick<SessionRow, "workspace_id" | "id">,
  ): Promise<{ running?: TaskRow; head?: TaskRow }> {
    const { rows } = await tx.raw.executeQuery<TaskRow>(
      CompiledQuery.raw(this.#ctx.hot.mailbox, [
        session.workspace_id,
        session.id,
        "queued",
        "running",
        2,
      ]),
    );
    const running = rows[0]?.run_state === "running" ? rows[0] : undefined;
    const head = rows.find((r) => r.run_state === "queued");
    return { ...(running ? { running } : {}), ...(head ? { head } : {}) };
  }

  /**
   * Claims the head of a locked session's queue when nothing runs: the task
   * becomes WORKING (a `task.started` event unless it already was), its input
   * joins the transcript the first time, and `owner` holds it under a lease.
   */
  async claimHead(
    tx: Tx,
    session: LockedSession,
    owner: string,
    known?: { running?: TaskRow; head?: TaskRow },
  ): Promise<Claim | undefined> {
    if (session.state === SessionState.CLOSED) return undefined;
    const view = known ?? (await this.#mailbox(tx, session));
    if (view.running || !view.head) return undefined;
    const head = view.head;
    const started = claimEvent(this.#p.unit.scopeOf(session), head);
    if (started) this.#p.unit.emit(tx, started);
    let inputPosition = head.input_position;
    if (inputPosition === null) {
      inputPosition = session.message_count;
      const input = fromBinary(MessageSchemaForInput, head.input);
      await this.#p.transcript.appendMessages(
        tx,
        session,
        [input],
        head.id,
        creatorActor(head.created_by),
      );
    }
    const row = await tx.db
      .updateTable("tasks")
      .set({
        status: TaskStatus.WORKING,
        run_state: "running",
        input_position: inputPosition,
        lease_owner: owner,
        lease_expires_at: this.#leaseUntil(),
        started_at: sql<Date>`coalesce(started_at, now())`,
        updated_at: NOW,
      })
      .where("id", "=", head.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    tx.changed.set(row.id, row);
    const agent = await this.#p.directory.resolveAgent(
      tx,
      row.agent_id,
      row.workspace_id,
      "agent_id",
    );
    return claimOf(this.#p.directory, toTask(row), agent, inputPosition, owner, row, session);
  }

  async cancelTask(
    id: string,
    reason: string,
    context: WriteContext,
    owner: string,
  ): Promise<CancelResult> {
    const found = await this.#p.resources.taskRow(this.#ctx.db, id, context.scope);
    return this.#p.unit.write(async (tx) => {
      const session = await this.#p.unit.lockSession(tx, found.session_id, found.workspace_id);
      const row = await this.#p.resources.taskRow(tx.db, id, context.scope);
      if (row.status === TaskStatus.CANCELED || cancelRequested(row)) {
        // Cancel is idempotent: the first one won, nothing replaces it.
        return { task: toTask(row), running: row.run_state === "running" };
      }
      const result = await this.cancelRow(
        tx,
        session,
        row,
        reason || "canceled by request",
        context,
      );
      const claim = await this.claimHead(tx, session, owner);
      await this.#p.unit.saveSession(tx, session);
      return { ...result, ...(claim ? { claim } : {}) };
    });
  }

  /**
   * Cancels a task of a locked session (user.cancel_requested, task.canceled).
   * A running task keeps the mailbox until its runner closes its transcript;
   * any other is finished here: pending messages plus synthetic tool results
   * join the transcript, and it gets its Outcome.
   */
  async cancelRow(
    tx: Tx,
    session: LockedSession,
    row: TaskRow,
    reason: string,
    context: WriteContext,
  ): Promise<{ task: Task; running: boolean }> {
    const from = row.status as TaskStatus;
    transition(from, TaskStatus.CANCELED, row.id);
    const scope = this.#p.unit.scopeOf(session, context.actor);
    this.#p.unit.emit(
      tx,
      signalEvent(scope, EVENT_KIND.cancelRequested, row.id, row.signal_id ?? "", {
        cancel: true,
        reason,
      }),
    );
    const canceled = taskStatusEvent(scope, row.id, TaskStatus.CANCELED, from, reason);
    if (row.run_state === "running") {
      // Requested, not yet recorded: `canceled_at` marks the request, and the
      // task becomes CANCELED (task.canceled) when its runner confirms the
      // backend stopped or its cancel grace ran out (finishRun), or when
      // recovery finds the worker gone.
      tx.notifyCancel = true;
      const updated = await tx.db
        .updateTable("tasks")
        .set({
          canceled_at: NOW,
          cancel_reason: reason,
          updated_at: NOW,
        })
        .where("id", "=", row.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      tx.changed.set(row.id, updated);
      return { task: toTask(updated), running: true };
    }
    const updated = await this.#p.runs.finalize(tx, session, row, {
      status: TaskStatus.CANCELED,
      extra: [],
      note: "the task was canceled",
      event: canceled,
    });
    return { task: toTask(updated), running: false };
  }

  async deliverSignal(
    signal: DeliverySignal,
    context: WriteContext,
    owner: string,
  ): Promise<DeliverResult> {
    const sessionId = signal.sessionId ?? "";
    if (signal.deliveryId !== "") {
      const seen = await this.#deliveredAs(signal.deliveryId);
      if (seen) return this.#duplicateDelivery(seen, context.scope);
    }
    const waiting =
      (await this.#waitingFor(signal.signalId, sessionId, context.scope)) ??
      (sessionId === "" && signal.labelAlone
        ? await this.#waitingOnLabel(signal.signalId, context.scope)
        : undefined);
    if (!waiting || (context.scope !== undefined && waiting.workspace_id !== context.scope)) {
      // A global id delivered again after its turn resumed is a duplicate
      // (a label never is: it recurs in later turns, so it is never recorded).
      const seen =
        signal.deliveryId === "" && sessionId === ""
          ? await this.#deliveredAs(signal.signalId)
          : undefined;
      if (seen) return this.#duplicateDelivery(seen, context.scope);
      throw notFound("signal", signal.signalId);
    }
    // Without an explicit delivery id, a delivery dedupes on the task-unique
    // id the signal resolved to, however the caller named it.
    const signalId = waiting.signal_id ?? signal.signalId;
    const deliveryId = signal.deliveryId || signalId;
    const result = await this.#p.unit.write(async (tx): Promise<DeliverResult | "duplicate"> => {
      const session = await this.#p.unit.lockSession(tx, waiting.session_id, waiting.workspace_id);
      const recorded = await tx.db
        .insertInto("signal_deliveries")
        .values({
          delivery_id: deliveryId,
          signal_id: signalId,
          task_id: waiting.id,
          payload: JSON.stringify(signal.payload ?? null),
        })
        .onConflict((oc) => oc.column("delivery_id").doNothing())
        .returning("delivery_id")
        .executeTakeFirst();
      if (!recorded) return "duplicate";
      const row = await this.#p.resources.taskRow(tx.db, waiting.id, undefined);
      if (row.run_state !== "waiting" || row.signal_id !== signalId) {
        throw notFound("signal", signal.signalId);
      }
      const meaning = classifySignal(signal.payload);
      if (meaning.cancel) {
        const canceled = await this.cancelRow(tx, session, row, "canceled by signal", context);
        await this.#p.unit.saveSession(tx, session);
        return { taskId: row.id, duplicate: false, signalId, task: canceled.task };
      }
      this.#p.unit.emit(
        tx,
        signalEvent(
          this.#p.unit.scopeOf(session, context.actor),
          meaning.eventKind,
          row.id,
          signalId,
          signal.payload,
        ),
      );
      // Back in the queue at its original place; it becomes WORKING when claimed.
      await tx.db
        .updateTable("tasks")
        .set({
          run_state: "queued",
          signal_id: null,
          resume_payload: resumeText(signal.payload),
          updated_at: NOW,
        })
        .where("id", "=", row.id)
        .execute();
      const claim = await this.claimHead(tx, session, owner);
      await this.#p.unit.saveSession(tx, session);
      const task =
        claim?.task.id === row.id
          ? claim.task
          : toTask(await this.#p.resources.taskRow(tx.db, row.id, undefined));
      return { taskId: row.id, duplicate: false, signalId, task, ...(claim ? { claim } : {}) };
    });
    if (result === "duplicate") return this.#duplicateDelivery(waiting.id, context.scope);
    return result;
  }

  /**
   * The waiting task a signal is for: by task-unique id, or — within a
   * session — by the label its author wrote too; of several turns waiting on
   * one label, the one that suspended last (a waiting row is not updated
   * until it resumes, so `updated_at` is its suspension time).
   */
  async #waitingFor(
    signalId: string,
    sessionId: string,
    scope: string | undefined,
  ): Promise<Pick<TaskRow, "id" | "session_id" | "workspace_id" | "signal_id"> | undefined> {
    let query = this.#ctx.db
      .selectFrom("tasks")
      .select(["id", "session_id", "workspace_id", "signal_id"])
      .where("run_state", "=", "waiting");
    if (sessionId === "") return query.where("signal_id", "=", signalId).executeTakeFirst();
    // Session ids are unique per workspace: the caller's session of that id.
    if (scope !== undefined) query = query.where("workspace_id", "=", scope);
    query = query
      .where("session_id", "=", sessionId)
      .where((eb) =>
        eb.or([
          eb("signal_id", "=", signalId),
          eb("signal_id", "=", sql<string>`${sql.ref("id")} || ':' || ${signalId}`),
        ]),
      );
    return query.orderBy("updated_at", "desc").orderBy("id", "desc").limit(1).executeTakeFirst();
  }

  /**
   * The one waiting task (in `scope`) whose author's label is `label`, for a
   * delivery that names no session; several → `invalid_request` asking for
   * the session. Bounded: only waiting tasks carry a signal id.
   */
  async #waitingOnLabel(
    label: string,
    scope: string | undefined,
  ): Promise<Pick<TaskRow, "id" | "session_id" | "workspace_id" | "signal_id"> | undefined> {
    let query = this.#ctx.db
      .selectFrom("tasks")
      .select(["id", "session_id", "workspace_id", "signal_id"])
      .where("run_state", "=", "waiting")
      .where("signal_id", "=", sql<string>`${sql.ref("id")} || ':' || ${label}`)
      .limit(2);
    if (scope !== undefined) query = query.where("workspace_id", "=", scope);
    const rows = await query.execute();
    if (rows.length > 1) {
      throw invalidRequest(
        `several sessions have a turn waiting for signal ${JSON.stringify(label)}; name the session (session_id) or use the turn's global signal id`,
        "session_id",
      );
    }
    return rows[0];
  }

  /** The task a recorded delivery id went to, if any. */
  async #deliveredAs(deliveryId: string): Promise<string | undefined> {
    const seen = await this.#ctx.db
      .selectFrom("signal_deliveries")
      .select("task_id")
      .where("delivery_id", "=", deliveryId)
      .executeTakeFirst();
    return seen?.task_id;
  }

  async #duplicateDelivery(taskId: string, scope: string | undefined): Promise<DeliverResult> {
    const row = await this.#ctx.db
      .selectFrom("tasks")
      .selectAll()
      .where("id", "=", taskId)
      .executeTakeFirst();
    if (!visible(row, scope)) {
      return { taskId: "", duplicate: true };
    }
    return { taskId, duplicate: true, task: toTask(row) };
  }

  async claimNext(
    sessionId: string,
    owner: string,
    workspaceId?: string,
  ): Promise<Claim | undefined> {
    return this.#p.unit.write(async (tx) => {
      const session = await this.#p.unit.lockSession(tx, sessionId, workspaceId);
      const claim = await this.claimHead(tx, session, owner);
      if (claim) await this.#p.unit.saveSession(tx, session);
      return claim;
    });
  }

  async sessionsWithQueuedWork(limit: number): Promise<SessionKey[]> {
    const rows = await this.#ctx.db
      .selectFrom("tasks as q")
      .select(["q.workspace_id", "q.session_id"])
      .distinct()
      .where("q.run_state", "=", "queued")
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("tasks as r")
              .select("r.id")
              .whereRef("r.workspace_id", "=", "q.workspace_id")
              .whereRef("r.session_id", "=", "q.session_id")
              .where("r.run_state", "=", "running"),
          ),
        ),
      )
      .limit(limit)
      .execute();
    return rows.map((r) => ({ workspaceId: r.workspace_id, sessionId: r.session_id }));
  }
}
