/**
 * The tasks service: workspaces, agents, sessions, transcripts, tasks and
 * their lifecycle, the per-session mailbox, signals, outcomes and artifacts
 * (trellis.tasks.v1), with PostgreSQL (or PGlite) as the system of record.
 *
 * Wiring only: builds the store, the turn runner and the handlers from the
 * host's ServiceContext.
 */

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { WorkerService } from "@trellis/contracts/adapters";
import {
  AgentService,
  ArtifactService,
  BranchService,
  ConnectorService,
  EventService,
  MemoryService,
  OutcomeService,
  SessionService,
  SignalService,
  SkillService,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";
import {
  type AgentExecutor,
  createInProcessBackends,
  createRoutedExecutor,
  createWorkerHandlers,
  embeddedWorkerHub,
  type HarnessTool,
  hubOptions,
  loadAdaptersConfig,
  NatsWorkerBridge,
  routedNats,
  vaultAccessThrough,
  WorkerSessions,
  withAgentFacts,
} from "@trellis/execution";
import type { ServiceContext, ServiceDefinition, ServiceModule } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { createJournal, type Journal, journalHead } from "@trellis/storage";
import {
  ContextCompactor,
  loadCompactionConfig,
  PostgresContextSummaryStore,
} from "./compaction/index.js";
import { loadTasksConfig } from "./config.js";
import { createAgentHandlers } from "./handlers/agent-handlers.js";
import { createArtifactHandlers, createOutcomeHandlers } from "./handlers/artifact-handlers.js";
import { createBranchHandlers } from "./handlers/branch-handlers.js";
import { type HandlerDeps, withErrorDetails } from "./handlers/common.js";
import { createConnectorHandlers } from "./handlers/connector-handlers.js";
import { createEventHandlers } from "./handlers/event-handlers.js";
import { createSessionHandlers } from "./handlers/session-handlers.js";
import { createSignalHandlers } from "./handlers/signal-handlers.js";
import { createTaskHandlers } from "./handlers/task-handlers.js";
import { createWorkspaceHandlers } from "./handlers/workspace-handlers.js";
import { Memories } from "./memory/memories.js";
import { createMemoryHandlers } from "./memory/memory-handlers.js";
import { MemoryStore } from "./memory/memory-store.js";
import { createRunMemory } from "./memory/run-memory.js";
import { createReplayExecutor } from "./replay/replay-executor.js";
import { createSkillHandlers } from "./skills/skill-handlers.js";
import { PostgresBranchStore } from "./store/branch-store.js";
import { PostgresConnectorStore } from "./store/connector-store.js";
import { LeasedTaskStore } from "./store/leased-task-store.js";
import { tasksMigrations } from "./store/migrations/index.js";
import { OwnedTaskStore } from "./store/owned-task-store.js";
import {
  type CommittedChanges,
  cancelChannel,
  PostgresTaskStore,
} from "./store/postgres-task-store.js";
import { createTasksReadModel, readModelHealth } from "./store/read-model.js";
import { SessionLeases } from "./store/session-leases.js";
import { TaskWatchers } from "./worker/task-watchers.js";
import { TurnRunner } from "./worker/turn-runner.js";

/** Options of {@link createTasksService}. */
export interface TasksServiceOptions {
  /**
   * Runs agent turns (default: the router — in-process backends, plus the
   * mesh's remote adapter workers in distributed mode).
   */
  executor?: AgentExecutor;
  /** This replica's id, the owner of its leases (default: host, pid and a random suffix). */
  replicaId?: string;
  /**
   * The built-in harness's tools, for replays of harness tasks: their schemas
   * and approval flags (a replay never runs them; results come from the
   * recording). Without them a replay accepts any tool input.
   */
  replayTools?: readonly HarnessTool[];
}

/** A tasks service definition with its dependencies chosen (tests inject an executor). */
export function createTasksService(options: TasksServiceOptions = {}): ServiceDefinition {
  return {
    name: "tasks",
    provides: [
      WorkspaceService,
      AgentService,
      SessionService,
      TaskService,
      EventService,
      SignalService,
      ArtifactService,
      OutcomeService,
      BranchService,
      ConnectorService,
      MemoryService,
      SkillService,
    ],
    migrations: tasksMigrations,
    defaultPort: DEFAULT_PORTS.tasks ?? 0,
    create: (context) => createTasksModule(context, options),
  };
}

async function createTasksModule(
  context: ServiceContext,
  options: TasksServiceOptions,
): Promise<ServiceModule> {
  const config = loadTasksConfig(context.env);
  const owner = options.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const watchers = new TaskWatchers();
  // The turn journal: "owner" (the default in both modes; distributed under
  // session leases) makes the turn path in memory, one append per step, and
  // projects the rows behind; "true" appends step records beside the
  // relational writes; "false" is the relational path.
  const journalMode = config.TRELLIS_TASKS_JOURNAL ?? "owner";
  // Distributed owner mode: a session is owned by one replica under a lease.
  const leases =
    journalMode === "owner" && context.mode !== "embedded"
      ? new SessionLeases({
          database: context.db,
          schema: context.schema,
          owner,
          ttlMs: config.TRELLIS_TASKS_LEASE,
          onError: (error, where) => context.logger.warn(where, { error: String(error) }),
        })
      : undefined;
  const journal: Journal | undefined =
    journalMode === "owner"
      ? createJournal(context.db, {
          schema: context.schema,
          // An owned step's events go to the outbox with its append (one statement).
          outbox: { schema: context.outboxSchema, kick: (rows) => context.outbox.kick(rows) },
        })
      : undefined;
  // The read model: every replica runs it; the projector's claim lets one apply each batch.
  const readModel =
    journalMode !== "false"
      ? await createTasksReadModel({
          database: context.db,
          schema: context.schema,
          listen: context.db.kind === "postgres",
          delayMs: config.TRELLIS_TASKS_PROJECTOR_DELAY,
          onError: (error, where) => context.logger.warn(where, { error: String(error) }),
          ...(journal
            ? {
                journal,
                outbox: { schema: context.outboxSchema, kick: (rows) => context.outbox.kick(rows) },
              }
            : {}),
        })
      : undefined;
  const storeOptions = {
    database: context.db,
    schema: context.schema,
    outbox: context.outbox,
    leaseMs: config.TRELLIS_TASKS_LEASE,
    maxArtifactBytes: config.TRELLIS_TASKS_MAX_ARTIFACT_BYTES,
    onCommit: (changes: CommittedChanges) => {
      for (const id of changes.taskIds) {
        if (watchers.watched(id)) watchers.notify(id, () => changes.snapshot(id));
      }
    },
  };
  const store =
    journal && readModel && leases
      ? new LeasedTaskStore({ ...storeOptions, owner: { journal, readModel }, leases })
      : journal && readModel
        ? new OwnedTaskStore({ ...storeOptions, owner: { journal, readModel } })
        : new PostgresTaskStore({
            ...storeOptions,
            ...(readModel ? { journal: { readModel } } : {}),
          });
  if (leases && store instanceof OwnedTaskStore) await leases.start(store.owner);
  // Turns go through routing: in-process backends (embedded: scripted and
  // the built-in harness; distributed: scripted), and in distributed mode
  // the remote adapter workers (NATS). Agents are immutable, so whether one
  // is safe to re-run after a lost worker is looked up once per agent.
  const backends = options.executor
    ? undefined
    : await createInProcessBackends({
        mode: context.mode,
        env: context.env,
        db: context.db,
        dataDir: context.dataDir,
        fingerprints: context.fingerprints,
        // The A2A backend's credentials; the vaults live in the adapters service.
        vaultAccess: vaultAccessThrough(context.clients),
      });
  const routed = backends
    ? createRoutedExecutor({
        mode: context.mode,
        env: context.env,
        logger: context.logger,
        adapters: backends.adapters,
        fingerprints: context.fingerprints,
        // A remote worker's tools read vault secrets through the router that
        // placed the turn; the vaults live in the adapters service.
        vaultAccess: vaultAccessThrough(context.clients),
        // Embedded: gRPC workers connected to the adapters service in this process.
        ...(context.mode === "embedded"
          ? {
              workerHub: embeddedWorkerHub(
                context.signals,
                hubOptions(loadAdaptersConfig(context.env)),
              ),
            }
          : {}),
      })
    : undefined;
  // Distributed: gRPC workers may hold their WorkerChannel here (the
  // gateway forwards WorkerService to this service): this replica's router
  // hands its turns to them in process; every other router (other replicas,
  // the adapters service) reaches them over NATS, as through the adapters
  // service's relay. Embedded: the adapters service holds them (one hub).
  const workerSessions =
    routed && context.mode === "distributed"
      ? new WorkerSessions({
          port: new NatsWorkerBridge({
            nats: () => routedNats(routed),
            local: () => routed.remote,
            logger: context.logger,
          }),
        })
      : undefined;
  const replayTools =
    options.replayTools ?? (backends?.harnessTools.length ? backends.harnessTools : undefined);
  let executor: AgentExecutor = options.executor ?? routed!.router;
  // Embedded too: turns may run on gRPC workers, retried after a lost one.
  if (routed) {
    executor = withAgentFacts(routed.router, (id, workspaceId) => store.getAgent(id, workspaceId));
  }
  // Replay tasks run from their source's recording, never calling providers or tools again.
  executor = createReplayExecutor(executor, {
    load: (taskId) => store.getReplay(taskId),
    fingerprints: context.fingerprints,
    ...(replayTools ? { harnessTools: replayTools } : {}),
  });
  // Memory (Harn v1): kept apart from transcripts; runs read and write it through their request.
  const memories = new Memories(new MemoryStore(context.db, context.schema), store);
  const runner = new TurnRunner({
    runMemory: (run, record) => createRunMemory(memories, run, record),
    store,
    executor,
    owner,
    leaseMs: config.TRELLIS_TASKS_LEASE,
    sweepMs: config.TRELLIS_TASKS_SWEEP,
    cancelGraceMs: config.TRELLIS_TASKS_CANCEL_GRACE,
    turnTimeoutMs: config.TRELLIS_TASKS_TURN_TIMEOUT,
    shutdownGraceMs: config.TRELLIS_TASKS_SHUTDOWN_GRACE,
    logger: context.logger,
    signals: context.signals,
    cancelNotifications: { database: context.db, channel: cancelChannel(context.schema) },
    // Summaries by the agent's model go through the same executor (a replay never calls it).
    compactor: new ContextCompactor(loadCompactionConfig(context.env), context.logger, {
      executor,
      summaries: new PostgresContextSummaryStore(context.db, context.schema),
      isReplay: async (taskId) => (await store.getReplay(taskId)) !== undefined,
    }),
  });
  const deps: HandlerDeps = {
    store,
    executor,
    runner,
    watchers,
    eventLog: context.eventLog,
    signals: context.signals,
    logger: context.logger,
    owner,
    cancelGraceMs: config.TRELLIS_TASKS_CANCEL_GRACE,
    watchThroughLog: context.mode === "distributed",
    fingerprints: context.fingerprints,
  };
  // Branches and connectors keep their own tables; their events go the same way.
  const extended = {
    database: context.db,
    schema: context.schema,
    outbox: context.outbox,
  };
  const branches = new PostgresBranchStore(extended);
  const connectors = new PostgresConnectorStore(extended);
  return {
    routes(router) {
      router
        .service(
          WorkspaceService,
          withErrorDetails(WorkspaceService, createWorkspaceHandlers(deps)),
        )
        .service(AgentService, withErrorDetails(AgentService, createAgentHandlers(deps)))
        .service(SessionService, withErrorDetails(SessionService, createSessionHandlers(deps)))
        .service(TaskService, withErrorDetails(TaskService, createTaskHandlers(deps)))
        .service(EventService, withErrorDetails(EventService, createEventHandlers(deps)))
        .service(SignalService, withErrorDetails(SignalService, createSignalHandlers(deps)))
        .service(ArtifactService, withErrorDetails(ArtifactService, createArtifactHandlers(deps)))
        .service(OutcomeService, withErrorDetails(OutcomeService, createOutcomeHandlers(deps)))
        .service(
          BranchService,
          withErrorDetails(BranchService, createBranchHandlers(deps, branches)),
        )
        .service(
          ConnectorService,
          withErrorDetails(ConnectorService, createConnectorHandlers(deps, connectors)),
        )
        .service(MemoryService, withErrorDetails(MemoryService, createMemoryHandlers(memories)))
        .service(
          SkillService,
          withErrorDetails(SkillService, createSkillHandlers(store, backends?.harnessTools ?? [])),
        );
      if (workerSessions) {
        router.service(
          WorkerService,
          withErrorDetails(WorkerService, createWorkerHandlers(workerSessions)),
        );
      }
    },
    ...(readModel ? { health: [readModelHealth(readModel)] } : {}),
    start: async () => {
      // Appends an earlier run left unprojected (a crash) reach the tables
      // before a session is loaded from them. Bounded: a projector that
      // cannot catch up shows in `trellis health`.
      if (readModel) {
        const head = await journalHead(context.db.kysely, context.schema);
        await readModel.waitFor(head, { timeoutMs: 30_000 }).catch((error: unknown) => {
          context.logger.warn("the read model did not catch up with the journal at start", {
            error: String(error),
          });
        });
      }
      await routed?.start();
      await runner.start();
    },
    stop: async () => {
      await runner.stop();
      workerSessions?.close();
      await routed?.stop();
      if (journal && readModel) {
        // What the owner appended reaches the tables before the projector stops.
        await journal.close();
        await readModel.waitFor(journal.head(), { timeoutMs: 10_000 }).catch(() => undefined);
        if (store instanceof LeasedTaskStore) await store.closeLeases();
        else if (store instanceof OwnedTaskStore) store.close();
      }
      await readModel?.stop();
    },
  };
}

/** The tasks service, runnable embedded or as its own process. */
export const tasksService: ServiceDefinition = createTasksService();
