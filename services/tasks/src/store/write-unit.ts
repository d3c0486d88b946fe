/**
 * The tasks store's write unit: one transaction per write, the events it
 * emits (to the outbox, through the storage's unit of work) and the
 * statements that save a locked session — with its transcript rows,
 * outcomes, task row and outbox rows folded into one statement.
 *
 * Concurrency rules (what makes the mailbox hold across replicas):
 * - every transaction that changes a task or a transcript first locks the
 *   session row (`SELECT … FOR UPDATE`), then reads what it decides on — so
 *   decisions ("is the mailbox free?", "is this still my run?") are made on
 *   current state, and one session's changes are serialized;
 * - finishing a run checks the claim is still ours (fencing, see `runs.ts`);
 * - idempotency rows are locked before sessions; events go to the outbox once,
 *   at the end of each transaction (storage's lock-order rule).
 */
import { randomUUID } from "node:crypto";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { Event } from "@trellis/contracts/core";
import type { Session } from "@trellis/contracts/tasks";
import { appendInTransaction, type OutboxFold, type OutboxUnit } from "@trellis/storage";
import {
  CompiledQuery,
  type Insertable,
  type InsertObject,
  sql,
  type Transaction,
  type UpdateObject,
} from "kysely";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { notFound } from "../domain/errors.js";
import { type EventScope, SYSTEM_ACTOR } from "../domain/events.js";
import { reserveKey } from "./idempotency-keys.js";
import { toSession, toTask } from "./rows.js";
import type { MessageTable, OutcomeTable, SessionRow, TaskRow, TasksDatabase } from "./schema.js";
import { sessionStream } from "./session-stream.js";
import { qualified, StatementWriter } from "./statement.js";
import { type PendingStep, stepEntries } from "./step-records.js";
import {
  type CommittedChanges,
  type HotStatements,
  NOW,
  type StoreContext,
  visible,
} from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { Idempotency, WriteContext } from "./task-store.js";

export type { CommittedChanges, HotStatements };

/** The NOTIFY channel on which a replica learns that a task it may be running was canceled. */
export function cancelChannel(schema: string): string {
  return `trellis_${schema}_cancel`;
}

/** One write transaction in progress. */
export interface Tx {
  /** Unscoped: for the outbox. */
  raw: Transaction<TasksDatabase>;
  /** Scoped to the service's schema. */
  db: Transaction<TasksDatabase>;
  /** Events of this write not yet given to {@link outbox}. */
  events: Event[];
  /** The transaction's unit of work on the outbox. */
  outbox: OutboxUnit<TasksDatabase>;
  lastEventOfSession: Map<string, string>;
  /** Tasks changed, with their final row when known. */
  changed: Map<string, TaskRow | undefined>;
  notifyCancel: boolean;
  /** Transcript rows and outcomes written together with the session row (one statement). */
  pendingMessages: Insertable<MessageTable>[];
  pendingOutcomes: Insertable<OutcomeTable>[];
  /** Step records for the turn journal (journal on), appended as the transaction's last statement. */
  steps: PendingStep[];
}

/** A session row locked by the current transaction; saved at its end. */
export type LockedSession = SessionRow;

/** A task row change written with the session (see `WriteUnit.saveSessionWithTask`). */
export type TaskWrite =
  | { kind: "insert"; values: InsertObject<TasksDatabase, "tasks"> }
  | { kind: "update"; id: string; set: UpdateObject<TasksDatabase, "tasks"> };

/** The {@link HotStatements} of the store whose tables are in `schema`. */
export function hotStatements(schema: string): HotStatements {
  return {
    lockSession: `select * from ${qualified(schema, "sessions")} where "workspace_id" = $1 and "id" = $2 for update`,
    // By id alone: the preferred workspace's ($2) session of that id, else the oldest.
    lockSessionById:
      `select * from ${qualified(schema, "sessions")} where "id" = $1 ` +
      `order by workspace_id = $2 desc, "seq" limit $3 for update`,
    mailbox:
      `select * from ${qualified(schema, "tasks")} where "workspace_id" = $1 and "session_id" = $2 and "run_state" in ($3, $4) ` +
      `order by run_state = 'running' desc, "queue_seq" limit $5`,
    finishedRun:
      `select * from ${qualified(schema, "tasks")} where "workspace_id" = $1 and "session_id" = $2 and ("id" = $3 or "run_state" = $4) ` +
      `order by id = $5 desc, "queue_seq" limit $6`,
  };
}

/** Most events whose outbox rows join the session's statement (more: appended apart). */
const MAX_FOLDED_EVENTS = 200;

/** The column of the save statement's result carrying its outbox rows' positions. */
const OUTBOX_POSITIONS = "trellis_outbox_positions";

declare module "./store-parts.js" {
  interface StoreParts {
    /** The write transaction, its events and outbox unit. */
    unit: WriteUnit;
  }
}

/** The write transaction and the session saves every module writes with. */
export class WriteUnit {
  readonly #ctx: StoreContext;

  constructor(ctx: StoreContext, _parts: StoreParts) {
    this.#ctx = ctx;
  }

  async write<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    let changed: Map<string, TaskRow | undefined> | undefined;
    let wroteSteps = false;
    const result = await this.#ctx.outbox.transaction(this.#ctx.kysely, async (unit) => {
      const raw = unit.trx;
      let scoped: Transaction<TasksDatabase> | undefined;
      const schema = this.#ctx.schema;
      const tx: Tx = {
        raw,
        // Made when first used: most of a turn's statements are written directly.
        get db() {
          scoped ??= raw.withSchema(schema);
          return scoped;
        },
        events: [],
        outbox: unit,
        lastEventOfSession: new Map(),
        changed: new Map(),
        notifyCancel: false,
        pendingMessages: [],
        pendingOutcomes: [],
        steps: [],
      };
      const value = await work(tx);
      if (tx.pendingMessages.length > 0 || tx.pendingOutcomes.length > 0) {
        throw new Error(
          "tasks store: messages or outcomes were left unwritten (session not saved)",
        );
      }
      if (tx.steps.length > 0) {
        await this.#appendSteps(tx);
      } else if (tx.events.length > 0) {
        // Appended at commit, then handed to the relay by the unit.
        unit.add(tx.events);
      }
      if (tx.notifyCancel) {
        await sql`select pg_notify(${cancelChannel(this.#ctx.schema)}, '')`.execute(raw);
      }
      changed = tx.changed;
      wroteSteps = tx.steps.length > 0;
      return value;
    });
    if (this.#ctx.journal && wroteSteps) this.#ctx.journal.readModel.wake();
    if (this.#ctx.onCommit) {
      const rows = changed ?? new Map<string, TaskRow | undefined>();
      this.#ctx.onCommit({
        taskIds: [...rows.keys()],
        snapshot: (id) => {
          const row = rows.get(id);
          return row ? toTask(row) : undefined;
        },
      });
    }
    return result;
  }

  /**
   * The end of a write with step records: its remaining events go to the
   * outbox first (one statement, sequenced now), then the steps to the
   * journal — last, because the journal's lock is held to the commit and
   * must be the last lock a write takes.
   */
  async #appendSteps(tx: Tx): Promise<void> {
    const journal = this.#ctx.journal;
    if (!journal) throw new Error("tasks store: step records without a journal");
    // In slices, so one statement's parameters stay bounded.
    while (tx.events.length > 0 || tx.outbox.pending > 0) {
      tx.outbox.add(tx.events.splice(0, MAX_FOLDED_EVENTS), { adopt: true });
      const outbox = await tx.outbox.fold();
      if (!outbox) break;
      const statement = new StatementWriter<TasksDatabase>(tx.raw);
      statement.withInsert("new_outbox", outbox.table, outbox.rows, outbox.returning);
      const row = await statement.first<Record<string, unknown>>(
        tx.raw,
        `select ${outbox.positions("new_outbox")} as "${OUTBOX_POSITIONS}"`,
      );
      outbox.settle(row[OUTBOX_POSITIONS]);
    }
    await appendInTransaction(tx.raw, stepEntries(tx.steps), {
      schema: this.#ctx.schema,
      lock: journal.lock,
      notify: journal.notify,
    });
  }

  /** Whether step records are written (the turn journal is on). */
  get journaled(): boolean {
    return this.#ctx.journal !== undefined;
  }

  emit(tx: Tx, event: Event): void {
    event.id = `evt_${randomUUID().replaceAll("-", "")}`;
    event.createdAt = timestampNow();
    tx.events.push(event);
    if (event.sessionId) tx.lastEventOfSession.set(event.sessionId, event.id);
    if (event.taskId && !tx.changed.has(event.taskId)) tx.changed.set(event.taskId, undefined);
  }

  /**
   * Locks session `id` of workspace `scope` (the caller's, or the task's for
   * internal writes). Without one, by id alone: the default workspace's
   * session of that id, else the oldest (session ids are unique per workspace).
   */
  async lockSession(tx: Tx, id: string, scope: string | undefined): Promise<LockedSession> {
    const row = await this.findSession(tx, id, scope, DEFAULT_WORKSPACE_ID);
    if (!visible(row, scope)) throw notFound("session", id);
    if (this.#ctx.sessionFence) await this.#ctx.sessionFence(tx.raw, sessionStream(row));
    return row;
  }

  /**
   * Session `id` of workspace `scope`, locked (`for update`); without a
   * scope, by id alone: `preferred`'s session of that id, else the oldest.
   */
  async findSession(
    tx: Tx,
    id: string,
    scope: string | undefined,
    preferred: string,
  ): Promise<SessionRow | undefined> {
    // Every write's first statement: its text is kept (see HotStatements).
    const { rows } = await tx.raw.executeQuery<SessionRow>(
      scope === undefined
        ? CompiledQuery.raw(this.#ctx.hot.lockSessionById, [id, preferred, 1])
        : CompiledQuery.raw(this.#ctx.hot.lockSession, [scope, id]),
    );
    return rows[0];
  }

  /**
   * Writes the locked session back, together with the transcript rows and
   * outcomes the transaction produced: one statement (data-modifying CTEs).
   */
  async saveSession(tx: Tx, session: LockedSession): Promise<Session> {
    const statement = this.withSessionSave(tx, session);
    const main = statement.update(
      qualified(this.#ctx.schema, "sessions"),
      this.sessionChanges(session),
      session.id,
      "*",
      session.workspace_id,
    );
    return toSession(await statement.first<SessionRow>(tx.raw, main));
  }

  /**
   * The last statement of a write that changes one task: like
   * {@link saveSession}, plus the task row's insert or update and the
   * transaction's outbox rows, in one statement (after the one that takes the
   * outbox sequences). Returns the task row; nothing may be written after it
   * but further events (appended at commit as usual).
   */
  async saveSessionWithTask(tx: Tx, session: LockedSession, write: TaskWrite): Promise<TaskRow> {
    const statement = new StatementWriter<TasksDatabase>(tx.raw);
    let outbox: OutboxFold | undefined;
    let returning = "*";
    if (tx.events.length > 0 && tx.events.length <= MAX_FOLDED_EVENTS) {
      // The transaction's own events, made by emit(): completed in place.
      tx.outbox.add(tx.events.splice(0), { adopt: true });
      outbox = await tx.outbox.fold();
    }
    if (outbox) {
      statement.withInsert("new_outbox", outbox.table, outbox.rows, outbox.returning);
      // The rows' positions come back with the task row, for the unit's hand-over.
      returning = `*, ${outbox.positions("new_outbox")} as "${OUTBOX_POSITIONS}"`;
    }
    this.withSessionSave(tx, session, statement).withUpdate(
      "saved_session",
      qualified(this.#ctx.schema, "sessions"),
      this.sessionChanges(session),
      session.id,
      '"id"',
      session.workspace_id,
    );
    const tasks = qualified(this.#ctx.schema, "tasks");
    const main =
      write.kind === "insert"
        ? statement.insert(tasks, [write.values], returning)
        : statement.update(tasks, write.set, write.id, returning);
    const row = await statement.first<TaskRow & { [OUTBOX_POSITIONS]?: unknown }>(tx.raw, main);
    if (outbox) {
      outbox.settle(row[OUTBOX_POSITIONS]);
      delete row[OUTBOX_POSITIONS];
    }
    tx.changed.set(row.id, row);
    return row;
  }

  /** A statement with the pending transcript rows and outcomes as data-modifying CTEs. */
  withSessionSave(
    tx: Tx,
    session: LockedSession,
    statement = new StatementWriter<TasksDatabase>(tx.raw),
  ): StatementWriter<TasksDatabase> {
    session.last_event_id = tx.lastEventOfSession.get(session.id) ?? session.last_event_id;
    const messages = tx.pendingMessages.splice(0);
    const outcomes = tx.pendingOutcomes.splice(0);
    if (messages.length > 0) {
      statement.withInsert(
        "new_messages",
        qualified(this.#ctx.schema, "messages"),
        messages,
        '"position"',
      );
    }
    if (outcomes.length > 0) {
      statement.withInsert(
        "new_outcomes",
        qualified(this.#ctx.schema, "outcomes"),
        outcomes,
        '"id"',
      );
    }
    return statement;
  }

  sessionChanges(session: LockedSession) {
    return {
      state: session.state,
      transcript_epoch: session.transcript_epoch,
      message_count: session.message_count,
      turn_count: session.turn_count,
      next_queue_seq: session.next_queue_seq,
      last_event_id: session.last_event_id,
      updated_at: NOW,
    };
  }

  /**
   * Reserves an idempotency key for `resourceId`. Returns the id an earlier
   * request with the same key created (then nothing else may be written), or
   * undefined when the key is new. Concurrent requests with one key wait for
   * each other on the key's row.
   */
  async reserveKey(
    tx: Tx,
    scope: string,
    idempotency: Idempotency | undefined,
    resourceId: string,
  ): Promise<string | undefined> {
    return reserveKey(tx.db, scope, idempotency, resourceId);
  }

  keyScope(workspaceId: string, context: WriteContext, method: string, target: string): string {
    return `${workspaceId}|${context.actor.id}|${method}|${target}`;
  }

  scopeOf(
    session: Pick<SessionRow, "workspace_id" | "id">,
    actor = SYSTEM_ACTOR,
    idempotencyKey?: string,
  ): EventScope {
    return {
      workspaceId: session.workspace_id,
      sessionId: session.id,
      actor,
      ...(idempotencyKey ? { idempotencyKey } : {}),
    };
  }
}
