/**
 * Tables of the tasks service (schema `tasks`, or the service's own schema).
 * `XTable` is the kysely shape; `XRow` what a select returns.
 *
 * Conventions: `seq` (bigserial) is the stable listing order and the page
 * cursor; proto messages kept whole are protobuf binary (`bytea`); JSON
 * documents (`metadata`, agent definitions, signal payloads) are `jsonb`,
 * written as JSON text; enums are their proto numbers.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { ColumnType, Generated, Selectable } from "kysely";

/** A jsonb column: read as parsed JSON, written as JSON text. */
export type Jsonb<T = JsonObject> = ColumnType<T, string, string>;
/** A nullable jsonb column. */
export type NullableJsonb<T = JsonValue> = ColumnType<T | null, string | null, string | null>;
/** A jsonb column with a database default: optional on insert. */
export type JsonbDefault<T = JsonObject> = ColumnType<T, string | undefined, string>;
/** A column with a database default: optional on insert. */
export type Defaulted<T> = ColumnType<T, T | undefined, T>;
/** A timestamptz column the database fills on insert. */
export type CreatedAt = ColumnType<Date, Date | undefined, Date>;

export interface WorkspaceTable {
  seq: Generated<bigint>;
  id: string;
  name: string;
  root: Defaulted<string>;
  default_branch_id: Defaulted<string>;
  /** Agent used when a session or task names none. */
  default_agent_id: Defaulted<string>;
  metadata: JsonbDefault;
  created_at: CreatedAt;
  updated_at: CreatedAt;
  /** When the workspace was archived (it takes no new sessions); null while active. */
  archived_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface AgentTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  name: string;
  version: Defaulted<string>;
  description: Defaulted<string>;
  backend: string;
  tools: Jsonb<string[]>;
  autonomy_tier: Defaulted<number>;
  receipt_policy: Defaulted<number>;
  definition: Jsonb;
  safe_to_retry: Defaulted<boolean>;
  metadata: JsonbDefault;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface SessionTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  /** trellis.core.v1.SessionState */
  state: number;
  agent_id: Defaulted<string>;
  root_session_id: string;
  parent_session_id: Defaulted<string>;
  branch_id: Defaulted<string>;
  forked_from_event_id: Defaulted<string>;
  /** A fork's last message copied from its parent ("" when none was). */
  forked_from_message_id: Defaulted<string>;
  /** How many of the parent's messages a fork started with. */
  forked_message_count: Defaulted<bigint>;
  summary: Defaulted<string>;
  last_event_id: Defaulted<string>;
  metadata: JsonbDefault;
  /** Bumped whenever messages are dropped (truncate), so cached transcripts know they are stale. */
  transcript_epoch: Defaulted<bigint>;
  /** Transcript length: the next message's position. */
  message_count: Defaulted<bigint>;
  turn_count: Defaulted<bigint>;
  /** The mailbox's arrival counter: the next task's queue_seq. */
  next_queue_seq: Defaulted<bigint>;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface MessageTable {
  seq: Generated<bigint>;
  /** The message id; a fork shares its parent's messages, ids included. */
  id: string;
  /** The session's workspace (session ids are unique per workspace). */
  workspace_id: string;
  session_id: string;
  position: bigint;
  turn: bigint;
  /** The task that produced it ("" when appended directly). */
  task_id: Defaulted<string>;
  /** trellis.core.v1.Role */
  role: number;
  /** trellis.core.v1.Message, binary. */
  body: Uint8Array;
  created_at: CreatedAt;
}

export interface TaskTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  session_id: string;
  agent_id: string;
  /** trellis.core.v1.TaskStatus */
  status: number;
  /** The mailbox state: queued | running | waiting | done (see domain/mailbox.ts). */
  run_state: string;
  /** Arrival order inside the session's mailbox. */
  queue_seq: bigint;
  /** trellis.core.v1.Message, binary. */
  input: Uint8Array;
  /** Where the input sits in the transcript; null until the task first starts. */
  input_position: bigint | null;
  created_by: Defaulted<string>;
  branch_id: Defaulted<string>;
  parent_task_id: Defaulted<string>;
  assigned_backend: Defaulted<string>;
  receipt_id: Defaulted<string>;
  outcome_id: Defaulted<string>;
  busy_policy: Defaulted<number>;
  idempotency_key: Defaulted<string>;
  metadata: JsonbDefault;
  created_at: CreatedAt;
  updated_at: CreatedAt;
  started_at: Date | null;
  completed_at: Date | null;
  canceled_at: Date | null;
  /** Why its cancel was requested, while a running task's cancel awaits its runner ("" otherwise). */
  cancel_reason: Defaulted<string>;
  /** trellis.tasks.v1.TaskFailure, binary. */
  failure: Uint8Array | null;
  /** trellis.tasks.v1.Suspension, binary (while suspended, and the pending messages after resume). */
  suspension: Uint8Array | null;
  /** The signal id it waits on (indexed copy of suspension.signal_id while waiting). */
  signal_id: string | null;
  /** The executor's opaque checkpoint of the last suspension. */
  checkpoint: NullableJsonb;
  /**
   * The payload of the signal that resumed it, wrapped as `{"$resume": …}`
   * (codec.resumeText: a null payload must still read as a resume; rows of
   * older versions hold it bare), until the continuation commits.
   */
  resume_payload: NullableJsonb;
  /** The messages it appended to the transcript (size-delimited Messages). */
  output: Uint8Array | null;
  /** Replica holding the run, and until when (database clock). */
  lease_owner: string | null;
  lease_expires_at: Date | null;
  /** The agent state its run left (completed or suspended), when the agent keeps state. */
  state: ColumnType<JsonObject | null, string | null | undefined, string | null>;
  /**
   * The task's own requirements (trellis.adapters.v1.ExecutionRequirements,
   * binary), narrowing its agent's; null: the agent's alone.
   */
  requirements: ColumnType<Uint8Array | null, Uint8Array | null | undefined, Uint8Array | null>;
}

/** The latest agent state of a session: what its next run starts from. */
export interface SessionStateTable {
  workspace_id: string;
  session_id: string;
  state: Jsonb;
  /** The task whose run left it. */
  task_id: string;
  updated_at: CreatedAt;
}

export interface IdempotencyKeyTable {
  /** workspace | actor | method | target */
  scope: string;
  key: string;
  request_hash: string;
  resource_id: string;
  created_at: CreatedAt;
}

export interface SignalDeliveryTable {
  delivery_id: string;
  signal_id: string;
  task_id: string;
  payload: NullableJsonb;
  created_at: CreatedAt;
}

export interface OutcomeTable {
  seq: Generated<bigint>;
  id: string;
  task_id: string;
  session_id: string;
  workspace_id: string;
  /** trellis.tasks.v1.OutcomeStatus */
  status: number;
  summary: string;
  /** size-delimited Messages */
  messages: Uint8Array;
  artifact_ids: JsonbDefault<string[]>;
  created_at: CreatedAt;
}

export interface ArtifactTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  session_id: Defaulted<string>;
  task_id: Defaulted<string>;
  kind: number;
  name: Defaulted<string>;
  mime_type: string;
  uri: Defaulted<string>;
  visibility: Defaulted<number>;
  sha256: Defaulted<string>;
  size_bytes: Defaulted<bigint>;
  content: Uint8Array | null;
  metadata: JsonbDefault;
  created_at: CreatedAt;
}

/** A suspension's checkpoint, kept after the task resumed (from_checkpoint replays). */
export interface TaskCheckpointTable {
  seq: Generated<bigint>;
  /** `chk_…`, shown as `Suspension.checkpoint_id`. */
  id: string;
  task_id: string;
  /** The signal the task waited on. */
  signal_id: string;
  /** The task.input_required / task.auth_required event that recorded the suspension. */
  event_id: string;
  /** The executor's checkpoint, as the task row held it. */
  checkpoint: NullableJsonb;
  /** The session's transcript length when the task suspended. */
  transcript_length: bigint;
  /** How many messages the task's output held then. */
  output_count: number;
  created_at: CreatedAt;
}

/** A replay task's source, mode, overrides and frozen plan. */
export interface ReplayTable {
  /** The replay task. */
  task_id: string;
  source_task_id: string;
  workspace_id: string;
  /** exact | with_overrides | from_checkpoint */
  mode: string;
  /** Override key → {kind, value, sha256, reason, …}; may hold secrets (never in events). */
  overrides: JsonbDefault;
  checkpoint_id: Defaulted<string>;
  /** See `domain/replay.ts` (ReplayPlan). */
  plan: Jsonb;
  created_at: CreatedAt;
}

/** The tasks service's tables. */
export interface TasksDatabase {
  workspaces: WorkspaceTable;
  agents: AgentTable;
  sessions: SessionTable;
  messages: MessageTable;
  tasks: TaskTable;
  idempotency_keys: IdempotencyKeyTable;
  signal_deliveries: SignalDeliveryTable;
  outcomes: OutcomeTable;
  artifacts: ArtifactTable;
  task_checkpoints: TaskCheckpointTable;
  replays: ReplayTable;
  session_states: SessionStateTable;
}

export type WorkspaceRow = Selectable<WorkspaceTable>;
export type AgentRow = Selectable<AgentTable>;
export type SessionRow = Selectable<SessionTable>;
export type MessageRow = Selectable<MessageTable>;
export type TaskRow = Selectable<TaskTable>;
export type OutcomeRow = Selectable<OutcomeTable>;
export type ArtifactRow = Selectable<ArtifactTable>;
export type TaskCheckpointRow = Selectable<TaskCheckpointTable>;
export type ReplayRow = Selectable<ReplayTable>;
