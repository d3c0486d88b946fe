/**
 * {@link TaskStore} on PostgreSQL with kysely; the same code runs on PGlite
 * (kysely's PGlite dialect reuses the Postgres compiler).
 *
 * This class is the port's face: it builds the store's context and modules
 * (see `store-parts.ts` for who owns what; `write-unit.ts` for the
 * transaction and concurrency rules) and hands each call to its module.
 */
import type { Database, OutboxWriter, Projector } from "@trellis/storage";
import type { Kysely } from "kysely";
import { Directory } from "./directory.js";
import { Mailbox } from "./mailbox.js";
import { Recovery } from "./recovery.js";
import { Replays } from "./replays.js";
import { Resources } from "./resources.js";
import { Runs } from "./runs.js";
import type { TasksDatabase } from "./schema.js";
import { Sessions } from "./sessions.js";
import type { SessionFence, StoreContext } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { TaskStore } from "./task-store.js";
import { Transcript } from "./transcript.js";
import { type CommittedChanges, hotStatements, WriteUnit } from "./write-unit.js";

export type { CommittedChanges } from "./write-unit.js";
export { cancelChannel, hotStatements } from "./write-unit.js";

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
  /**
   * The turn journal (off when absent): submit and finish also append their
   * step records to `<schema>.journal`, and Outcome rows are written by this
   * `tasks-read-model` projector instead of the finish (read-model.ts).
   */
  journal?: { readModel: Projector };
  /**
   * Distributed owner mode: checks, inside every write transaction that
   * locks a session, that this replica still holds the session's lease
   * (session-leases.ts `fenceWrite`).
   */
  sessionFence?: SessionFence;
}

/** The PostgreSQL / PGlite implementation of {@link TaskStore}. */
export class PostgresTaskStore implements TaskStore {
  readonly #database: Database<unknown>;
  readonly #p: StoreParts;
  /** The modules, for a subclass that routes calls (owned-task-store.ts). */
  protected readonly parts: StoreParts;
  protected readonly context: StoreContext;

  constructor(options: PostgresTaskStoreOptions) {
    this.#database = options.database;
    const kysely = options.database.kysely as Kysely<TasksDatabase>;
    const context: StoreContext = {
      database: options.database,
      kysely,
      db: kysely.withSchema(options.schema),
      schema: options.schema,
      outbox: options.outbox,
      outboxSchema: options.outbox.schema,
      leaseMs: options.leaseMs,
      maxArtifactBytes: options.maxArtifactBytes ?? 16 * 1024 * 1024,
      onCommit: options.onCommit,
      hot: hotStatements(options.schema),
      agents: new Map(),
      defaultAgentOf: new Map(),
      journal: options.journal
        ? {
            readModel: options.journal.readModel,
            lock: options.database.kind === "postgres",
            notify: options.database.kind === "postgres",
          }
        : undefined,
      sessionFence: options.sessionFence,
    };
    // Each module reaches the others through `parts`, filled before any call.
    const parts = {} as StoreParts;
    parts.unit = new WriteUnit(context, parts);
    parts.directory = new Directory(context, parts);
    parts.sessions = new Sessions(context, parts);
    parts.transcript = new Transcript(context, parts);
    parts.mailbox = new Mailbox(context, parts);
    parts.runs = new Runs(context, parts);
    parts.recovery = new Recovery(context, parts);
    parts.replays = new Replays(context, parts);
    parts.resources = new Resources(context, parts);
    this.#p = parts;
    this.parts = parts;
    this.context = context;
  }

  // ------------------------------------------------------------ workspaces and agents

  createWorkspace(...args: Parameters<TaskStore["createWorkspace"]>) {
    return this.#p.directory.createWorkspace(...args);
  }

  getWorkspace(...args: Parameters<TaskStore["getWorkspace"]>) {
    return this.#p.directory.getWorkspace(...args);
  }

  listWorkspaces(...args: Parameters<TaskStore["listWorkspaces"]>) {
    return this.#p.directory.listWorkspaces(...args);
  }

  updateWorkspace(...args: Parameters<TaskStore["updateWorkspace"]>) {
    return this.#p.directory.updateWorkspace(...args);
  }

  archiveWorkspace(...args: Parameters<TaskStore["archiveWorkspace"]>) {
    return this.#p.directory.archiveWorkspace(...args);
  }

  createAgent(...args: Parameters<TaskStore["createAgent"]>) {
    return this.#p.directory.createAgent(...args);
  }

  getAgent(...args: Parameters<TaskStore["getAgent"]>) {
    return this.#p.directory.getAgent(...args);
  }

  listAgents(...args: Parameters<TaskStore["listAgents"]>) {
    return this.#p.directory.listAgents(...args);
  }

  // ------------------------------------------------------------ sessions

  createSession(...args: Parameters<TaskStore["createSession"]>) {
    return this.#p.sessions.createSession(...args);
  }

  getSession(...args: Parameters<TaskStore["getSession"]>) {
    return this.#p.sessions.getSession(...args);
  }

  listSessions(...args: Parameters<TaskStore["listSessions"]>) {
    return this.#p.sessions.listSessions(...args);
  }

  closeSession(...args: Parameters<TaskStore["closeSession"]>) {
    return this.#p.sessions.closeSession(...args);
  }

  forkSession(...args: Parameters<TaskStore["forkSession"]>) {
    return this.#p.sessions.forkSession(...args);
  }

  truncateSession(...args: Parameters<TaskStore["truncateSession"]>) {
    return this.#p.sessions.truncateSession(...args);
  }

  // ------------------------------------------------------------ transcript

  appendMessage(...args: Parameters<TaskStore["appendMessage"]>) {
    return this.#p.transcript.appendMessage(...args);
  }

  listMessages(...args: Parameters<TaskStore["listMessages"]>) {
    return this.#p.transcript.listMessages(...args);
  }

  getMessage(...args: Parameters<TaskStore["getMessage"]>) {
    return this.#p.transcript.getMessage(...args);
  }

  loadTranscript(...args: Parameters<TaskStore["loadTranscript"]>) {
    return this.#p.transcript.loadTranscript(...args);
  }

  loadAgentState(...args: Parameters<TaskStore["loadAgentState"]>) {
    return this.#p.transcript.loadAgentState(...args);
  }

  // ------------------------------------------------------------ mailbox

  submitTask(...args: Parameters<TaskStore["submitTask"]>) {
    return this.#p.mailbox.submitTask(...args);
  }

  cancelTask(...args: Parameters<TaskStore["cancelTask"]>) {
    return this.#p.mailbox.cancelTask(...args);
  }

  deliverSignal(...args: Parameters<TaskStore["deliverSignal"]>) {
    return this.#p.mailbox.deliverSignal(...args);
  }

  claimNext(...args: Parameters<TaskStore["claimNext"]>) {
    return this.#p.mailbox.claimNext(...args);
  }

  sessionsWithQueuedWork(...args: Parameters<TaskStore["sessionsWithQueuedWork"]>) {
    return this.#p.mailbox.sessionsWithQueuedWork(...args);
  }

  // ------------------------------------------------------------ runs

  recordProgress(...args: Parameters<TaskStore["recordProgress"]>) {
    return this.#p.runs.recordProgress(...args);
  }

  finishRun(...args: Parameters<TaskStore["finishRun"]>) {
    return this.#p.runs.finishRun(...args);
  }

  // ------------------------------------------------------------ leases and recovery

  renewLeases(...args: Parameters<TaskStore["renewLeases"]>) {
    return this.#p.recovery.renewLeases(...args);
  }

  releaseRun(...args: Parameters<TaskStore["releaseRun"]>) {
    return this.#p.recovery.releaseRun(...args);
  }

  recoverExpired(...args: Parameters<TaskStore["recoverExpired"]>) {
    return this.#p.recovery.recoverExpired(...args);
  }

  // ------------------------------------------------------------ replays

  getReplaySource(...args: Parameters<TaskStore["getReplaySource"]>) {
    return this.#p.replays.getReplaySource(...args);
  }

  createReplay(...args: Parameters<TaskStore["createReplay"]>) {
    return this.#p.replays.createReplay(...args);
  }

  getReplay(...args: Parameters<TaskStore["getReplay"]>) {
    return this.#p.replays.getReplay(...args);
  }

  // ------------------------------------------------------------ tasks, outcomes, artifacts, events

  getTask(...args: Parameters<TaskStore["getTask"]>) {
    return this.#p.resources.getTask(...args);
  }

  listTasks(...args: Parameters<TaskStore["listTasks"]>) {
    return this.#p.resources.listTasks(...args);
  }

  listOpenChildTasks(...args: Parameters<TaskStore["listOpenChildTasks"]>) {
    return this.#p.resources.listOpenChildTasks(...args);
  }

  findEvent(...args: Parameters<TaskStore["findEvent"]>) {
    return this.#p.resources.findEvent(...args);
  }

  getOutcome(...args: Parameters<TaskStore["getOutcome"]>) {
    return this.#p.resources.getOutcome(...args);
  }

  listOutcomes(...args: Parameters<TaskStore["listOutcomes"]>) {
    return this.#p.resources.listOutcomes(...args);
  }

  registerArtifact(...args: Parameters<TaskStore["registerArtifact"]>) {
    return this.#p.resources.registerArtifact(...args);
  }

  getArtifact(...args: Parameters<TaskStore["getArtifact"]>) {
    return this.#p.resources.getArtifact(...args);
  }

  listArtifacts(...args: Parameters<TaskStore["listArtifacts"]>) {
    return this.#p.resources.listArtifacts(...args);
  }

  getArtifactContent(...args: Parameters<TaskStore["getArtifactContent"]>) {
    return this.#p.resources.getArtifactContent(...args);
  }

  /** The database this store runs on (for LISTEN and health). */
  get database(): Database<unknown> {
    return this.#database;
  }
}
