/**
 * The health watchdog: enforces session health policies in the background,
 * so a limit is acted on even when nobody reads or streams the session's
 * health (the REST reads and the health stream enforce too; see ./monitor.ts).
 *
 * Every sweep it lists the tasks that hold a session's turn (WORKING, waiting
 * for input or authorization), brings each of their sessions' trackers up to
 * date from the log (incrementally: only events after the last one applied),
 * judges them against the session's policy at the current time, and cancels
 * the turn when a `cancel_turn` policy is crossed. A turn that makes no
 * progress is flagged `stuck` in the snapshot and logged once as a warning,
 * whatever the policy, so it never hangs silently.
 *
 * A session whose policy only flags (`flag_only`, the default) can show
 * nothing but `stuck` here, and a turn younger than `stuck_after_seconds`
 * cannot be stuck: such a session's log is not read until its turn is that
 * old (the tracker catches up then, from where it stopped). So a sweep over
 * many short turns reads no log at all.
 *
 * One gateway replica sweeps at a time: the sweeper holds the database lock
 * `gateway.health-watchdog`; the others wait on it and take over within one
 * interval when the holder dies. Trackers of sessions with no active turn
 * are dropped, so memory follows the number of running turns.
 */

import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { CallOptions } from "@connectrpc/connect";
import { TaskStatus } from "@trellis/contracts/core";
import { SessionService, TaskService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { isTrellisError, type Logger, sleep } from "@trellis/runtime";
import type { Database, Lease } from "@trellis/storage";
import { enforce, eventsAfter, type HealthContext } from "./monitor.js";
import { type HealthPolicy, healthPolicyOf } from "./policy.js";
import { type HealthEvaluation, HealthTracker } from "./tracker.js";

/** The lock one sweeping replica holds. */
export const WATCHDOG_LOCK = "gateway.health-watchdog";

/** Statuses in which a task holds its session's turn. */
const ACTIVE_STATUSES = [TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED, TaskStatus.AUTH_REQUIRED];

/** Sessions judged per sweep at most (the rest wait for the next one). */
const MAX_SESSIONS_PER_SWEEP = 5_000;

/** Sessions judged at the same time within a sweep. */
const JUDGES = 8;

/** Options of {@link HealthWatchdog}. */
export interface HealthWatchdogOptions {
  clients: ServiceClients;
  logger: Logger;
  /** Holds the sweeping lock (one replica at a time). */
  db: Database<unknown>;
  /** Time between sweeps. */
  intervalMs: number;
  /** The clock (tests). */
  now?: () => number;
}

/** A session with an active turn: its workspace and id (ids are unique per workspace). */
interface SessionRef {
  workspaceId: string;
  sessionId: string;
}

/** A session with an active turn, and when its oldest active turn was created (ms). */
interface ActiveSession extends SessionRef {
  turnSinceMs: number;
}

function keyOf(session: SessionRef): string {
  return JSON.stringify([session.workspaceId, session.sessionId]);
}

interface Watched {
  tracker: HealthTracker;
  /** The session's policy (the defaults when its policy is malformed). */
  policy: HealthPolicy;
  lastEventId: string;
  /** Turns already reported stuck (logged once each). */
  reportedStuck: Set<string>;
}

/** What one sweep did (for tests and logs). */
export interface SweepReport {
  sessions: number;
  canceled: string[];
  stuck: string[];
}

export class HealthWatchdog {
  readonly #o: HealthWatchdogOptions;
  readonly #stop = new AbortController();
  /** By {@link keyOf} the session. */
  readonly #sessions = new Map<string, Watched>();
  readonly #context: HealthContext;
  #running: Promise<void> | undefined;

  constructor(options: HealthWatchdogOptions) {
    this.#o = options;
    // System calls: no caller headers, so every workspace is visible.
    this.#context = {
      clients: options.clients,
      logger: options.logger,
      options: (): CallOptions => ({ signal: this.#stop.signal }),
    };
  }

  start(): void {
    this.#running ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  /** Sweep while holding the lock; wait for it otherwise. */
  async #run(): Promise<void> {
    const stop = this.#stop.signal;
    while (!stop.aborted) {
      let lease: Lease | undefined;
      try {
        lease = await this.#o.db.acquireLock(WATCHDOG_LOCK, { signal: stop });
        const { lost } = lease;
        // First wait one interval: the services start side by side, so the
        // tasks service may not answer yet, and nothing is overdue at start.
        // (Both signals are passed to sleep, which lets go of them after each
        // wait: an AbortSignal.any of the two would leave an entry on the
        // long-lived stop signal per lease for the life of the process.)
        for (;;) {
          await sleep(this.#o.intervalMs, stop, lost);
          if (stop.aborted || lost.aborted) break;
          await this.sweep();
        }
      } catch (error) {
        if (stop.aborted) break;
        this.#o.logger.warn("health watchdog: sweeping failed; retrying", {
          error: error instanceof Error ? error.message : String(error),
        });
        await sleep(this.#o.intervalMs, stop);
      } finally {
        await lease?.release().catch(() => undefined);
        // A new holder starts from the log, not from what this one remembered.
        if (lease?.lost.aborted) this.#sessions.clear();
      }
    }
  }

  /** One pass over every session with an active turn. */
  async sweep(): Promise<SweepReport> {
    const report: SweepReport = { sessions: 0, canceled: [], stuck: [] };
    const active = await this.#activeSessions();
    for (const key of [...this.#sessions.keys()]) {
      if (!active.has(key)) this.#sessions.delete(key);
    }
    // Sessions are judged a few at a time: a cancel waits for the worker to
    // confirm (up to the cancel grace), which must not hold up the others.
    const queue = [...active.values()];
    const judgeNext = async (): Promise<void> => {
      for (let session = queue.shift(); session !== undefined; session = queue.shift()) {
        if (this.#stop.signal.aborted) return;
        try {
          const watched = await this.#watch(session);
          if (!watched) continue;
          report.sessions += 1;
          await this.#judge(session, watched, report);
        } catch (error) {
          if (this.#stop.signal.aborted) return;
          // One session's trouble does not stop the others; it is retried next sweep.
          this.#sessions.delete(keyOf(session));
          this.#o.logger.warn("health watchdog: judging a session failed", {
            workspace_id: session.workspaceId,
            session_id: session.sessionId,
            error: error instanceof Error ? error.message : String(error),
          });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(JUDGES, queue.length) }, judgeNext));
    return report;
  }

  /** The sessions of the tasks holding a turn now, by {@link keyOf}. */
  async #activeSessions(): Promise<Map<string, ActiveSession>> {
    const tasks = this.#o.clients.get(TaskService);
    const out = new Map<string, ActiveSession>();
    let pageToken = "";
    do {
      const page = await tasks.listTasks(
        { statuses: ACTIVE_STATUSES, pageSize: 500, pageToken },
        this.#context.options(),
      );
      for (const task of page.tasks) {
        const session = { workspaceId: task.workspaceId, sessionId: task.sessionId };
        // A task without a creation time counts as old: its log is read.
        const since = task.createdAt ? timestampMs(task.createdAt) : 0;
        const key = keyOf(session);
        const known = out.get(key);
        if (!known || since < known.turnSinceMs) out.set(key, { ...session, turnSinceMs: since });
      }
      pageToken = page.nextPageToken;
    } while (pageToken && out.size < MAX_SESSIONS_PER_SWEEP);
    return out;
  }

  /** The session's tracker, loaded on first sight (undefined: the session is gone). */
  async #watch(ref: SessionRef): Promise<Watched | undefined> {
    const known = this.#sessions.get(keyOf(ref));
    if (known) return known;
    const { sessionId } = ref;
    let policy: HealthPolicy;
    try {
      const { session } = await this.#o.clients
        .get(SessionService)
        .getSession({ sessionId, workspaceId: ref.workspaceId }, this.#context.options());
      // Another workspace's session of the same id is not this one's policy.
      if (!session || session.workspaceId !== ref.workspaceId) return undefined;
      policy = healthPolicyOf(session.metadata);
    } catch (error) {
      if (isTrellisError(error) && error.reason === "resource_not_found") return undefined;
      if (isTrellisError(error) && error.reason === "invalid_request") {
        // A malformed policy is refused where it is read; here only the defaults apply.
        policy = healthPolicyOf(undefined);
      } else {
        throw error;
      }
    }
    const watched: Watched = {
      tracker: new HealthTracker(sessionId),
      policy,
      lastEventId: "",
      reportedStuck: new Set(),
    };
    this.#sessions.set(keyOf(ref), watched);
    return watched;
  }

  async #judge(session: ActiveSession, watched: Watched, report: SweepReport): Promise<void> {
    const now = this.#o.now?.() ?? Date.now();
    // Only `stuck` could show, and no turn this young is (see the module comment).
    const stuckMs = watched.policy.stuckAfterSeconds * 1000;
    if (watched.policy.action !== "cancel_turn" && now - session.turnSinceMs < stuckMs) return;
    for (const event of await eventsAfter(this.#context, session, watched.lastEventId)) {
      watched.tracker.apply(event);
      watched.lastEventId = event.id;
    }
    const evaluation: HealthEvaluation = watched.tracker.snapshot(now, watched.policy);
    const flags = evaluation.snapshot.flags as { stuck?: boolean } | undefined;
    const taskId = evaluation.activeTaskId;
    if (flags?.stuck && taskId && !watched.reportedStuck.has(taskId)) {
      watched.reportedStuck.add(taskId);
      report.stuck.push(taskId);
      this.#o.logger.warn("a turn is stuck: it has recorded nothing for its stuck_after_seconds", {
        workspace_id: session.workspaceId,
        session_id: session.sessionId,
        task_id: taskId,
        stuck_after_seconds: watched.policy.stuckAfterSeconds,
        action: watched.policy.action,
      });
    }
    if (taskId && (await enforce(this.#context, watched.policy, evaluation))) {
      report.canceled.push(taskId);
    }
  }
}
