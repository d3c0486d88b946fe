/**
 * The port of the tasks service's system of record. One implementation,
 * {@link PostgresTaskStore}, runs on PostgreSQL and on PGlite alike.
 *
 * Every write is one transaction that commits the state change, the events
 * describing it (transactional outbox) and, where the mailbox allows, the
 * claim of the session's next turn — so a turn costs two transactions
 * (submit, finish) and nothing is half-done after a crash.
 *
 * Workspace scoping: every method taking a `scope` treats resources outside
 * that workspace as absent (`resource_not_found`). An undefined scope is an
 * internal, trusted call.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Actor, Event, Message, TaskStatus } from "@trellis/contracts/core";
import type {
  Agent,
  Artifact,
  BusyPolicy,
  Outcome,
  Session,
  SessionMessage,
  Task,
  Workspace,
} from "@trellis/contracts/tasks";
import type { ExecutionRequirements } from "@trellis/execution";
import type { ReplayPlan, StoredOverride } from "../domain/replay.js";
import type { RunOutcome } from "../domain/run.js";

/** A session's key: session ids are unique per workspace. */
export interface SessionKey {
  workspaceId: string;
  sessionId: string;
}

/** Who writes, and the workspace they are confined to (undefined: internal call or admin key). */
export interface WriteContext {
  actor: Actor;
  scope?: string;
}

/** What `updateWorkspace` changes: a new name, and metadata keys to set (null: remove). */
export interface WorkspacePatch {
  name?: string;
  metadata?: Readonly<Record<string, JsonValue>>;
}

/** An idempotency key and the hash of the request it came with. */
export interface Idempotency {
  key: string;
  /** Hash of the request without the key: same key + other hash → `idempotency_key_reused`. */
  requestHash: string;
}

/** A page request: `pageSize` 1…1000 (0 = default 100), opaque `pageToken`. */
export interface PageRequest {
  pageSize: number;
  pageToken: string;
}

/** A page of results; `nextPageToken` is empty on the last page. */
export interface Page<T> {
  items: T[];
  nextPageToken: string;
}

/**
 * A run this replica claimed: it holds the session's mailbox under a lease
 * until it calls {@link TaskStore.finishRun} (or the lease runs out).
 */
export interface Claim {
  task: Task;
  agent: Agent;
  /** Whether a lost worker's run of this agent may simply run again. */
  safeToRetry: boolean;
  /** The turn's history is the transcript before this position (the input sits here). */
  inputPosition: bigint;
  /** Changes whenever the session's transcript is cut (truncate): cached history is stale then. */
  transcriptEpoch: bigint;
  /** Set when continuing a suspended task. */
  resume?: { checkpoint: JsonValue; payload: JsonValue };
  leaseOwner: string;
  /** The task's own requirements, stored with it (already narrowed by the agent's). */
  requirements?: ExecutionRequirements;
}

/** What SubmitTask produced. */
export interface SubmitResult {
  task: Task;
  /** True when an earlier submit with the same idempotency key created it. */
  replayed: boolean;
  /** Set when the task was claimed at once: run it now. */
  claim?: Claim;
  /** A running task this submit interrupted (BUSY_POLICY_INTERRUPT). */
  interrupted?: string;
}

/** What finishing a run did. */
export interface FinishResult {
  /** False when the run had lost its claim (canceled and finalized elsewhere, lease taken over). */
  applied: boolean;
  task?: Task;
  /** The session's transcript length after the run's output was appended. */
  transcriptLength?: bigint;
  /** The session's next turn, claimed in the same transaction. */
  next?: Claim;
}

/** What delivering a signal did. */
/** A signal to deliver (see {@link TaskStore.deliverSignal}). */
export interface DeliverySignal {
  signalId: string;
  /** Dedupe id; empty: the task-unique signal id it resolves to. */
  deliveryId: string;
  payload: JsonValue;
  /** The session whose waiting turn it is for; `signalId` may then be the author's label. */
  sessionId?: string;
  /**
   * Without a session: when no task-unique id matches, the one task of the
   * caller's workspace waiting on this label (several: `invalid_request`).
   * For callers that pass a suspension's author id back as it is.
   */
  labelAlone?: boolean;
}

export interface DeliverResult {
  taskId: string;
  duplicate: boolean;
  /** The task-unique signal id (`<task_id>:<label>`) the delivery resolved to, when it did. */
  signalId?: string;
  task?: Task;
  /** The resumed task, claimed at once when the mailbox was free. */
  claim?: Claim;
  /** A task that must be aborted where it runs (a cancel signal to a running task). */
  abort?: string;
}

/** What canceling did. */
export interface CancelResult {
  task: Task;
  /** The task is still held by a runner, which must be aborted. */
  running: boolean;
  /** The next turn, claimed because the canceled task had been queued ahead of it. */
  claim?: Claim;
}

/** Fields of a new session. */
export interface NewSession {
  sessionId?: string;
  workspaceId?: string;
  agentId?: string;
  initialMessages: Message[];
  metadata?: Record<string, JsonValue>;
  idempotency?: Idempotency;
}

/** Where a session is forked, and the fields of the new one. */
export interface NewFork {
  sessionId: string;
  atEventId: string;
  atMessageCount: bigint;
  /** Copy up to and including this message (when atEventId is empty). */
  atMessageId?: string;
  /** Copy nothing: a fork at the session's origin. */
  atOrigin?: boolean;
  branchId: string;
  metadata?: Record<string, JsonValue>;
  idempotency?: Idempotency;
}

/** Fields of a new task. */
export interface NewTask {
  sessionId: string;
  /**
   * The agent that runs the task ("": the session's, else the workspace
   * default). With `createSession` it is the agent a session created by this
   * call is bound to; a session that already exists runs its own agent.
   */
  agentId: string;
  input: Message;
  busyPolicy: BusyPolicy;
  parentTaskId: string;
  metadata?: Record<string, JsonValue>;
  /** Get or create the session: a missing one is created, bound to `agentId`. */
  createSession: boolean;
  workspaceId: string;
  idempotency?: Idempotency;
  /**
   * The task's own requirements, given the agent it resolved to: what to
   * store with the task (narrowed by the agent's), or a throw that refuses
   * the submit (nothing is stored). Absent: the agent's requirements alone.
   */
  prepareRequirements?: (agent: Agent) => ExecutionRequirements | undefined;
}

/** A suspension's checkpoint, as kept for from_checkpoint replays. */
export interface SourceCheckpoint {
  id: string;
  signalId: string;
  /** The task.input_required / task.auth_required event of the suspension. */
  eventId: string;
  checkpoint: JsonValue;
  /** The session's transcript length when the task suspended. */
  transcriptLength: bigint;
  /** How many output messages the task had made by then. */
  outputCount: number;
}

/** What a replay reads of its source task, in one go. */
export interface ReplaySource {
  task: Task;
  agent: Agent;
  /** Where its input sits in its session's transcript (null: it never started). */
  inputPosition: bigint | null;
  /**
   * Whether the source's session still holds the source's input at its
   * position (false after a truncation cut it away: the history before it
   * may have been replaced).
   */
  historyIntact: boolean;
  /** Its suspensions' checkpoints, in order. */
  checkpoints: SourceCheckpoint[];
  /** The signals it was resumed with (cancels excluded), in delivery order. */
  signals: { signalId: string; payload: JsonValue }[];
}

/** Fields of a new replay task. */
export interface NewReplay {
  /** The replay task's id (chosen by the caller: its markers name it). */
  taskId: string;
  plan: ReplayPlan;
  overrides: Record<string, StoredOverride>;
  /** How many of the source session's messages the replay's session starts with. */
  forkCount: bigint;
  /** The fork point's event, when known (from_checkpoint: the checkpoint's event). */
  forkEventId: string;
  /** The replay task's input. */
  input: Message;
  /**
   * from_checkpoint: the input is already in the fork at `inputPosition`;
   * the task starts resumed from `checkpoint` with the recorded `payload`.
   */
  restore?: { inputPosition: bigint; checkpoint: JsonValue; payload: JsonValue };
  metadata: Record<string, JsonValue>;
  idempotency?: Idempotency;
}

/** What creating a replay produced. */
export interface ReplayResult {
  task: Task;
  session: Session;
  /** True when an earlier request with the same idempotency key created it. */
  replayed: boolean;
  /** The replay task, claimed at once (its session is new): run it now. */
  claim?: Claim;
}

/** A replay task's plan and material, for the executor that runs it. */
export interface ReplayRecord {
  replayTaskId: string;
  plan: ReplayPlan;
  overrides: Record<string, StoredOverride>;
  /** The source task's output as recorded (its first `plan.messages.length` messages). */
  sourceOutput: Message[];
}

/** A filter of ListTasks. */
export interface TaskFilter {
  workspaceId?: string;
  sessionId?: string;
  /** Only the tasks delegated by this task (`parent_task_id`). */
  parentTaskId?: string;
  /** Only the task waiting for this signal. */
  waitingSignalId?: string;
  statuses: TaskStatus[];
}

/** A filter of ListOutcomes / ListArtifacts. */
export interface ResourceFilter {
  workspaceId?: string;
  sessionId?: string;
  taskId?: string;
}

/** The system of record of workspaces, agents, sessions, transcripts, tasks, outcomes and artifacts. */
export interface TaskStore {
  createWorkspace(
    workspace: Workspace,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Workspace>;
  getWorkspace(id: string, scope?: string): Promise<Workspace>;
  listWorkspaces(page: PageRequest, scope?: string): Promise<Page<Workspace>>;
  /** Changes a workspace's name and metadata (unconfined callers only). */
  updateWorkspace(id: string, patch: WorkspacePatch, context: WriteContext): Promise<Workspace>;
  /** Archives a workspace (unconfined callers only; not the default one). */
  archiveWorkspace(id: string, context: WriteContext): Promise<Workspace>;

  /** Stores an agent whose definition the executor already accepted. */
  createAgent(
    agent: Agent,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Agent>;
  getAgent(id: string, scope?: string): Promise<Agent>;
  listAgents(workspaceId: string, page: PageRequest, scope?: string): Promise<Page<Agent>>;

  createSession(input: NewSession, context: WriteContext): Promise<Session>;
  getSession(id: string, scope?: string): Promise<Session>;
  listSessions(workspaceId: string, page: PageRequest, scope?: string): Promise<Page<Session>>;
  /** CLOSED; cancels the session's unfinished tasks. Returns the ids of tasks still running (to abort). */
  closeSession(
    id: string,
    reason: string,
    context: WriteContext,
  ): Promise<{ session: Session; abort: string[] }>;
  forkSession(input: NewFork, context: WriteContext): Promise<Session>;
  truncateSession(
    id: string,
    keepTurns: bigint,
    context: WriteContext,
  ): Promise<{ session: Session; dropped: bigint }>;
  appendMessage(
    sessionId: string,
    message: Message,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<SessionMessage>;
  listMessages(
    sessionId: string,
    filter: { taskId: string },
    page: PageRequest,
    scope?: string,
  ): Promise<Page<SessionMessage>>;
  getMessage(id: string, scope?: string): Promise<SessionMessage>;

  /** Accepts a task durably; claims it at once when its session's mailbox is free. */
  submitTask(input: NewTask, context: WriteContext, owner: string): Promise<SubmitResult>;
  getTask(id: string, scope?: string): Promise<Task>;
  listTasks(filter: TaskFilter, page: PageRequest, scope?: string): Promise<Page<Task>>;
  /** Ids of the tasks `parentTaskId` delegated to (`parent_task_id`) that are not terminal. */
  listOpenChildTasks(parentTaskId: string, scope?: string): Promise<string[]>;
  /**
   * Cancels a task. One that is not running is CANCELED at once; a running
   * one only has its cancel requested (`canceled_at`; `running: true`) and is
   * CANCELED when its run ends (finishRun, or recovery).
   */
  cancelTask(
    id: string,
    reason: string,
    context: WriteContext,
    owner: string,
  ): Promise<CancelResult>;
  /**
   * Records a signal for the task waiting on `signalId` (once per delivery id)
   * and re-queues it. Without `sessionId`, `signalId` is the task-unique id;
   * with it, also the label the agent's author wrote (the session's task that
   * suspended last on that label receives it).
   */
  deliverSignal(
    signal: DeliverySignal,
    context: WriteContext,
    owner: string,
  ): Promise<DeliverResult>;

  /** Claims the session's next turn if its mailbox is free. */
  /** `workspaceId`: the session's (absent: by id alone, see `WriteUnit.lockSession`). */
  claimNext(sessionId: string, owner: string, workspaceId?: string): Promise<Claim | undefined>;
  /** Records how a claimed run ended and claims the session's next turn. */
  finishRun(claim: Claim, outcome: RunOutcome, owner: string): Promise<FinishResult>;
  /**
   * Appends a running turn's progress events (`kind` + data payload, about
   * the task) to the log, in order, in one transaction.
   */
  recordProgress(
    claim: Claim,
    items: readonly { kind: string; data: { [key: string]: JsonValue } }[],
  ): Promise<void>;
  /**
   * Extends the leases `owner` holds on `taskIds`; returns the ids it no
   * longer holds or that were canceled meanwhile (their runs must stop).
   */
  renewLeases(owner: string, taskIds: readonly string[], leaseMs: number): Promise<string[]>;
  /** Gives a claimed run back (shutdown): re-queued when safe to retry, else failed. */
  releaseRun(claim: Claim, owner: string, reason: string): Promise<void>;
  /** Recovers runs whose lease expired; returns the turns it claimed for `owner` meanwhile. */
  recoverExpired(owner: string, limit: number): Promise<Claim[]>;
  /** Sessions with queued turns and a free mailbox (missed wake-ups, crashed submitters). */
  sessionsWithQueuedWork(limit: number): Promise<SessionKey[]>;
  /** The transcript's messages at positions `from` ≤ p < `to`, in order. */
  loadTranscript(
    sessionId: string,
    from: bigint,
    to: bigint,
    workspaceId?: string,
  ): Promise<Message[]>;
  /**
   * The session's agent state besides the transcript (what the last completed
   * or suspended run that kept state left); undefined when none kept any.
   * `workspaceId`: the session's, when the caller knows it (the owner's key).
   */
  loadAgentState(sessionId: string, workspaceId?: string): Promise<JsonObject | undefined>;

  /** The source of a replay: the task, its agent, checkpoints and signals. */
  getReplaySource(taskId: string, scope?: string): Promise<ReplaySource>;
  /**
   * Creates a replay task in a new session forked from the source's, with
   * its plan, in one transaction; claims it at once.
   */
  createReplay(input: NewReplay, context: WriteContext, owner: string): Promise<ReplayResult>;
  /** The plan and material of a replay task; undefined when the task is no replay. */
  getReplay(replayTaskId: string): Promise<ReplayRecord | undefined>;

  /** An event of this service's outbox by id, with its session (for scoping). */
  findEvent(id: string, scope?: string): Promise<Event | undefined>;

  getOutcome(id: string, scope?: string): Promise<Outcome>;
  listOutcomes(filter: ResourceFilter, page: PageRequest, scope?: string): Promise<Page<Outcome>>;

  registerArtifact(
    artifact: Artifact,
    content: Uint8Array,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Artifact>;
  getArtifact(id: string, scope?: string): Promise<Artifact>;
  listArtifacts(filter: ResourceFilter, page: PageRequest, scope?: string): Promise<Page<Artifact>>;
  getArtifactContent(
    id: string,
    scope?: string,
  ): Promise<{ content: Uint8Array; mimeType: string }>;
}
