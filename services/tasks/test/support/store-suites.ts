/**
 * What the store suites (test/store) open and finish with: the tasks tables
 * and an outbox on a database, the session owner's journal and the read
 * model behind it, and a suspended end of a run.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { Role } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import {
  createJournal,
  type Database,
  type Journal,
  migrate,
  outboxMigrations,
  type Projector,
} from "@trellis/storage";
import type { RunOutcome } from "../../src/domain/run.js";
import { tasksMigrations } from "../../src/store/migrations/index.js";
import { createTasksReadModel } from "../../src/store/read-model.js";
import { text } from "./fixtures.js";

/**
 * Creates the tasks tables in schema `tasks` of `database`, and the outbox's
 * in schema `outbox` (in one migration set when the outbox is `tasks` too).
 */
export async function migrateTasksStore(database: Database, outbox: string): Promise<void> {
  if (outbox === "tasks") {
    await migrate(database, {
      schema: "tasks",
      migrations: { ...outboxMigrations("tasks"), ...tasksMigrations },
    });
    return;
  }
  await migrate(database, { schema: "tasks", migrations: tasksMigrations });
  await migrate(database, { schema: outbox, migrations: outboxMigrations(outbox) });
}

/** The session owner's journal and the read model that writes its rows behind it. */
export interface OwnerJournal {
  journal: Journal;
  readModel: Projector;
}

/**
 * The session owner's journal over the tasks tables of `database` (its
 * appends' events go to outbox `outbox`, the rows it commits to `kick`) and
 * the tasks read model, woken by the journal's commits.
 */
export async function openOwnerJournal(
  database: Database,
  options: {
    outbox: string;
    kick: (committed?: readonly LoggedEvent[]) => void;
    /** The read model's delay after each wake-up (its default otherwise). */
    delayMs?: number;
    /** Whether the read model also listens for other replicas' commits. */
    listen?: boolean;
  },
): Promise<OwnerJournal> {
  const { outbox, kick, delayMs, listen } = options;
  const journal = createJournal(database, {
    schema: "tasks",
    outbox: { schema: outbox, kick: (rows) => kick(rows) },
  });
  const readModel = await createTasksReadModel({
    database,
    schema: "tasks",
    ...(delayMs !== undefined ? { delayMs } : {}),
    ...(listen !== undefined ? { listen } : {}),
    journal,
    outbox: { schema: outbox, kick },
  });
  return { journal, readModel };
}

/**
 * A run's end that suspends its task for an input signal `approval`
 * (checkpoint `{ at: 1 }`), with the agent state `state` when given.
 */
export function approvalSuspension(state?: JsonObject): RunOutcome {
  return {
    status: "suspended",
    messages: [text("need input", Role.AGENT)],
    signalLabel: "approval",
    metadata: {},
    kind: "input",
    checkpoint: { at: 1 },
    ...(state ? { state } : {}),
  };
}
