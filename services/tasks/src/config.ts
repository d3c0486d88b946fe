/**
 * Settings of the tasks service, read from the host's environment at start
 * (validated; a bad value stops the service with a message naming it).
 */
import { type ConfigOf, env, loadConfig } from "@trellis/runtime";
import { DEFAULT_READ_MODEL_DELAY_MS } from "./store/read-model.js";

/** Environment variables the tasks service reads. */
export const tasksConfigSchema = {
  /**
   * How long a replica's claim on a running turn lasts without renewal. A
   * replica that dies stops renewing; after this long another one recovers
   * its turns (re-run if safe to retry, else FAILED `worker_lost`).
   */
  TRELLIS_TASKS_LEASE: env.duration({ minMs: 200, maxMs: 3_600_000 }).default(15_000),
  /** How often each replica looks for expired leases and queued turns nobody claimed. */
  TRELLIS_TASKS_SWEEP: env.duration({ minMs: 20, maxMs: 600_000 }).default(1_000),
  /** How long a canceled turn's backend gets to return before its result is given up. */
  TRELLIS_TASKS_CANCEL_GRACE: env.duration({ minMs: 0, maxMs: 600_000 }).default(2_000),
  /** Longest a turn may run; then it is aborted and FAILED with category `timeout` (retryable). */
  TRELLIS_TASKS_TURN_TIMEOUT: env.duration({ minMs: 100, maxMs: 86_400_000 }).default(15 * 60_000),
  /** How long shutdown waits for running turns before handing them back. */
  TRELLIS_TASKS_SHUTDOWN_GRACE: env.duration({ minMs: 0, maxMs: 600_000 }).default(5_000),
  /**
   * The turn journal (docs/turn-journal.md). `owner`, the default (both
   * modes; distributed since session 15): the session owner makes submit and finish in memory, each
   * ONE group-committed journal append, and the `tasks-read-model` projector
   * writes tasks, messages, sessions, outcomes and the outbox rows behind
   * (its lag shows in `trellis health`); in distributed mode each session is
   * owned by one replica under a lease of `TRELLIS_TASKS_LEASE` (step 4).
   * `true`: submit and finish also append their step records beside the
   * relational writes and Outcome rows are projected. `false`: the relational
   * path alone.
   */
  TRELLIS_TASKS_JOURNAL: env.enum(["false", "true", "owner"]).optional(),
  /**
   * Journal on: how long the `tasks-read-model` projector waits after a
   * commit wakes it, so one transaction applies the steps of several turns
   * (a turn's submit and finish, and those of other sessions). Behind the
   * answer: a read that needs the projected rows (`waitFor` — an outcome, a
   * session loaded again, a listing, shutdown) ends the wait at once, so
   * what it delays is `trellis health`'s lag. Not the turn's public events:
   * an owned step appends them to the outbox with its journal entries, so
   * `StreamEvents` / `SendStreaming` see them at its commit. `0` applies
   * each wake-up at once. Only a small backlog waits: a wake-up that finds
   * 32 entries committed (a chat turn appends two, so about 16 turns'
   * steps, as under load) applies them at once, and a delay ends when that
   * many are reached.
   */
  TRELLIS_TASKS_PROJECTOR_DELAY: env
    .duration({ minMs: 0, maxMs: 1_000 })
    .default(DEFAULT_READ_MODEL_DELAY_MS),
  /** Largest artifact content stored in the database (bytes). */
  TRELLIS_TASKS_MAX_ARTIFACT_BYTES: env
    .int({ min: 0, max: 1_073_741_824 })
    .default(16 * 1024 * 1024),
};

/** The tasks service's validated settings. */
export type TasksConfig = ConfigOf<typeof tasksConfigSchema>;

/** Reads {@link TasksConfig} from an environment. */
export function loadTasksConfig(source: Readonly<Record<string, string | undefined>>): TasksConfig {
  return loadConfig(tasksConfigSchema, source);
}
