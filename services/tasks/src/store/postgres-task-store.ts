/**
 * {@link TaskStore} on PostgreSQL with kysely; the same code runs on PGlite
 * (kysely's PGlite dialect reuses the Postgres compiler).
 *
 * Concurrency rules (what makes the mailbox hold across replicas):
 * - every transaction that changes a task or a transcript first locks the
 *   session row (`SELECT … FOR UPDATE`), then reads what it decides on — so
 *   decisions ("is the mailbox free?", "is this still my run?") are made on
 *   current state, and one session's changes are serialized;
 * - a run is claimed by setting `run_state = 'running'` with a lease
 *   (`lease_owner`, `lease_expires_at` on the database clock); a partial
 *   unique index allows one running task per session;
 * - finishing a run checks the claim is still ours (fencing): a run whose
 *   lease was taken over, or that was finalized after a cancel, commits
 *   nothing, so output is never duplicated;
 * - idempotency rows are locked before sessions; events go to the outbox once,
 *   at the end of each transaction (storage's lock-order rule).
 */
import { createHash, randomUUID } from "node:crypto";
import { create, fromBinary, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import {
  ErrorDetailSchema,
  type Event,
  EventSchema,
  type Message,
  MessageSchema as MessageSchemaForInput,
  Role,
  SessionState,
  TaskStatus,
} from "@trellis/contracts/core";
import {
  type Agent,
  type Artifact,
  ArtifactKind,
  type Outcome,
  OutcomeStatus,
  type Session,
  type SessionMessage,
  SessionMessageSchema,
  SuspensionSchema,
  type Task,
  TaskFailureSchema,
  type Workspace,
} from "@trellis/contracts/tasks";
import { validateToolCallReference } from "@trellis/messages";
import {
  type Database,
  type OutboxFold,
  type OutboxUnit,
  type OutboxWriter,
  outboxTables,
} from "@trellis/storage";
import {
  CompiledQuery,
  type Insertable,
  type InsertObject,
  type Kysely,
  sql,
  type Transaction,
  type UpdateObject,
} from "kysely";
import {
  DEFAULT_AGENT_ID,
  DEFAULT_WORKSPACE_ID,
  DETERMINISTIC_BACKENDS,
} from "../domain/defaults.js";
import {
  conflict,
  idempotencyKeyReused,
  invalidRequest,
  notFound,
  payloadTooLarge,
  permissionDenied,
} from "../domain/errors.js";
import {
  agentActor,
  dataEvent,
  type EventScope,
  messageEvent,
  SYSTEM_ACTOR,
  sessionEvent,
  signalEvent,
  taskNoteEvent,
  taskStatusEvent,
  taskSubmittedEvent,
  userActor,
} from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { cancelEndReason, cancelRequested, isSuspended, transition } from "../domain/lifecycle.js";
import { decideSubmit, type RunState, recoveryAction } from "../domain/mailbox.js";
import {
  deltasOf,
  REPLAY_KEY,
  type ReplayPlan,
  replayUnavailable,
  type StoredOverride,
} from "../domain/replay.js";
import type { RunOutcome } from "../domain/run.js";
import { classifySignal, signalIdFor } from "../domain/signals.js";
import {
  assignTurns,
  closeToolCalls,
  forkLength,
  planTruncation,
  summarize,
} from "../domain/transcript.js";
import { decodeMessage, decodeMessages, encodeMessage, encodeMessages, jsonText } from "./codec.js";
import {
  toAgent,
  toArtifact,
  toOutcome,
  toSession,
  toSessionMessage,
  toTask,
  toWorkspace,
} from "./rows.js";
import type { MessageTable, OutcomeTable, SessionRow, TaskRow, TasksDatabase } from "./schema.js";
import { qualified, StatementWriter } from "./statement.js";
import type {
  CancelResult,
  Claim,
  DeliverResult,
  FinishResult,
  Idempotency,
  NewReplay,
  NewSession,
  NewTask,
  Page,
  PageRequest,
  ReplayRecord,
  ReplayResult,
  ReplaySource,
  ResourceFilter,
  SubmitResult,
  TaskFilter,
  TaskStore,
  WriteContext,
} from "./task-store.js";

/** Options of {@link PostgresTaskStore}. */
export interface PostgresTaskStoreOptions {
  database: Database<unknown>;
  /** The service's schema (its tables). */
  schema: string;
  /** The outbox its events go to (its units hand them to the relay). */
  outbox: OutboxWriter;
  /** How long a claim lasts without renewal. */
  leaseMs: number;
  /** Largest artifact content stored inline (bytes). */
  maxArtifactBytes?: number;
  /** Called after every committed write with the tasks it changed (wake watchers). */
  onCommit?: (changes: CommittedChanges) => void;
}

/** The tasks a committed write changed, with their new state when the write knew it. */
export interface CommittedChanges {
  readonly taskIds: readonly string[];
  /** The task as committed (computed on demand), or undefined when it must be read back. */
  snapshot(taskId: string): Task | undefined;
}

/** The NOTIFY channel on which a replica learns that a task it may be running was canceled. */
export function cancelChannel(schema: string): string {
  return `trellis_${schema}_cancel`;
}

/** One write transaction in progress. */
interface Tx {
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
}

/** A session row locked by the current transaction; saved at its end. */
type LockedSession = SessionRow;

/** A task row change written with the session (see `#saveSessionWithTask`). */
type TaskWrite =
  | { kind: "insert"; values: InsertObject<TasksDatabase, "tasks"> }
  | { kind: "update"; id: string; set: UpdateObject<TasksDatabase, "tasks"> };

/** How a task ends (see `#finalize`). */
interface TaskEnd {
  status: TaskStatus;
  extra: Message[];
  note: string;
  failure?: { category: string; message: string; retryable: boolean };
  /** The lifecycle event, emitted after the output's message events. */
  event?: Event;
}

/**
 * The texts of the statements every turn runs, written once per store (the
 * same text kysely compiled them to): building and compiling them per call
 * cost more than the database spent on them.
 */
interface HotStatements {
  /** `$1` session id. */
  lockSession: string;
  /** The running task and the queue's head: `$1` session id, `$2` 'queued', `$3` 'running', `$4` 2. */
  mailbox: string;
  /**
   * A finished run's task and the queue's head: `$1` session id, `$2` task
   * id, `$3` 'queued', `$4` task id, `$5` 2.
   */
  finishedRun: string;
}

export function hotStatements(schema: string): HotStatements {
  return {
    lockSession: `select * from ${qualified(schema, "sessions")} where "id" = $1 for update`,
    mailbox:
      `select * from ${qualified(schema, "tasks")} where "session_id" = $1 and "run_state" in ($2, $3) ` +
      `order by run_state = 'running' desc, "queue_seq" limit $4`,
    finishedRun:
      `select * from ${qualified(schema, "tasks")} where "session_id" = $1 and ("id" = $2 or "run_state" = $3) ` +
      `order by id = $4 desc, "queue_seq" limit $5`,
  };
}

/** `now()`, one fragment for every statement that sets a timestamp. */
const NOW = sql<Date>`now()`;

/** Most events whose outbox rows join the session's statement (more: appended apart). */
const MAX_FOLDED_EVENTS = 200;

/** The column of the save statement's result carrying its outbox rows' positions. */
const OUTBOX_POSITIONS = "trellis_outbox_positions";

const MESSAGE_EVENT_KINDS = [
  "user.message",
  "agent.message",
  "agent.tool_result",
  "session.message_appended",
];

const NOT_DONE: RunState[] = ["queued", "running", "waiting"];

/**
 * Whether a row is visible to a caller scoped to `scope` (undefined: an
 * internal call, which sees every workspace). A row in another workspace is
 * reported exactly like a missing one, never as forbidden.
 */
function visible<R extends { workspace_id: string }>(
  row: R | undefined,
  scope: string | undefined,
): row is R {
  return row !== undefined && (scope === undefined || row.workspace_id === scope);
}

/** Artifact columns without the content bytes (metadata reads never need them). */
const ARTIFACT_COLUMNS = [
  "seq",
  "id",
  "workspace_id",
  "session_id",
  "task_id",
  "kind",
  "name",
  "mime_type",
  "uri",
  "visibility",
  "sha256",
  "size_bytes",
  "metadata",
  "created_at",
] as const;

function pageLimit(pageSize: number): number {
  if (!Number.isInteger(pageSize) || pageSize < 0 || pageSize > 1000) {
    throw invalidRequest("page_size must be 0…1000", "page_size");
  }
  return pageSize === 0 ? 100 : pageSize;
}

function pageAfter(token: string): bigint | undefined {
  if (token === "") return undefined;
  try {
    const value = BigInt(Buffer.from(token, "base64url").toString("utf8"));
    if (value < 0n) throw new Error("negative");
    return value;
  } catch {
    throw invalidRequest("page_token is not a token this service issued", "page_token");
  }
}

function pageToken(value: bigint): string {
  return Buffer.from(value.toString(), "utf8").toString("base64url");
}

function paged<T, R>(
  rows: R[],
  limit: number,
  cursor: (row: R) => bigint,
  map: (row: R) => T,
): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  const last = kept.at(-1);
  return {
    items: kept.map(map),
    nextPageToken: more && last !== undefined ? pageToken(cursor(last)) : "",
  };
}

function withIds(message: Message): Message {
  const copy = { ...message };
  if (!copy.id) copy.id = newId("msg");
  copy.createdAt ??= timestampNow();
  return copy;
}

function creatorActor(createdBy: string) {
  return createdBy && createdBy !== SYSTEM_ACTOR.id ? userActor(createdBy) : SYSTEM_ACTOR;
}

/** The PostgreSQL / PGlite implementation of {@link TaskStore}. */
export class PostgresTaskStore implements TaskStore {
  readonly #database: Database<unknown>;
  readonly #kysely: Kysely<TasksDatabase>;
  /** Scoped to the service's schema (built once: withSchema creates a new instance). */
  readonly #db: Kysely<TasksDatabase>;
  readonly #schema: string;
  readonly #outbox: OutboxWriter;
  readonly #outboxSchema: string;
  readonly #leaseMs: number;
  readonly #maxArtifactBytes: number;
  readonly #onCommit: ((changes: CommittedChanges) => void) | undefined;
  readonly #hot: HotStatements;
  // Agents are immutable once created, so they are cached for good.
  readonly #agents = new Map<string, Agent>();
  readonly #defaultAgentOf = new Map<string, string>();

  constructor(options: PostgresTaskStoreOptions) {
    this.#database = options.database;
    this.#kysely = options.database.kysely as Kysely<TasksDatabase>;
    this.#db = this.#kysely.withSchema(options.schema);
    this.#schema = options.schema;
    this.#outbox = options.outbox;
    this.#outboxSchema = options.outbox.schema;
    this.#leaseMs = options.leaseMs;
    this.#maxArtifactBytes = options.maxArtifactBytes ?? 16 * 1024 * 1024;
    this.#onCommit = options.onCommit;
    this.#hot = hotStatements(options.schema);
  }

  // ------------------------------------------------------------ transactions

  async #write<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    let changed: Map<string, TaskRow | undefined> | undefined;
    const result = await this.#outbox.transaction(this.#kysely, async (unit) => {
      const raw = unit.trx;
      let scoped: Transaction<TasksDatabase> | undefined;
      const schema = this.#schema;
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
      };
      const value = await work(tx);
      if (tx.pendingMessages.length > 0 || tx.pendingOutcomes.length > 0) {
        throw new Error(
          "tasks store: messages or outcomes were left unwritten (session not saved)",
        );
      }
      // Appended at commit, then handed to the relay by the unit.
      if (tx.events.length > 0) unit.add(tx.events);
      if (tx.notifyCancel) {
        await sql`select pg_notify(${cancelChannel(this.#schema)}, '')`.execute(raw);
      }
      changed = tx.changed;
      return value;
    });
    if (this.#onCommit) {
      const rows = changed ?? new Map<string, TaskRow | undefined>();
      this.#onCommit({
        taskIds: [...rows.keys()],
        snapshot: (id) => {
          const row = rows.get(id);
          return row ? toTask(row) : undefined;
        },
      });
    }
    return result;
  }

  #emit(tx: Tx, event: Event): void {
    event.id = `evt_${randomUUID().replaceAll("-", "")}`;
    event.createdAt = timestampNow();
    tx.events.push(event);
    if (event.sessionId) tx.lastEventOfSession.set(event.sessionId, event.id);
    if (event.taskId && !tx.changed.has(event.taskId)) tx.changed.set(event.taskId, undefined);
  }

  async #lockSession(tx: Tx, id: string, scope: string | undefined): Promise<LockedSession> {
    // Every write's first statement: its text is kept (see HotStatements).
    const { rows } = await tx.raw.executeQuery<SessionRow>(
      CompiledQuery.raw(this.#hot.lockSession, [id]),
    );
    const row = rows[0];
    if (!visible(row, scope)) throw notFound("session", id);
    return row;
  }

  /**
   * Writes the locked session back, together with the transcript rows and
   * outcomes the transaction produced: one statement (data-modifying CTEs).
   */
  async #saveSession(tx: Tx, session: LockedSession): Promise<Session> {
    const statement = this.#withSessionSave(tx, session);
    const main = statement.update(
      qualified(this.#schema, "sessions"),
      this.#sessionChanges(session),
      session.id,
      "*",
    );
    return toSession(await statement.first<SessionRow>(tx.raw, main));
  }

  /**
   * The last statement of a write that changes one task: like
   * {@link #saveSession}, plus the task row's insert or update and the
   * transaction's outbox rows, in one statement (after the one that takes the
   * outbox sequences). Returns the task row; nothing may be written after it
   * but further events (appended at commit as usual).
   */
  async #saveSessionWithTask(tx: Tx, session: LockedSession, write: TaskWrite): Promise<TaskRow> {
    const statement = new StatementWriter<TasksDatabase>(tx.raw);
    let outbox: OutboxFold | undefined;
    let returning = "*";
    if (tx.events.length > 0 && tx.events.length <= MAX_FOLDED_EVENTS) {
      // The transaction's own events, made by #emit: completed in place.
      tx.outbox.add(tx.events.splice(0), { adopt: true });
      outbox = await tx.outbox.fold();
    }
    if (outbox) {
      statement.withInsert("new_outbox", outbox.table, outbox.rows, outbox.returning);
      // The rows' positions come back with the task row, for the unit's hand-over.
      returning = `*, ${outbox.positions("new_outbox")} as "${OUTBOX_POSITIONS}"`;
    }
    this.#withSessionSave(tx, session, statement).withUpdate(
      "saved_session",
      qualified(this.#schema, "sessions"),
      this.#sessionChanges(session),
      session.id,
      '"id"',
    );
    const tasks = qualified(this.#schema, "tasks");
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
  #withSessionSave(
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
        qualified(this.#schema, "messages"),
        messages,
        '"position"',
      );
    }
    if (outcomes.length > 0) {
      statement.withInsert("new_outcomes", qualified(this.#schema, "outcomes"), outcomes, '"id"');
    }
    return statement;
  }

  #sessionChanges(session: LockedSession) {
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
  async #reserveKey(
    tx: Tx,
    scope: string,
    idempotency: Idempotency | undefined,
    resourceId: string,
  ): Promise<string | undefined> {
    if (!idempotency || idempotency.key === "") return undefined;
    const inserted = await tx.db
      .insertInto("idempotency_keys")
      .values({
        scope,
        key: idempotency.key,
        request_hash: idempotency.requestHash,
        resource_id: resourceId,
      })
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
      .returning("resource_id")
      .executeTakeFirst();
    if (inserted) return undefined;
    const existing = await tx.db
      .selectFrom("idempotency_keys")
      .select(["request_hash", "resource_id"])
      .where("scope", "=", scope)
      .where("key", "=", idempotency.key)
      .executeTakeFirstOrThrow();
    if (existing.request_hash !== idempotency.requestHash)
      throw idempotencyKeyReused(idempotency.key);
    return existing.resource_id;
  }

  #keyScope(workspaceId: string, context: WriteContext, method: string, target: string): string {
    return `${workspaceId}|${context.actor.id}|${method}|${target}`;
  }

  // ------------------------------------------------------------ workspaces

  async createWorkspace(
    workspace: Workspace,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Workspace> {
    if (context.scope !== undefined) {
      throw permissionDenied("credentials bound to a workspace cannot create workspaces");
    }
    if (!workspace.name) throw invalidRequest("a workspace needs a name", "name");
    const id = workspace.id || newId("ws");
    const created = await this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope("", context, "CreateWorkspace", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      const inserted = await tx.db
        .insertInto("workspaces")
        .values({
          id,
          name: workspace.name,
          root: workspace.root,
          default_branch_id: workspace.defaultBranchId,
          default_agent_id: DEFAULT_AGENT_ID,
          metadata: jsonText(workspace.metadata),
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) throw conflict(`workspace ${id} already exists`, { workspace_id: id });
      return id;
    });
    return this.getWorkspace(created);
  }

  async getWorkspace(id: string, scope?: string): Promise<Workspace> {
    if (scope !== undefined && id !== scope) throw notFound("workspace", id);
    const row = await this.#db
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) throw notFound("workspace", id);
    return toWorkspace(row);
  }

  async listWorkspaces(page: PageRequest, scope?: string): Promise<Page<Workspace>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    let query = this.#db
      .selectFrom("workspaces")
      .selectAll()
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (scope !== undefined) query = query.where("id", "=", scope);
    return paged(await query.execute(), limit, (r) => r.seq, toWorkspace);
  }

  /** Workspaces exist implicitly once used (credentials may name a workspace nobody created). */
  async #ensureWorkspace(tx: Tx, id: string): Promise<void> {
    if (this.#defaultAgentOf.has(id)) return;
    await tx.db
      .insertInto("workspaces")
      .values({ id, name: id, default_agent_id: DEFAULT_AGENT_ID, metadata: "{}" })
      .onConflict((oc) => oc.column("id").doNothing())
      .execute();
  }

  async #defaultAgentId(tx: Tx | undefined, workspaceId: string): Promise<string> {
    const cached = this.#defaultAgentOf.get(workspaceId);
    if (cached !== undefined) return cached;
    const row = await (tx?.db ?? this.#db)
      .selectFrom("workspaces")
      .select("default_agent_id")
      .where("id", "=", workspaceId)
      .executeTakeFirst();
    const id = row?.default_agent_id || DEFAULT_AGENT_ID;
    if (row) this.#defaultAgentOf.set(workspaceId, id);
    return id;
  }

  // ------------------------------------------------------------ agents

  async createAgent(
    agent: Agent,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Agent> {
    const workspaceId = context.scope ?? (agent.workspaceId || DEFAULT_WORKSPACE_ID);
    if (context.scope !== undefined && agent.workspaceId && agent.workspaceId !== context.scope) {
      throw notFound("workspace", agent.workspaceId);
    }
    if (!agent.name) throw invalidRequest("an agent needs a name", "agent.name");
    const id = agent.id || newId("agent");
    const created = await this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(workspaceId, context, "CreateAgent", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      await this.#ensureWorkspace(tx, workspaceId);
      const inserted = await tx.db
        .insertInto("agents")
        .values({
          id,
          workspace_id: workspaceId,
          name: agent.name,
          version: agent.version,
          description: agent.description,
          backend: agent.backend,
          tools: JSON.stringify(agent.tools),
          autonomy_tier: agent.autonomyTier,
          receipt_policy: agent.receiptPolicy,
          definition: jsonText(agent.definition),
          safe_to_retry: agent.safeToRetry,
          metadata: jsonText(agent.metadata),
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) throw conflict(`agent ${id} already exists`, { agent_id: id });
      return id;
    });
    return this.getAgent(created, context.scope);
  }

  /** The built-in echo agent is a system agent: every workspace may see and use it. */
  #visible(agent: Agent, scope: string | undefined): boolean {
    return scope === undefined || agent.workspaceId === scope || agent.id === DEFAULT_AGENT_ID;
  }

  async #loadAgent(tx: Tx | undefined, id: string): Promise<Agent | undefined> {
    const cached = this.#agents.get(id);
    if (cached) return cached;
    const row = await (tx?.db ?? this.#db)
      .selectFrom("agents")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) return undefined;
    const agent = toAgent(row);
    this.#agents.set(id, agent);
    return agent;
  }

  async getAgent(id: string, scope?: string): Promise<Agent> {
    const agent = await this.#loadAgent(undefined, id);
    if (!agent || !this.#visible(agent, scope)) throw notFound("agent", id);
    return agent;
  }

  async listAgents(workspaceId: string, page: PageRequest, scope?: string): Promise<Page<Agent>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    const workspace = scope ?? workspaceId;
    let query = this.#db
      .selectFrom("agents")
      .selectAll()
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (workspace) {
      query = query.where((eb) =>
        eb.or([eb("workspace_id", "=", workspace), eb("id", "=", DEFAULT_AGENT_ID)]),
      );
    }
    return paged(await query.execute(), limit, (r) => r.seq, toAgent);
  }

  /** The agent a session or task in `workspaceId` runs: `agentId`, else the workspace default. */
  async #resolveAgent(tx: Tx, agentId: string, workspaceId: string, param: string): Promise<Agent> {
    const id = agentId || (await this.#defaultAgentId(tx, workspaceId));
    const agent = await this.#loadAgent(tx, id);
    if (!agent || !this.#visible(agent, workspaceId)) {
      throw invalidRequest(
        `agent ${JSON.stringify(id)} does not exist in workspace ${workspaceId}`,
        param,
      );
    }
    return agent;
  }

  #safeToRetry(agent: Agent): boolean {
    return agent.safeToRetry || DETERMINISTIC_BACKENDS.has(agent.backend);
  }

  // ------------------------------------------------------------ sessions

  async createSession(input: NewSession, context: WriteContext): Promise<Session> {
    const workspaceId = this.#workspaceFor(input.workspaceId, context);
    const id = input.sessionId || newId("ses");
    return this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(workspaceId, context, "CreateSession", ""),
        input.idempotency,
        id,
      );
      if (earlier) return toSession(await this.#lockSession(tx, earlier, context.scope));
      const session = await this.#insertSession(tx, {
        id,
        workspaceId,
        agentId: input.agentId ?? "",
        metadata: input.metadata,
        context,
      });
      if (input.initialMessages.length > 0) {
        await this.#appendMessages(tx, session, input.initialMessages, "", context.actor);
      }
      return this.#saveSession(tx, session);
    });
  }

  #workspaceFor(requested: string | undefined, context: WriteContext): string {
    if (context.scope !== undefined) {
      if (requested && requested !== context.scope) throw notFound("workspace", requested);
      return context.scope;
    }
    return requested || DEFAULT_WORKSPACE_ID;
  }

  async #insertSession(
    tx: Tx,
    input: {
      id: string;
      workspaceId: string;
      agentId: string;
      metadata: Record<string, JsonValue> | undefined;
      context: WriteContext;
      fork?: {
        parent: SessionRow;
        branchId: string;
        fromEventId: string;
        /** The parent's last copied message, and how many were copied. */
        fromMessageId?: string;
        messageCount?: bigint;
      };
    },
  ): Promise<LockedSession> {
    await this.#ensureWorkspace(tx, input.workspaceId);
    if (input.agentId) await this.#resolveAgent(tx, input.agentId, input.workspaceId, "agent_id");
    const row = await tx.db
      .insertInto("sessions")
      .values({
        id: input.id,
        workspace_id: input.workspaceId,
        state: SessionState.ACTIVE,
        agent_id: input.agentId,
        root_session_id: input.fork ? input.fork.parent.root_session_id : input.id,
        parent_session_id: input.fork?.parent.id ?? "",
        branch_id: input.fork?.branchId ?? "",
        forked_from_event_id: input.fork?.fromEventId ?? "",
        forked_from_message_id: input.fork?.fromMessageId ?? "",
        forked_message_count: input.fork?.messageCount ?? 0n,
        metadata: jsonText(input.metadata),
      })
      .onConflict((oc) => oc.column("id").doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) throw conflict(`session ${input.id} already exists`, { session_id: input.id });
    this.#emit(
      tx,
      sessionEvent(
        this.#scopeOf(row, input.context.actor),
        "session.created",
        SessionState.ACTIVE,
        SessionState.UNSPECIFIED,
        "created",
      ),
    );
    return row;
  }

  #scopeOf(
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

  async getSession(id: string, scope?: string): Promise<Session> {
    const row = await this.#db
      .selectFrom("sessions")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("session", id);
    return toSession(row);
  }

  async listSessions(
    workspaceId: string,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Session>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    const workspace = scope ?? workspaceId;
    let query = this.#db
      .selectFrom("sessions")
      .selectAll()
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (workspace) query = query.where("workspace_id", "=", workspace);
    return paged(await query.execute(), limit, (r) => r.seq, toSession);
  }

  async closeSession(
    id: string,
    reason: string,
    context: WriteContext,
  ): Promise<{ session: Session; abort: string[] }> {
    return this.#write(async (tx) => {
      const session = await this.#lockSession(tx, id, context.scope);
      if (session.state === SessionState.CLOSED) return { session: toSession(session), abort: [] };
      const open = await tx.db
        .selectFrom("tasks")
        .selectAll()
        .where("session_id", "=", id)
        .where("run_state", "in", NOT_DONE)
        .orderBy("queue_seq")
        .execute();
      const abort: string[] = [];
      for (const row of open) {
        const result = await this.#cancelRow(
          tx,
          session,
          row,
          `session closed${reason ? `: ${reason}` : ""}`,
          context,
        );
        if (result.running) abort.push(row.id);
      }
      const previous = session.state;
      session.state = SessionState.CLOSED;
      this.#emit(
        tx,
        sessionEvent(
          this.#scopeOf(session, context.actor),
          "session.closed",
          SessionState.CLOSED,
          previous,
          reason || "closed",
        ),
      );
      return { session: await this.#saveSession(tx, session), abort };
    });
  }

  async forkSession(
    input: {
      sessionId: string;
      atEventId: string;
      atMessageCount: bigint;
      atMessageId?: string;
      atOrigin?: boolean;
      branchId: string;
      metadata?: Record<string, JsonValue>;
      idempotency?: Idempotency;
    },
    context: WriteContext,
  ): Promise<Session> {
    const id = newId("ses");
    return this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(context.scope ?? "", context, "ForkSession", input.sessionId),
        input.idempotency,
        id,
      );
      if (earlier) return toSession(await this.#lockSession(tx, earlier, context.scope));
      const parent = await this.#lockSession(tx, input.sessionId, context.scope);
      const count = input.atEventId
        ? await this.#transcriptLengthAt(tx, parent, input.atEventId)
        : input.atOrigin
          ? 0n
          : input.atMessageId
            ? await this.#transcriptLengthThrough(tx, parent, input.atMessageId)
            : forkLength(parent.message_count, input.atMessageCount);
      const fromEventId = input.atEventId || (input.atOrigin ? "" : parent.last_event_id);
      const session = await this.#insertSession(tx, {
        id,
        workspaceId: parent.workspace_id,
        agentId: parent.agent_id,
        metadata: input.metadata,
        context,
        fork: {
          parent,
          branchId: input.branchId || newId("br"),
          fromEventId,
          fromMessageId: await this.#messageIdAt(tx, parent.id, count),
          messageCount: count,
        },
      });
      await this.#copyHistory(tx, parent, session, count);
      this.#emit(
        tx,
        sessionEvent(
          this.#scopeOf(session, context.actor),
          "session.thread_forked",
          SessionState.ACTIVE,
          SessionState.UNSPECIFIED,
          `forked from session ${parent.id} at ${fromEventId || "its start"} (${count} messages)`,
        ),
      );
      return this.#saveSession(tx, session);
    });
  }

  /** The id of the message just before position `count` ("" for none). */
  async #messageIdAt(tx: Tx, sessionId: string, count: bigint): Promise<string> {
    if (count <= 0n) return "";
    const row = await tx.db
      .selectFrom("messages")
      .select("id")
      .where("session_id", "=", sessionId)
      .where("position", "=", count - 1n)
      .executeTakeFirst();
    return row?.id ?? "";
  }

  /**
   * Gives a new (locked) session the first `count` messages of `parent`: the
   * fork shares the parent's history — same messages, same ids.
   */
  async #copyHistory(
    tx: Tx,
    parent: SessionRow,
    session: LockedSession,
    count: bigint,
  ): Promise<void> {
    if (count <= 0n) return;
    await sql`
      insert into ${sql.id(this.#schema, "messages")} (id, session_id, position, turn, task_id, role, body, created_at)
      select id, ${session.id}, position, turn, task_id, role, body, created_at
      from ${sql.id(this.#schema, "messages")}
      where session_id = ${parent.id} and position < ${count}
      order by position`.execute(tx.raw);
    const turns = await tx.db
      .selectFrom("messages")
      .select((eb) => eb.fn.countAll<bigint>().as("n"))
      .where("session_id", "=", session.id)
      .where("role", "in", [Role.USER, Role.AGENT])
      .executeTakeFirstOrThrow();
    session.message_count = count;
    session.turn_count = BigInt(turns.n);
  }

  /** The transcript length up to and including message `messageId` of the session. */
  async #transcriptLengthThrough(tx: Tx, session: SessionRow, messageId: string): Promise<bigint> {
    const row = await tx.db
      .selectFrom("messages")
      .select("position")
      .where("session_id", "=", session.id)
      .where("id", "=", messageId)
      .executeTakeFirst();
    if (!row) {
      throw invalidRequest(
        `message ${messageId} is not in the transcript of session ${session.id}`,
        "at_message_id",
      );
    }
    return row.position + 1n;
  }

  /**
   * How long the session's transcript was when `eventId` was emitted: one
   * past the position of the last message event at or before it (0 if none).
   * Read from the outbox, where the session's events are in commit order.
   */
  async #transcriptLengthAt(tx: Tx, session: SessionRow, eventId: string): Promise<bigint> {
    const outbox = outboxTables<TasksDatabase>(tx.raw, this.#outboxSchema);
    const event = await outbox
      .selectFrom("outbox")
      .select(["position", "session_id"])
      .where("id", "=", eventId)
      .executeTakeFirst();
    if (!event || event.session_id !== session.id) {
      throw invalidRequest(
        `event ${eventId} is not an event of session ${session.id}`,
        "at_event_id",
      );
    }
    const last = await outbox
      .selectFrom("outbox")
      .select("body")
      .where("session_id", "=", session.id)
      .where("position", "<=", event.position)
      .where("kind", "in", MESSAGE_EVENT_KINDS)
      .orderBy("position", "desc")
      .limit(1)
      .executeTakeFirst();
    if (!last) return 0n;
    const payload = fromBinary(EventSchema, last.body).payload?.kind;
    const length = payload?.case === "messageAppended" ? payload.value.position + 1n : 0n;
    // A later truncation may have made the transcript shorter than it was then.
    return length < session.message_count ? length : session.message_count;
  }

  async truncateSession(
    id: string,
    keepTurns: bigint,
    context: WriteContext,
  ): Promise<{ session: Session; dropped: bigint }> {
    return this.#write(async (tx) => {
      const session = await this.#lockSession(tx, id, context.scope);
      this.#assertOpen(session);
      const running = await tx.db
        .selectFrom("tasks")
        .select("id")
        .where("session_id", "=", id)
        .where("run_state", "in", ["running", "queued"])
        .limit(1)
        .executeTakeFirst();
      if (running) {
        throw conflict(`session ${id} has a turn running or queued; truncate it when idle`, {
          session_id: id,
          task_id: running.id,
        });
      }
      const next = await tx.db
        .selectFrom("messages")
        .select("position")
        .where("session_id", "=", id)
        .where("role", "in", [Role.USER, Role.AGENT])
        .orderBy("position")
        .offset(Number(keepTurns))
        .limit(1)
        .executeTakeFirst();
      const plan = planTruncation(
        { messageCount: session.message_count, turnCount: session.turn_count },
        keepTurns,
        next?.position,
      );
      if (plan.dropped > 0n) {
        await tx.db
          .deleteFrom("messages")
          .where("session_id", "=", id)
          .where("position", ">=", plan.cut)
          .execute();
      }
      session.message_count = plan.messageCount;
      session.turn_count = plan.turnCount;
      if (plan.dropped > 0n) session.transcript_epoch += 1n;
      this.#emit(
        tx,
        sessionEvent(
          this.#scopeOf(session, context.actor),
          "session.truncated",
          session.state,
          session.state,
          `kept ${plan.turnCount} turns; dropped ${plan.dropped} messages`,
        ),
      );
      return { session: await this.#saveSession(tx, session), dropped: plan.dropped };
    });
  }

  /**
   * llm-provider §3: a tool message answers a tool call of an earlier assistant
   * message of the session (checked under the session lock, so against the
   * transcript it will follow).
   */
  async #assertAnswersToolCall(tx: Tx, sessionId: string, message: Message): Promise<void> {
    const rows = await tx.db
      .selectFrom("messages")
      .select("body")
      .where("session_id", "=", sessionId)
      .where("role", "=", Role.ASSISTANT)
      .execute();
    const earlier = rows.map((row) => decodeMessage(row.body));
    const problem = validateToolCallReference(message, earlier, { path: "input" });
    if (problem) throw invalidRequest(problem.message, problem.path);
  }

  #assertOpen(session: SessionRow): void {
    if (session.state === SessionState.CLOSED || session.state === SessionState.FAILED) {
      throw conflict(`session ${session.id} is ${SessionState[session.state]}`, {
        session_id: session.id,
        session_state: SessionState[session.state] ?? String(session.state),
      });
    }
  }

  async appendMessage(
    sessionId: string,
    message: Message,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<SessionMessage> {
    const prepared = withIds(message);
    return this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(context.scope ?? "", context, "AppendMessage", sessionId),
        idempotency,
        prepared.id,
      );
      if (earlier) {
        const row = await tx.db
          .selectFrom("messages")
          .selectAll()
          .where("session_id", "=", sessionId)
          .where("id", "=", earlier)
          .executeTakeFirst();
        if (row) return toSessionMessage(row);
      }
      const session = await this.#lockSession(tx, sessionId, context.scope);
      this.#assertOpen(session);
      const [appended] = await this.#appendMessages(tx, session, [prepared], "", context.actor);
      await this.#saveSession(tx, session);
      return appended as SessionMessage;
    });
  }

  /** Appends messages at the end of a locked session's transcript, with their events. */
  async #appendMessages(
    tx: Tx,
    session: LockedSession,
    messages: readonly Message[],
    taskId: string,
    actor = SYSTEM_ACTOR,
  ): Promise<SessionMessage[]> {
    if (messages.length === 0) return [];
    const prepared = messages.map(withIds);
    const { turns, turnCount } = assignTurns(session.turn_count, prepared);
    const start = session.message_count;
    const rows = prepared.map((message, i) => ({
      id: message.id,
      session_id: session.id,
      position: start + BigInt(i),
      turn: turns[i] as bigint,
      task_id: taskId,
      role: message.role,
      body: encodeMessage(message),
    }));
    // Written with the session row (see #saveSession).
    tx.pendingMessages.push(...rows);
    session.message_count = start + BigInt(rows.length);
    session.turn_count = turnCount;
    const scope = this.#scopeOf(session, actor);
    prepared.forEach((message, i) => {
      this.#emit(tx, messageEvent(scope, message, start + BigInt(i), taskId));
    });
    return prepared.map((message, i) =>
      create(SessionMessageSchema, {
        message,
        sessionId: session.id,
        position: start + BigInt(i),
        turn: turns[i] as bigint,
        taskId,
      }),
    );
  }

  async listMessages(
    sessionId: string,
    filter: { taskId: string },
    page: PageRequest,
    scope?: string,
  ): Promise<Page<SessionMessage>> {
    await this.getSession(sessionId, scope);
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    let query = this.#db
      .selectFrom("messages")
      .select(["body", "session_id", "position", "turn", "task_id"])
      .where("session_id", "=", sessionId)
      .orderBy("position")
      .limit(limit + 1);
    // Positions start at 0: the token holds position + 1.
    if (after !== undefined) query = query.where("position", ">=", after);
    if (filter.taskId) query = query.where("task_id", "=", filter.taskId);
    return paged(await query.execute(), limit, (r) => r.position + 1n, toSessionMessage);
  }

  async getMessage(id: string, scope?: string): Promise<SessionMessage> {
    let query = this.#db
      .selectFrom("messages as m")
      .innerJoin("sessions as s", "s.id", "m.session_id")
      .select(["m.body", "m.session_id", "m.position", "m.turn", "m.task_id"])
      .where("m.id", "=", id)
      .orderBy("m.seq")
      .limit(1);
    if (scope !== undefined) query = query.where("s.workspace_id", "=", scope);
    const row = await query.executeTakeFirst();
    if (!row) throw notFound("message", id);
    return toSessionMessage(row);
  }

  // ------------------------------------------------------------ tasks

  async submitTask(input: NewTask, context: WriteContext, owner: string): Promise<SubmitResult> {
    const taskId = newId("task");
    const input0 = withIds(input.input);
    return this.#write(async (tx) => {
      const workspaceHint = context.scope ?? input.workspaceId;
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(workspaceHint, context, "SubmitTask", input.sessionId),
        input.idempotency,
        taskId,
      );
      if (earlier) {
        const row = await this.#taskRow(tx.db, earlier, context.scope);
        return { task: toTask(row), replayed: true };
      }
      let session: LockedSession | undefined;
      let created = false;
      if (input.sessionId) {
        const { rows } = await tx.raw.executeQuery<SessionRow>(
          CompiledQuery.raw(this.#hot.lockSession, [input.sessionId]),
        );
        const found = rows[0];
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
        session = await this.#insertSession(tx, {
          id: input.sessionId || newId("ses"),
          workspaceId: this.#workspaceFor(input.workspaceId, context),
          // The new session is bound to the requested agent (harness §3.1).
          agentId: input.agentId,
          metadata: undefined,
          context,
        });
        created = true;
      }
      this.#assertOpen(session);
      if (input0.role === Role.TOOL) await this.#assertAnswersToolCall(tx, session.id, input0);
      // With create_session the request describes the session to get or create:
      // an existing one runs its own agent (harness §3.2), whatever agent_id says.
      const agentId = input.createSession && !created ? "" : input.agentId;
      const agent = await this.#resolveAgent(
        tx,
        agentId || session.agent_id,
        session.workspace_id,
        "agent_id",
      );
      const view = await this.#mailbox(tx, session.id);
      // Decided on the locked session, so "busy" cannot change before commit.
      const decision = decideSubmit(
        input.busyPolicy,
        {
          ...(view.running
            ? {
                running: {
                  id: view.running.id,
                  canceled: cancelRequested(view.running),
                },
              }
            : {}),
          queued: view.head ? 1 : 0,
        },
        session.id,
      );
      if (decision.interrupt && view.running) {
        await this.#cancelRow(tx, session, view.running, `interrupted by task ${taskId}`, context);
      }
      const scope = this.#scopeOf(session, context.actor, input.idempotency?.key);
      this.#emit(tx, taskSubmittedEvent(scope, taskId, agent.id));
      const queueSeq = session.next_queue_seq;
      session.next_queue_seq += 1n;
      let inputPosition: bigint | null = null;
      let status = TaskStatus.SUBMITTED;
      if (decision.runNow) {
        status = transition(TaskStatus.SUBMITTED, TaskStatus.WORKING, taskId);
        this.#emit(
          tx,
          taskStatusEvent(
            this.#scopeOf(session),
            taskId,
            status,
            TaskStatus.SUBMITTED,
            "started",
            undefined,
            agent.id,
          ),
        );
        inputPosition = session.message_count;
        await this.#appendMessages(tx, session, [input0], taskId, context.actor);
      }
      const row = await this.#saveSessionWithTask(tx, session, {
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
      return {
        task,
        replayed: false,
        ...(decision.runNow
          ? { claim: this.#claimOf(task, agent, inputPosition ?? 0n, owner, row, session) }
          : {}),
        ...(decision.interrupt ? { interrupted: decision.interrupt } : {}),
      };
    });
  }

  #leaseUntil() {
    return sql<Date>`now() + make_interval(secs => ${this.#leaseMs / 1000})`;
  }

  #claimOf(
    task: Task,
    agent: Agent,
    inputPosition: bigint,
    owner: string,
    row: TaskRow,
    session: SessionRow,
  ): Claim {
    return {
      task,
      agent,
      safeToRetry: this.#safeToRetry(agent),
      inputPosition,
      transcriptEpoch: session.transcript_epoch,
      leaseOwner: owner,
      ...(row.resume_payload !== null
        ? { resume: { checkpoint: row.checkpoint, payload: row.resume_payload } }
        : {}),
    };
  }

  /** The task holding the session's mailbox, and the head of its queue. */
  async #mailbox(tx: Tx, sessionId: string): Promise<{ running?: TaskRow; head?: TaskRow }> {
    const { rows } = await tx.raw.executeQuery<TaskRow>(
      CompiledQuery.raw(this.#hot.mailbox, [sessionId, "queued", "running", 2]),
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
  async #claimHead(
    tx: Tx,
    session: LockedSession,
    owner: string,
    known?: { running?: TaskRow; head?: TaskRow },
  ): Promise<Claim | undefined> {
    if (session.state === SessionState.CLOSED) return undefined;
    const view = known ?? (await this.#mailbox(tx, session.id));
    if (view.running || !view.head) return undefined;
    const head = view.head;
    const from = head.status as TaskStatus;
    if (from !== TaskStatus.WORKING) {
      transition(from, TaskStatus.WORKING, head.id);
      this.#emit(
        tx,
        taskStatusEvent(
          this.#scopeOf(session),
          head.id,
          TaskStatus.WORKING,
          from,
          isSuspended(from) ? "resumed after its signal arrived" : "started",
          undefined,
          head.agent_id,
        ),
      );
    }
    let inputPosition = head.input_position;
    if (inputPosition === null) {
      inputPosition = session.message_count;
      const input = fromBinary(MessageSchemaForInput, head.input);
      await this.#appendMessages(tx, session, [input], head.id, creatorActor(head.created_by));
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
    const agent = await this.#resolveAgent(tx, row.agent_id, row.workspace_id, "agent_id");
    return this.#claimOf(toTask(row), agent, inputPosition, owner, row, session);
  }

  async #taskRow(
    db: Kysely<TasksDatabase> | Transaction<TasksDatabase>,
    id: string,
    scope: string | undefined,
  ): Promise<TaskRow> {
    const row = await db.selectFrom("tasks").selectAll().where("id", "=", id).executeTakeFirst();
    if (!visible(row, scope)) throw notFound("task", id);
    return row;
  }

  async getTask(id: string, scope?: string): Promise<Task> {
    return toTask(await this.#taskRow(this.#db, id, scope));
  }

  async listTasks(filter: TaskFilter, page: PageRequest, scope?: string): Promise<Page<Task>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    const workspace = scope ?? filter.workspaceId;
    let query = this.#db
      .selectFrom("tasks")
      .selectAll()
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (workspace) query = query.where("workspace_id", "=", workspace);
    if (filter.sessionId) query = query.where("session_id", "=", filter.sessionId);
    if (filter.parentTaskId) query = query.where("parent_task_id", "=", filter.parentTaskId);
    if (filter.waitingSignalId) {
      query = query
        .where("signal_id", "=", filter.waitingSignalId)
        .where("run_state", "=", "waiting");
    }
    if (filter.statuses.length > 0) query = query.where("status", "in", filter.statuses);
    return paged(await query.execute(), limit, (r) => r.seq, toTask);
  }

  async listOpenChildTasks(parentTaskId: string, scope?: string): Promise<string[]> {
    let query = this.#db
      .selectFrom("tasks")
      .select("id")
      .where("parent_task_id", "=", parentTaskId)
      .where("status", "not in", [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED])
      .orderBy("seq");
    if (scope) query = query.where("workspace_id", "=", scope);
    return (await query.execute()).map((r) => r.id);
  }

  async cancelTask(
    id: string,
    reason: string,
    context: WriteContext,
    owner: string,
  ): Promise<CancelResult> {
    const found = await this.#taskRow(this.#db, id, context.scope);
    return this.#write(async (tx) => {
      const session = await this.#lockSession(tx, found.session_id, undefined);
      const row = await this.#taskRow(tx.db, id, context.scope);
      if (row.status === TaskStatus.CANCELED || cancelRequested(row)) {
        // Cancel is idempotent: the first one won, nothing replaces it.
        return { task: toTask(row), running: row.run_state === "running" };
      }
      const result = await this.#cancelRow(
        tx,
        session,
        row,
        reason || "canceled by request",
        context,
      );
      const claim = await this.#claimHead(tx, session, owner);
      await this.#saveSession(tx, session);
      return { ...result, ...(claim ? { claim } : {}) };
    });
  }

  /**
   * Cancels a task of a locked session (user.cancel_requested, task.canceled).
   * A running task keeps the mailbox until its runner closes its transcript;
   * any other is finished here: pending messages plus synthetic tool results
   * join the transcript, and it gets its Outcome.
   */
  async #cancelRow(
    tx: Tx,
    session: LockedSession,
    row: TaskRow,
    reason: string,
    context: WriteContext,
  ): Promise<{ task: Task; running: boolean }> {
    const from = row.status as TaskStatus;
    transition(from, TaskStatus.CANCELED, row.id);
    const scope = this.#scopeOf(session, context.actor);
    this.#emit(
      tx,
      signalEvent(scope, "user.cancel_requested", row.id, row.signal_id ?? "", {
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
    const updated = await this.#finalize(tx, session, row, {
      status: TaskStatus.CANCELED,
      extra: [],
      note: "the task was canceled",
      event: canceled,
    });
    return { task: toTask(updated), running: false };
  }

  /**
   * Ends a task of a locked session for good: its output (pending messages of
   * a suspension, then `extra`, then synthetic results for open tool calls)
   * joins the transcript — only if the task ever started — and it gets an
   * Outcome. `status` is the terminal status it ends in (already recorded or
   * recorded now).
   */
  async #finalize(tx: Tx, session: LockedSession, row: TaskRow, end: TaskEnd): Promise<TaskRow> {
    return this.#updateTask(tx, await this.#finalChange(tx, session, row, end));
  }

  /** Writes a task change now (see {@link #saveSessionWithTask} to write it with the session). */
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
    const appended = await this.#appendMessages(
      tx,
      session,
      output,
      row.id,
      agentActor(row.agent_id),
    );
    const messages = [...earlier, ...appended.map((m) => m.message as Message)];
    // Before the lifecycle event: whoever issues a receipt on task.completed has it.
    if (row.parent_task_id !== "") await this.#emitReplayEnd(tx, session, row, end, messages);
    if (end.event) this.#emit(tx, end.event);
    const outcomeId = row.outcome_id || newId("out");
    if (!row.outcome_id) {
      tx.pendingOutcomes.push({
        id: outcomeId,
        task_id: row.id,
        session_id: row.session_id,
        workspace_id: row.workspace_id,
        status:
          end.status === TaskStatus.COMPLETED
            ? OutcomeStatus.SUCCEEDED
            : end.status === TaskStatus.CANCELED
              ? OutcomeStatus.CANCELED
              : OutcomeStatus.FAILED,
        summary: summarize(messages, end.failure?.message ?? end.note),
        messages: encodeMessages(messages),
        artifact_ids: "[]",
      });
    }
    const failure = end.failure
      ? toBinary(
          TaskFailureSchema,
          create(TaskFailureSchema, {
            ...end.failure,
            detail: create(ErrorDetailSchema, {
              reason: end.failure.category,
              domain: "tasks.trellis.dev",
              metadata: { task_id: row.id },
            }),
          }),
        )
      : row.failure;
    return {
      kind: "update",
      id: row.id,
      set: {
        status: end.status,
        run_state: "done",
        output: encodeMessages(messages),
        outcome_id: outcomeId,
        failure,
        suspension: null,
        signal_id: null,
        checkpoint: null,
        resume_payload: null,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: NOW,
        ...(end.status === TaskStatus.CANCELED
          ? row.canceled_at
            ? {}
            : { canceled_at: NOW }
          : { completed_at: NOW }),
      },
    };
  }

  async deliverSignal(
    signal: { signalId: string; deliveryId: string; payload: JsonValue },
    context: WriteContext,
    owner: string,
  ): Promise<DeliverResult> {
    const deliveryId = signal.deliveryId || signal.signalId;
    const seen = await this.#db
      .selectFrom("signal_deliveries")
      .select("task_id")
      .where("delivery_id", "=", deliveryId)
      .executeTakeFirst();
    if (seen) return this.#duplicateDelivery(seen.task_id, context.scope);
    const waiting = await this.#db
      .selectFrom("tasks")
      .select(["id", "session_id", "workspace_id"])
      .where("signal_id", "=", signal.signalId)
      .where("run_state", "=", "waiting")
      .executeTakeFirst();
    if (!waiting || (context.scope !== undefined && waiting.workspace_id !== context.scope)) {
      throw notFound("signal", signal.signalId);
    }
    const result = await this.#write(async (tx): Promise<DeliverResult | "duplicate"> => {
      const session = await this.#lockSession(tx, waiting.session_id, undefined);
      const recorded = await tx.db
        .insertInto("signal_deliveries")
        .values({
          delivery_id: deliveryId,
          signal_id: signal.signalId,
          task_id: waiting.id,
          payload: JSON.stringify(signal.payload ?? null),
        })
        .onConflict((oc) => oc.column("delivery_id").doNothing())
        .returning("delivery_id")
        .executeTakeFirst();
      if (!recorded) return "duplicate";
      const row = await this.#taskRow(tx.db, waiting.id, undefined);
      if (row.run_state !== "waiting" || row.signal_id !== signal.signalId) {
        throw notFound("signal", signal.signalId);
      }
      const meaning = classifySignal(signal.payload);
      if (meaning.cancel) {
        const canceled = await this.#cancelRow(tx, session, row, "canceled by signal", context);
        await this.#saveSession(tx, session);
        return { taskId: row.id, duplicate: false, task: canceled.task };
      }
      this.#emit(
        tx,
        signalEvent(
          this.#scopeOf(session, context.actor),
          meaning.eventKind,
          row.id,
          signal.signalId,
          signal.payload,
        ),
      );
      // Back in the queue at its original place; it becomes WORKING when claimed.
      await tx.db
        .updateTable("tasks")
        .set({
          run_state: "queued",
          signal_id: null,
          resume_payload: JSON.stringify(signal.payload ?? null),
          updated_at: NOW,
        })
        .where("id", "=", row.id)
        .execute();
      const claim = await this.#claimHead(tx, session, owner);
      await this.#saveSession(tx, session);
      const task =
        claim?.task.id === row.id
          ? claim.task
          : toTask(await this.#taskRow(tx.db, row.id, undefined));
      return { taskId: row.id, duplicate: false, task, ...(claim ? { claim } : {}) };
    });
    if (result === "duplicate") return this.#duplicateDelivery(waiting.id, context.scope);
    return result;
  }

  async #duplicateDelivery(taskId: string, scope: string | undefined): Promise<DeliverResult> {
    const row = await this.#db
      .selectFrom("tasks")
      .selectAll()
      .where("id", "=", taskId)
      .executeTakeFirst();
    if (!visible(row, scope)) {
      return { taskId: "", duplicate: true };
    }
    return { taskId, duplicate: true, task: toTask(row) };
  }

  // ------------------------------------------------------------ mailbox

  async claimNext(sessionId: string, owner: string): Promise<Claim | undefined> {
    return this.#write(async (tx) => {
      const session = await this.#lockSession(tx, sessionId, undefined);
      const claim = await this.#claimHead(tx, session, owner);
      if (claim) await this.#saveSession(tx, session);
      return claim;
    });
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
    await this.#write(async (tx) => {
      for (const item of items) {
        this.#emit(tx, dataEvent(scope, item.kind, resource, task.id, item.data));
      }
    });
  }

  async finishRun(claim: Claim, outcome: RunOutcome, owner: string): Promise<FinishResult> {
    return this.#write(async (tx): Promise<FinishResult> => {
      const session = await this.#lockSession(tx, claim.task.sessionId, undefined);
      // This run's task and the head of the queue, in one read (under the session lock).
      const { rows } = await tx.raw.executeQuery<TaskRow>(
        CompiledQuery.raw(this.#hot.finishedRun, [
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
      const change =
        row.status === TaskStatus.CANCELED || cancelRequested(row)
          ? // A requested cancel is recorded now that the runner is done with the backend.
            await this.#finalChange(tx, session, row, {
              status: TaskStatus.CANCELED,
              extra: outcome.messages,
              note: "the turn was canceled",
              ...this.#canceledEvent(
                session,
                row,
                cancelEndReason(row.cancel_reason, outcome.cancelConfirmed ?? true),
              ),
            })
          : await this.#outcomeChange(tx, session, row, outcome);
      if (head === undefined || session.state === SessionState.CLOSED) {
        // Nothing to claim next: the task's row is written with the session.
        const updated = await this.#saveSessionWithTask(tx, session, change);
        return {
          applied: true,
          task: toTask(updated),
          transcriptLength: session.message_count,
        };
      }
      const updated = await this.#updateTask(tx, change);
      const next = await this.#claimHead(tx, session, owner, { head });
      const saved = await this.#saveSession(tx, session);
      return {
        applied: true,
        task: toTask(updated),
        transcriptLength: saved.messageCount,
        ...(next ? { next } : {}),
      };
    });
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
    const scope = this.#scopeOf(session, agentActor(row.agent_id));
    switch (outcome.status) {
      case "completed": {
        transition(from, TaskStatus.COMPLETED, row.id);
        return this.#finalChange(tx, session, row, {
          status: TaskStatus.COMPLETED,
          extra: outcome.messages,
          note: "the turn ended without its result",
          event: taskStatusEvent(scope, row.id, TaskStatus.COMPLETED, from, "completed"),
        });
      }
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
        const appended = await this.#appendMessages(
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
        this.#emit(tx, waitEvent);
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
      case "failed": {
        transition(from, TaskStatus.FAILED, row.id);
        const failure = {
          category: outcome.category,
          message: outcome.message,
          retryable: outcome.retryable,
        };
        return this.#finalChange(tx, session, row, {
          status: TaskStatus.FAILED,
          extra: outcome.messages,
          note: "the turn failed",
          failure,
          event: taskStatusEvent(
            scope,
            row.id,
            TaskStatus.FAILED,
            from,
            outcome.message,
            create(ErrorDetailSchema, { reason: outcome.category, domain: "tasks.trellis.dev" }),
          ),
        });
      }
      case "cancelled": {
        transition(from, TaskStatus.CANCELED, row.id);
        return this.#finalChange(tx, session, row, {
          status: TaskStatus.CANCELED,
          extra: outcome.messages,
          note: "the turn was canceled",
          event: taskStatusEvent(
            scope,
            row.id,
            TaskStatus.CANCELED,
            from,
            "the agent canceled the turn",
          ),
        });
      }
    }
  }

  /** task.canceled for a requested cancel being recorded (none when CANCELED already is). */
  #canceledEvent(session: LockedSession, row: TaskRow, reason: string): { event?: Event } {
    const from = row.status as TaskStatus;
    if (from === TaskStatus.CANCELED) return {};
    transition(from, TaskStatus.CANCELED, row.id);
    return {
      event: taskStatusEvent(this.#scopeOf(session), row.id, TaskStatus.CANCELED, from, reason),
    };
  }

  async renewLeases(owner: string, taskIds: readonly string[], leaseMs: number): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const rows = await this.#db
      .updateTable("tasks")
      .set({ lease_expires_at: sql<Date>`now() + make_interval(secs => ${leaseMs / 1000})` })
      .where("id", "in", [...taskIds])
      .where("lease_owner", "=", owner)
      .where("run_state", "=", "running")
      .returning(["id", "status", "canceled_at"])
      .execute();
    const held = new Map(rows.map((r) => [r.id, r]));
    return taskIds.filter((id) => {
      const row = held.get(id);
      return row === undefined || row.status === TaskStatus.CANCELED || row.canceled_at !== null;
    });
  }

  async releaseRun(claim: Claim, owner: string, reason: string): Promise<void> {
    await this.#write(async (tx) => {
      const session = await this.#lockSession(tx, claim.task.sessionId, undefined);
      const row = await tx.db
        .selectFrom("tasks")
        .selectAll()
        .where("id", "=", claim.task.id)
        .executeTakeFirst();
      if (row?.run_state !== "running" || row.lease_owner !== owner) return;
      await this.#recover(tx, session, row, reason);
      await this.#saveSession(tx, session);
    });
  }

  /** A run whose worker is gone: closed if canceled, re-queued when safe to retry, else failed. */
  async #recover(tx: Tx, session: LockedSession, row: TaskRow, reason: string): Promise<void> {
    const agent = await this.#loadAgent(tx, row.agent_id);
    const safe = agent !== undefined && this.#safeToRetry(agent);
    const action = recoveryAction(
      { canceled: row.status === TaskStatus.CANCELED || cancelRequested(row) },
      safe,
    );
    const scope = this.#scopeOf(session);
    switch (action) {
      case "finalize_canceled":
        await this.#finalize(tx, session, row, {
          status: TaskStatus.CANCELED,
          extra: [],
          note: "the turn was canceled",
          ...this.#canceledEvent(session, row, cancelEndReason(row.cancel_reason, false, reason)),
        });
        return;
      case "requeue":
        this.#emit(
          tx,
          taskNoteEvent(
            scope,
            row.id,
            row.status as TaskStatus,
            `re-queued: ${reason}; agent ${row.agent_id} is safe to retry`,
          ),
        );
        await tx.db
          .updateTable("tasks")
          .set({
            run_state: "queued",
            lease_owner: null,
            lease_expires_at: null,
            updated_at: NOW,
          })
          .where("id", "=", row.id)
          .execute();
        tx.changed.set(row.id, undefined);
        return;
      case "fail": {
        const from = row.status as TaskStatus;
        transition(from, TaskStatus.FAILED, row.id);
        const message = `${reason}; agent ${row.agent_id} is not safe to retry, so the turn was not run again`;
        await this.#finalize(tx, session, row, {
          status: TaskStatus.FAILED,
          extra: [],
          note: "the worker running the turn was lost",
          failure: { category: "worker_lost", message, retryable: true },
          event: taskStatusEvent(
            scope,
            row.id,
            TaskStatus.FAILED,
            from,
            message,
            create(ErrorDetailSchema, { reason: "worker_lost", domain: "tasks.trellis.dev" }),
          ),
        });
        return;
      }
    }
  }

  async recoverExpired(owner: string, limit: number): Promise<Claim[]> {
    const expired = await this.#db
      .selectFrom("tasks")
      .select(["id", "session_id"])
      .where("run_state", "=", "running")
      .where("lease_expires_at", "<", NOW)
      .limit(limit)
      .execute();
    const claims: Claim[] = [];
    for (const candidate of expired) {
      const claim = await this.#write(async (tx) => {
        const session = await this.#lockSession(tx, candidate.session_id, undefined);
        const row = await tx.db
          .selectFrom("tasks")
          .selectAll()
          .where("id", "=", candidate.id)
          .where("run_state", "=", "running")
          .where("lease_expires_at", "<", NOW)
          .executeTakeFirst();
        if (!row) return undefined;
        await this.#recover(
          tx,
          session,
          row,
          `its worker ${row.lease_owner ?? "?"} was lost (lease expired)`,
        );
        const next = await this.#claimHead(tx, session, owner);
        await this.#saveSession(tx, session);
        return next;
      });
      if (claim) claims.push(claim);
    }
    return claims;
  }

  async sessionsWithQueuedWork(limit: number): Promise<string[]> {
    const rows = await this.#db
      .selectFrom("tasks as q")
      .select("q.session_id")
      .distinct()
      .where("q.run_state", "=", "queued")
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("tasks as r")
              .select("r.id")
              .whereRef("r.session_id", "=", "q.session_id")
              .where("r.run_state", "=", "running"),
          ),
        ),
      )
      .limit(limit)
      .execute();
    return rows.map((r) => r.session_id);
  }

  async loadTranscript(sessionId: string, from: bigint, to: bigint): Promise<Message[]> {
    if (to <= from) return [];
    let query = this.#db
      .selectFrom("messages")
      .select("body")
      .where("session_id", "=", sessionId)
      .where("position", "<", to)
      .orderBy("position");
    if (from > 0n) query = query.where("position", ">=", from);
    const rows = await query.execute();
    return rows.map((r) => fromBinary(MessageSchemaForInput, r.body));
  }

  // ------------------------------------------------------------ replays

  async getReplaySource(taskId: string, scope?: string): Promise<ReplaySource> {
    const row = await this.#taskRow(this.#db, taskId, scope);
    const task = toTask(row);
    const agent = await this.#loadAgent(undefined, row.agent_id);
    if (!agent) throw notFound("agent", row.agent_id);
    let historyIntact = false;
    if (row.input_position !== null) {
      const at = await this.#db
        .selectFrom("messages")
        .select("id")
        .where("session_id", "=", row.session_id)
        .where("position", "=", row.input_position)
        .executeTakeFirst();
      historyIntact = at !== undefined && at.id === task.input?.id;
    }
    const checkpoints = await this.#db
      .selectFrom("task_checkpoints")
      .selectAll()
      .where("task_id", "=", taskId)
      .orderBy("seq")
      .execute();
    const deliveries = await this.#db
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
    return this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(context.scope ?? "", context, "ReplayTask", plan.sourceTaskId),
        input.idempotency,
        taskId,
      );
      if (earlier) {
        const row = await this.#taskRow(tx.db, earlier, context.scope);
        const session = await this.#lockSession(tx, row.session_id, context.scope);
        return { task: toTask(row), session: toSession(session), replayed: true };
      }
      const source = await this.#taskRow(tx.db, plan.sourceTaskId, context.scope);
      const parent = await this.#lockSession(tx, source.session_id, context.scope);
      if (parent.message_count < input.forkCount) {
        throw replayUnavailable(
          plan.sourceTaskId,
          "transcript",
          `session ${parent.id} no longer holds the ${input.forkCount} messages the replay starts from (it was truncated)`,
        );
      }
      const agent = await this.#resolveAgent(tx, source.agent_id, source.workspace_id, "task_id");
      const session = await this.#insertSession(tx, {
        id: sessionId,
        workspaceId: parent.workspace_id,
        agentId: agent.id,
        metadata: { [REPLAY_KEY]: { source_task_id: plan.sourceTaskId, replay_task_id: taskId } },
        context,
        fork: {
          parent,
          branchId: newId("br"),
          fromEventId: input.forkEventId,
          fromMessageId: await this.#messageIdAt(tx, parent.id, input.forkCount),
          messageCount: input.forkCount,
        },
      });
      await this.#copyHistory(tx, parent, session, input.forkCount);
      this.#emit(
        tx,
        sessionEvent(
          this.#scopeOf(session, context.actor),
          "session.thread_forked",
          SessionState.ACTIVE,
          SessionState.UNSPECIFIED,
          `forked from session ${parent.id} to replay task ${plan.sourceTaskId} (${input.forkCount} messages)`,
        ),
      );
      const scope = this.#scopeOf(session, context.actor, input.idempotency?.key);
      this.#emit(tx, taskSubmittedEvent(scope, taskId, agent.id));
      // Harn "replay.started": what is replayed, how, with which substitutions
      // (keys and hashes only: override values may be secrets; a secret's
      // only as its keyed fingerprint).
      this.#emit(
        tx,
        dataEvent(scope, "replay.started", { object: "task", id: taskId }, taskId, {
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
          idempotency_key: input.idempotency?.key ?? "",
          metadata: jsonText(input.metadata),
          ...(input.restore
            ? {
                checkpoint: JSON.stringify(input.restore.checkpoint ?? null),
                resume_payload: JSON.stringify(input.restore.payload ?? null),
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
      const claim = await this.#claimHead(tx, session, owner);
      const saved = await this.#saveSession(tx, session);
      return {
        task: claim?.task ?? toTask(inserted),
        session: saved,
        replayed: false,
        ...(claim ? { claim } : {}),
      };
    });
  }

  async getReplay(replayTaskId: string): Promise<ReplayRecord | undefined> {
    const row = await this.#db
      .selectFrom("replays")
      .selectAll()
      .where("task_id", "=", replayTaskId)
      .executeTakeFirst();
    if (!row) return undefined;
    const plan = row.plan as unknown as ReplayPlan;
    const source = await this.#db
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
  async #emitReplayEnd(
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
    const kind = end.status === TaskStatus.COMPLETED ? "replay.completed" : "replay.failed";
    this.#emit(
      tx,
      dataEvent(
        this.#scopeOf(session, agentActor(row.agent_id)),
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

  // ------------------------------------------------------------ events

  async findEvent(id: string, scope?: string): Promise<Event | undefined> {
    const row = await outboxTables(this.#kysely, this.#outboxSchema)
      .selectFrom("outbox")
      .select(["body", "workspace_id"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) return undefined;
    return fromBinary(EventSchema, row.body);
  }

  // ------------------------------------------------------------ outcomes

  async getOutcome(id: string, scope?: string): Promise<Outcome> {
    const row = await this.#db
      .selectFrom("outcomes")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("outcome", id);
    return toOutcome(row);
  }

  async listOutcomes(
    filter: ResourceFilter,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Outcome>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    const workspace = scope ?? filter.workspaceId;
    let query = this.#db
      .selectFrom("outcomes")
      .selectAll()
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (workspace) query = query.where("workspace_id", "=", workspace);
    if (filter.sessionId) query = query.where("session_id", "=", filter.sessionId);
    if (filter.taskId) query = query.where("task_id", "=", filter.taskId);
    return paged(await query.execute(), limit, (r) => r.seq, toOutcome);
  }

  // ------------------------------------------------------------ artifacts

  async registerArtifact(
    artifact: Artifact,
    content: Uint8Array,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Artifact> {
    const workspaceId = this.#workspaceFor(artifact.workspaceId, context);
    if (content.length === 0 && !artifact.uri) {
      throw invalidRequest("an artifact needs content or a uri", "content");
    }
    if (content.length > this.#maxArtifactBytes) {
      throw payloadTooLarge(
        `artifact content is ${content.length} bytes; the limit is ${this.#maxArtifactBytes} (register larger content by uri)`,
        "content",
      );
    }
    const id = newId("art");
    const sha256 =
      content.length > 0
        ? `sha256:${createHash("sha256").update(content).digest("hex")}`
        : artifact.sha256;
    const createdId = await this.#write(async (tx) => {
      const earlier = await this.#reserveKey(
        tx,
        this.#keyScope(workspaceId, context, "RegisterArtifact", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      await this.#ensureWorkspace(tx, workspaceId);
      if (artifact.sessionId) {
        const session = await tx.db
          .selectFrom("sessions")
          .select("workspace_id")
          .where("id", "=", artifact.sessionId)
          .executeTakeFirst();
        if (!session || session.workspace_id !== workspaceId)
          throw notFound("session", artifact.sessionId);
      }
      if (artifact.taskId) {
        const task = await tx.db
          .selectFrom("tasks")
          .select(["workspace_id", "session_id"])
          .where("id", "=", artifact.taskId)
          .executeTakeFirst();
        if (!task || task.workspace_id !== workspaceId) throw notFound("task", artifact.taskId);
        if (artifact.sessionId && task.session_id !== artifact.sessionId) {
          throw invalidRequest("the task is not in that session", "artifact.task_id");
        }
      }
      await tx.db
        .insertInto("artifacts")
        .values({
          id,
          workspace_id: workspaceId,
          session_id: artifact.sessionId,
          task_id: artifact.taskId,
          kind: artifact.kind === ArtifactKind.UNSPECIFIED ? ArtifactKind.OTHER : artifact.kind,
          name: artifact.name,
          mime_type: artifact.mimeType || "application/octet-stream",
          uri: artifact.uri,
          visibility: artifact.visibility,
          sha256,
          size_bytes: content.length > 0 ? BigInt(content.length) : artifact.sizeBytes,
          content: content.length > 0 ? content : null,
          metadata: jsonText(artifact.metadata),
        })
        .execute();
      this.#emit(
        tx,
        dataEvent(
          { workspaceId, sessionId: artifact.sessionId, actor: context.actor },
          "artifact.created",
          { object: "artifact", id },
          artifact.taskId,
          { artifact_id: id, name: artifact.name, sha256, size_bytes: String(content.length) },
        ),
      );
      return id;
    });
    return this.getArtifact(createdId, context.scope);
  }

  async getArtifact(id: string, scope?: string): Promise<Artifact> {
    const row = await this.#db
      .selectFrom("artifacts")
      .select(ARTIFACT_COLUMNS)
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("artifact", id);
    return toArtifact(row);
  }

  async listArtifacts(
    filter: ResourceFilter,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Artifact>> {
    const limit = pageLimit(page.pageSize);
    const after = pageAfter(page.pageToken);
    const workspace = scope ?? filter.workspaceId;
    let query = this.#db
      .selectFrom("artifacts")
      .select(ARTIFACT_COLUMNS)
      .orderBy("seq")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("seq", ">", after);
    if (workspace) query = query.where("workspace_id", "=", workspace);
    if (filter.sessionId) query = query.where("session_id", "=", filter.sessionId);
    if (filter.taskId) query = query.where("task_id", "=", filter.taskId);
    return paged(await query.execute(), limit, (r) => r.seq, toArtifact);
  }

  async getArtifactContent(
    id: string,
    scope?: string,
  ): Promise<{ content: Uint8Array; mimeType: string }> {
    const row = await this.#db
      .selectFrom("artifacts")
      .select(["workspace_id", "content", "mime_type"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("artifact", id);
    return { content: row.content ?? new Uint8Array(0), mimeType: row.mime_type };
  }

  /** The database this store runs on (for LISTEN and health). */
  get database(): Database<unknown> {
    return this.#database;
  }
}
