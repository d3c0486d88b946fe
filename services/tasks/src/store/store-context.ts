/**
 * What the tasks store's modules share: the database handles, the schemas,
 * the options and the caches ({@link StoreContext}), and a few small helpers
 * every module uses.
 */
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { Message } from "@trellis/contracts/core";
import type { Agent, Task } from "@trellis/contracts/tasks";
import type { Database, OutboxWriter, Projector } from "@trellis/storage";
import { type Kysely, sql, type Transaction } from "kysely";
import { SYSTEM_ACTOR, userActor } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import type { TasksDatabase } from "./schema.js";

/** The state every module of the store reads (built once by `PostgresTaskStore`). */
export interface StoreContext {
  readonly database: Database<unknown>;
  /** Unscoped (for the outbox and hand-written statements). */
  readonly kysely: Kysely<TasksDatabase>;
  /** Scoped to the service's schema (built once: withSchema creates a new instance). */
  readonly db: Kysely<TasksDatabase>;
  readonly schema: string;
  readonly outbox: OutboxWriter;
  readonly outboxSchema: string;
  /** How long a claim lasts without renewal. */
  readonly leaseMs: number;
  readonly maxArtifactBytes: number;
  readonly onCommit: ((changes: CommittedChanges) => void) | undefined;
  readonly hot: HotStatements;
  /** Agents are immutable once created, so they are cached for good. */
  readonly agents: Map<string, Agent>;
  readonly defaultAgentOf: Map<string, string>;
  /** The turn journal, when on (TRELLIS_TASKS_JOURNAL): steps are appended to it. */
  readonly journal: StoreJournal | undefined;
  /** Distributed owner mode: the session lease check of a write (see `PostgresTaskStoreOptions`). */
  readonly sessionFence?: SessionFence | undefined;
}

/**
 * Checks in a write's transaction that this replica may still write the
 * session of `stream` (its `sessionStream`; throws if not).
 */
export type SessionFence = (trx: Transaction<TasksDatabase>, stream: string) => Promise<void>;

/** The tasks a committed write changed, with their new state when the write knew it. */
export interface CommittedChanges {
  readonly taskIds: readonly string[];
  /** The task as committed (computed on demand), or undefined when it must be read back. */
  snapshot(taskId: string): Task | undefined;
}

/**
 * The texts of the statements every turn runs, written once per store (the
 * same text kysely compiled them to): building and compiling them per call
 * cost more than the database spent on them.
 */
export interface HotStatements {
  /** `$1` workspace id, `$2` session id (session ids are unique per workspace). */
  lockSession: string;
  /** By id alone: `$1` session id, `$2` the preferred workspace, `$3` 1. */
  lockSessionById: string;
  /**
   * The running task and the queue's head: `$1` workspace id, `$2` session
   * id, `$3` 'queued', `$4` 'running', `$5` 2.
   */
  mailbox: string;
  /**
   * A finished run's task and the queue's head: `$1` workspace id, `$2`
   * session id, `$3` task id, `$4` 'queued', `$5` task id, `$6` 2.
   */
  finishedRun: string;
}

/** The store's side of the turn journal (see step-records.ts, read-model.ts). */
export interface StoreJournal {
  /** The `tasks-read-model` projector: reads of what it projects wait for it. */
  readonly readModel: Projector;
  /** Take the journal's transaction lock (PostgreSQL). */
  readonly lock: boolean;
  /** NOTIFY other replicas' projectors at commit (PostgreSQL). */
  readonly notify: boolean;
}

/** `now()`, one fragment for every statement that sets a timestamp. */
export const NOW = sql<Date>`now()`;

/**
 * Whether a row is visible to a caller scoped to `scope` (undefined: an
 * internal call, which sees every workspace). A row in another workspace is
 * reported exactly like a missing one, never as forbidden.
 */
export function visible<R extends { workspace_id: string }>(
  row: R | undefined,
  scope: string | undefined,
): row is R {
  return row !== undefined && (scope === undefined || row.workspace_id === scope);
}

/** A copy of a message with its id and time filled in when empty. */
export function withIds(message: Message): Message {
  const copy = { ...message };
  if (!copy.id) copy.id = newId("msg");
  copy.createdAt ??= timestampNow();
  return copy;
}

/** The actor of a task's creator (the system for tasks nobody submitted). */
export function creatorActor(createdBy: string) {
  return createdBy && createdBy !== SYSTEM_ACTOR.id ? userActor(createdBy) : SYSTEM_ACTOR;
}
