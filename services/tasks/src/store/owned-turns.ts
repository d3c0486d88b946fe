/**
 * A turn's steps made by the session owner in memory (owner mode, see
 * session-owner.ts): submit, finish and claim decide on the session's
 * state in memory and write ONE journal append each — the step's public
 * events and its row changes (row-changes.ts, the task's Outcome among
 * them) — which the `tasks-read-model` projector applies behind. No step
 * record: the row changes already hold all it would carry.
 *
 * The common steps are made here; the rare ones return `undefined` and the
 * caller runs the relational path under the owner instead (see
 * `OwnedTaskStore`): a submit that interrupts a running turn, answers a tool
 * call, creates its session or reuses a key already projected; a finish of a
 * canceled turn, of a replay, of a resumed or suspending turn.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import {
  type Event,
  type Message,
  MessageSchema,
  Role,
  SessionState,
  TaskStatus,
} from "@trellis/contracts/core";
import { notFound } from "../domain/errors.js";
import { agentActor, messageEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { cancelRequested } from "../domain/lifecycle.js";
import type { RunOutcome } from "../domain/run.js";
import { assignTurns, closeToolCalls } from "../domain/transcript.js";
import { type KnownAgentState, knownAgentState } from "./agent-state.js";
import { decodeMessages, encodeMessage } from "./codec.js";
import {
  encodeRowChanges,
  outcomeRow,
  ROWS_STEP,
  type Row,
  type RowChange,
} from "./row-changes.js";
import { messageRows, toTask } from "./rows.js";
import type { SessionRow, TaskRow } from "./schema.js";
import type { LastEvent, OwnedSession, SessionOwner, StepAppend } from "./session-owner.js";
import { sessionStream } from "./session-stream.js";
import { creatorActor, type StoreContext, withIds } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { Claim, FinishResult, NewTask, SubmitResult, WriteContext } from "./task-store.js";
import {
  claimEvent,
  claimOf,
  endedColumns,
  endedOutcome,
  runEnd,
  submitDecision,
  submitEvents,
  submitResult,
} from "./turn-events.js";

/** What one owned step changes, collected before its append. */
class Step {
  readonly now = new Date();
  readonly events: Event[] = [];
  readonly rows: RowChange[] = [];
  /** Task rows as the step leaves them. */
  readonly tasks = new Map<string, TaskRow>();
  /** The agent state the step left (a finish with a state), kept with the session. */
  agentState: KnownAgentState | undefined;

  /** Each task's last event as the step leaves it (a copy of the session's). */
  readonly sequences: Map<string, LastEvent>;

  constructor(
    readonly session: SessionRow,
    readonly mailbox: TaskRow[],
    sequences: ReadonlyMap<string, LastEvent>,
  ) {
    this.sequences = new Map(sequences);
  }

  /**
   * Adds a public event of a task of the session (every owned step's event
   * is one): its id, time, and its sequence after the task's last event —
   * none for a task this step created.
   */
  emit(event: Event): void {
    event.id = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
    event.createdAt = timestampNow();
    const task = event.resource?.object === "task" ? event.resource.id : "";
    if (task === "") throw new Error(`owned step: event ${event.kind} is not a task's`);
    const last = this.sequences.get(task);
    event.sequence = (last?.sequence ?? 0n) + 1n;
    event.previousEventId = last?.eventId ?? "";
    this.sequences.set(task, { sequence: event.sequence, eventId: event.id });
    this.events.push(event);
    this.session.last_event_id = event.id;
  }

  insertTask(row: TaskRow): void {
    this.tasks.set(row.id, row);
    this.rows.push({ op: "insert", table: "tasks", values: taskValues(row) });
  }

  updateTask(row: TaskRow, set: Partial<TaskRow>): TaskRow {
    const updated = { ...row, ...set, updated_at: this.now };
    this.tasks.set(row.id, updated);
    const values = taskValues({ ...set, updated_at: this.now } as TaskRow);
    this.rows.push({ op: "update", table: "tasks", id: row.id, set: values });
    return updated;
  }

  /** The step's append: its row changes as the journal entry, its public events beside (one append). */
  append(): StepAppend {
    const s = this.session;
    this.rows.push({
      op: "update",
      table: "sessions",
      id: s.id,
      workspaceId: s.workspace_id,
      set: {
        state: s.state,
        transcript_epoch: s.transcript_epoch,
        message_count: s.message_count,
        turn_count: s.turn_count,
        next_queue_seq: s.next_queue_seq,
        last_event_id: s.last_event_id,
        updated_at: this.now,
      },
    });
    s.updated_at = this.now;
    return {
      entries: [{ stream: sessionStream(s), kind: ROWS_STEP, body: encodeRowChanges(this.rows) }],
      events: this.events,
    };
  }

  /** The session's state after the step. */
  state(): OwnedSession {
    const mailbox = this.mailbox
      .map((row) => this.tasks.get(row.id) ?? row)
      .concat([...this.tasks.values()].filter((row) => !this.mailbox.some((m) => m.id === row.id)))
      .filter((row) => row.run_state === "queued" || row.run_state === "running")
      .sort((a, b) => (a.queue_seq < b.queue_seq ? -1 : a.queue_seq > b.queue_seq ? 1 : 0));
    return {
      session: this.session,
      mailbox,
      sequences: new Map(
        mailbox.flatMap((row) => {
          const last = this.sequences.get(row.id);
          return last ? [[row.id, last] as const] : [];
        }),
      ),
      usedAt: Date.now(),
      ...(this.agentState ? { agentState: this.agentState } : {}),
    };
  }
}

/** A lone surrogate (PostgreSQL's jsonb refuses one, as text refuses a NUL). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Whether every string in `value` (keys included; bytes are not text) is
 * text PostgreSQL stores. A step is appended only when its projection can
 * be applied: a refused batch would stop the projector for good, behind a
 * turn already answered.
 */
export function storable(value: unknown, depth = 0): boolean {
  if (typeof value === "string") return !value.includes("\u0000") && !LONE_SURROGATE.test(value);
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return true;
  // Deeper than any message or state the limits let in: the relational path decides.
  if (depth > 64) return false;
  if (Array.isArray(value)) return value.every((item) => storable(item, depth + 1));
  for (const [key, item] of Object.entries(value)) {
    if (!storable(key, depth + 1) || !storable(item, depth + 1)) return false;
  }
  return true;
}

/** Column values of a task row as the tables take them (jsonb as text). */
function taskValues(row: Partial<TaskRow>): Row {
  const values: Row = { ...row };
  delete values.seq;
  for (const column of ["metadata", "checkpoint", "resume_payload", "state"] as const) {
    if (column in row) {
      const value = row[column];
      values[column] = value === null || value === undefined ? null : JSON.stringify(value);
    }
  }
  if ("metadata" in row && values.metadata === null) values.metadata = "{}";
  return values;
}

/** Submit, finish and claim in memory (see the module header). */
export class OwnedTurns {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;
  readonly #owner: SessionOwner;

  constructor(ctx: StoreContext, parts: StoreParts, owner: SessionOwner) {
    this.#ctx = ctx;
    this.#p = parts;
    this.#owner = owner;
  }

  /** A submit to an existing session (the caller holds its lock); undefined: not made here. */
  async submit(
    state: OwnedSession,
    input: NewTask,
    context: WriteContext,
    owner: string,
  ): Promise<SubmitResult | undefined> {
    const found = state.session;
    if (context.scope !== undefined && found.workspace_id !== context.scope) {
      throw notFound("session", found.id);
    }
    const input0 = withIds(input.input);
    if (input0.role === Role.TOOL) return undefined;
    // Text the tables may refuse: the relational path gets the database's verdict.
    if (!storable(input0) || !storable(input.metadata)) return undefined;
    const key = input.idempotency?.key ? input.idempotency : undefined;
    const keyScope = this.#p.unit.keyScope(
      context.scope ?? input.workspaceId,
      context,
      "SubmitTask",
      input.sessionId,
    );
    if (key && (await this.#keyProjected(keyScope, key.key))) return undefined;
    this.#p.transcript.assertOpen(found);
    // An existing session runs its own agent when the request may create one (harness §3.2).
    const { agent, requirements } = await this.#p.directory.submitAgent(
      undefined,
      (input.createSession ? "" : input.agentId) || found.agent_id,
      found.workspace_id,
      input,
    );
    const decision = submitDecision(
      input.busyPolicy,
      {
        running: state.mailbox.find((row) => row.run_state === "running"),
        head: state.mailbox.find((row) => row.run_state === "queued"),
      },
      found.id,
    );
    if (decision.interrupt) return undefined;

    const step = new Step({ ...found }, state.mailbox, state.sequences);
    const session = step.session;
    const taskId = newId("task");
    const { events, status } = submitEvents(
      this.#p.unit.scopeOf(session, context.actor, key?.key),
      this.#p.unit.scopeOf(session),
      taskId,
      agent.id,
      decision.runNow,
    );
    for (const event of events) step.emit(event);
    const queueSeq = session.next_queue_seq;
    session.next_queue_seq += 1n;
    let inputPosition: bigint | null = null;
    if (decision.runNow) {
      inputPosition = session.message_count;
      this.#appendMessages(step, [input0], taskId, context.actor);
    }
    const row: TaskRow = {
      seq: 0n,
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
      branch_id: "",
      parent_task_id: input.parentTaskId,
      assigned_backend: agent.backend,
      receipt_id: "",
      outcome_id: "",
      busy_policy: input.busyPolicy,
      idempotency_key: key?.key ?? "",
      metadata: (input.metadata ?? {}) as TaskRow["metadata"],
      created_at: step.now,
      updated_at: step.now,
      started_at: decision.runNow ? step.now : null,
      completed_at: null,
      canceled_at: null,
      cancel_reason: "",
      failure: null,
      suspension: null,
      signal_id: null,
      checkpoint: null,
      resume_payload: null,
      output: null,
      lease_owner: decision.runNow ? owner : null,
      lease_expires_at: decision.runNow ? this.#leaseUntil(step.now) : null,
      state: null,
      requirements,
    };
    step.insertTask(row);
    if (key) {
      step.rows.push({
        op: "insert_key",
        table: "idempotency_keys",
        values: {
          scope: keyScope,
          key: key.key,
          request_hash: key.requestHash,
          resource_id: taskId,
        },
      });
    }
    const task = toTask(row);
    const appended = await this.#owner.append(
      session,
      step.append(),
      key ? `tasks|${keyScope}|${key.key}` : undefined,
    );
    // The same key in an append not yet projected: the relational path, once
    // it is projected, answers the retry as it answers any other.
    if (appended.duplicate) return undefined;
    this.#commit(step);
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
  }

  /** A run's end (the caller holds its session's lock); undefined: not made here. */
  async finish(
    state: OwnedSession,
    claim: Claim,
    outcome: RunOutcome,
    owner: string,
  ): Promise<FinishResult | undefined> {
    const row = state.mailbox.find((r) => r.id === claim.task.id);
    // Fencing: only the run that still holds the claim may commit.
    if (row?.run_state !== "running" || row.lease_owner !== owner) return { applied: false };
    if (
      row.status === TaskStatus.CANCELED ||
      cancelRequested(row) ||
      row.parent_task_id !== "" ||
      row.suspension !== null ||
      row.input_position === null ||
      outcome.status === "suspended" ||
      // Text the tables may refuse (the runner fails the turn with the
      // database's cause): decided by the relational path, not appended
      // for a projector that could never apply it.
      !storable(outcome)
    ) {
      return undefined;
    }
    const step = new Step({ ...state.session }, state.mailbox, state.sequences);
    const session = step.session;
    const from = row.status as TaskStatus;
    const scope = this.#p.unit.scopeOf(session, agentActor(row.agent_id));
    const end = runEnd(outcome, from, row.id, scope);
    const earlier = decodeMessages(row.output);
    const already = new Set(earlier.map((m) => m.id));
    const output = closeToolCalls([...outcome.messages], end.note).filter(
      (m) => m.id === "" || !already.has(m.id),
    );
    const appended = this.#appendMessages(step, output, row.id, agentActor(row.agent_id));
    const messages = [...earlier, ...appended];
    step.emit(end.event);
    const outcomeId = row.outcome_id || newId("out");
    if (!row.outcome_id) {
      step.rows.push({
        op: "insert",
        table: "outcomes",
        values: outcomeRow(endedOutcome(row, outcomeId, end, messages)),
      });
    }
    const set: Partial<TaskRow> = endedColumns(row, end, messages, outcomeId, step.now);
    if (outcome.backendId) set.assigned_backend = outcome.backendId;
    if (outcome.status === "completed" && outcome.state !== undefined) {
      set.state = outcome.state as TaskRow["state"];
      step.agentState = knownAgentState(outcome.state);
      step.rows.push({
        op: "upsert",
        table: "session_states",
        values: {
          workspace_id: row.workspace_id,
          session_id: row.session_id,
          state: JSON.stringify(outcome.state),
          task_id: row.id,
          updated_at: step.now,
        },
      });
    }
    const updated = step.updateTask(row, set);
    const head = state.mailbox.find((r) => r.run_state === "queued");
    const next = head ? await this.#claimHead(step, head, owner) : undefined;
    await this.#owner.append(session, step.append(), undefined, {
      agentState: set.state !== undefined,
    });
    this.#commit(step);
    return {
      applied: true,
      task: toTask(updated),
      transcriptLength: session.message_count,
      ...(next ? { next } : {}),
    };
  }

  /** Claims the head of the queue when nothing runs (the caller holds the session's lock). */
  async claimNext(state: OwnedSession, owner: string): Promise<Claim | undefined> {
    if (state.mailbox.some((r) => r.run_state === "running")) return undefined;
    const head = state.mailbox.find((r) => r.run_state === "queued");
    if (!head) return undefined;
    const step = new Step({ ...state.session }, state.mailbox, state.sequences);
    const claim = await this.#claimHead(step, head, owner);
    if (!claim) return undefined;
    await this.#owner.append(state.session, step.append(), undefined);
    this.#commit(step);
    return claim;
  }

  async #claimHead(step: Step, head: TaskRow, owner: string): Promise<Claim | undefined> {
    const session = step.session;
    if (session.state === SessionState.CLOSED) return undefined;
    const started = claimEvent(this.#p.unit.scopeOf(session), head);
    if (started) step.emit(started);
    let inputPosition = head.input_position;
    if (inputPosition === null) {
      inputPosition = session.message_count;
      this.#appendMessages(
        step,
        [fromBinary(MessageSchema, head.input)],
        head.id,
        creatorActor(head.created_by),
      );
    }
    const row = step.updateTask(head, {
      status: TaskStatus.WORKING,
      run_state: "running",
      input_position: inputPosition,
      lease_owner: owner,
      lease_expires_at: this.#leaseUntil(step.now),
      started_at: head.started_at ?? step.now,
    });
    const agent = await this.#p.directory.resolveAgent(
      undefined,
      row.agent_id,
      row.workspace_id,
      "agent_id",
    );
    return claimOf(this.#p.directory, toTask(row), agent, inputPosition, owner, row, session);
  }

  /** Appends messages at the end of the step's session transcript, with their events. */
  #appendMessages(
    step: Step,
    messages: readonly Message[],
    taskId: string,
    actor: ReturnType<typeof agentActor>,
  ): Message[] {
    if (messages.length === 0) return [];
    const session = step.session;
    const prepared = messages.map(withIds);
    const { turns, turnCount } = assignTurns(session.turn_count, prepared);
    const start = session.message_count;
    for (const values of messageRows(session, prepared, start, turns, taskId)) {
      values.created_at = step.now;
      step.rows.push({ op: "insert", table: "messages", values });
    }
    session.message_count = start + BigInt(prepared.length);
    session.turn_count = turnCount;
    const scope = this.#p.unit.scopeOf(session, actor);
    prepared.forEach((message, i) => {
      step.emit(messageEvent(scope, message, start + BigInt(i), taskId));
    });
    return prepared;
  }

  #leaseUntil(now: Date): Date {
    return new Date(now.getTime() + this.#ctx.leaseMs);
  }

  /** Whether a key is in the idempotency table (a projected or relational submit took it). */
  async #keyProjected(scope: string, key: string): Promise<boolean> {
    const row = await this.#ctx.db
      .selectFrom("idempotency_keys")
      .select("resource_id")
      .where("scope", "=", scope)
      .where("key", "=", key)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Adopts a step's state once appended, and tells the watchers. */
  #commit(step: Step): void {
    this.#owner.adopt(step.session, step.state());
    if (this.#ctx.onCommit) {
      const rows = step.tasks;
      this.#ctx.onCommit({
        taskIds: [...rows.keys()],
        snapshot: (id) => {
          const row = rows.get(id);
          return row ? toTask(row) : undefined;
        },
      });
    }
  }
}
