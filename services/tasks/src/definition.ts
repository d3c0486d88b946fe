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
import { type AgentExecutor, createLocalExecutor } from "@trellis/adapters";
import {
  AgentService,
  ArtifactService,
  EventService,
  OutcomeService,
  SessionService,
  SignalService,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";
import type { ServiceContext, ServiceDefinition, ServiceModule } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";
import { loadTasksConfig } from "./config.js";
import { createAgentHandlers } from "./handlers/agent-handlers.js";
import { createArtifactHandlers, createOutcomeHandlers } from "./handlers/artifact-handlers.js";
import { type HandlerDeps, withErrorDetails } from "./handlers/common.js";
import { createEventHandlers } from "./handlers/event-handlers.js";
import { createSessionHandlers } from "./handlers/session-handlers.js";
import { createSignalHandlers } from "./handlers/signal-handlers.js";
import { createTaskHandlers } from "./handlers/task-handlers.js";
import { createWorkspaceHandlers } from "./handlers/workspace-handlers.js";
import { tasksMigrations } from "./store/migrations/index.js";
import { cancelChannel, PostgresTaskStore } from "./store/postgres-task-store.js";
import { TaskWatchers } from "./worker/task-watchers.js";
import { TurnRunner } from "./worker/turn-runner.js";

/** Options of {@link createTasksService}. */
export interface TasksServiceOptions {
  /** Runs agent turns (default: the in-process executor with the scripted backend). */
  executor?: AgentExecutor;
  /** This replica's id, the owner of its leases (default: host, pid and a random suffix). */
  replicaId?: string;
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
    ],
    migrations: tasksMigrations,
    defaultPort: DEFAULT_PORTS.tasks ?? 0,
    create: (context) => createTasksModule(context, options),
  };
}

function createTasksModule(context: ServiceContext, options: TasksServiceOptions): ServiceModule {
  const config = loadTasksConfig(context.env);
  const owner = options.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const watchers = new TaskWatchers();
  const store = new PostgresTaskStore({
    database: context.db,
    schema: context.schema,
    outboxSchema: context.outboxSchema,
    leaseMs: config.TRELLIS_TASKS_LEASE,
    maxArtifactBytes: config.TRELLIS_TASKS_MAX_ARTIFACT_BYTES,
    onCommit: (changes) => {
      context.kickRelay();
      for (const id of changes.taskIds) {
        if (watchers.watched(id)) watchers.notify(id, () => changes.snapshot(id));
      }
    },
  });
  const executor = options.executor ?? createLocalExecutor();
  const runner = new TurnRunner({
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
    watchThroughLog: context.mode === "distributed",
  };
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
        .service(OutcomeService, withErrorDetails(OutcomeService, createOutcomeHandlers(deps)));
    },
    start: () => runner.start(),
    stop: () => runner.stop(),
  };
}

/** The tasks service, runnable embedded or as its own process. */
export const tasksService: ServiceDefinition = createTasksService();
