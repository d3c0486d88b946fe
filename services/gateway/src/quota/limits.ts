/**
 * Rate limits (429 `rate_limited` + `Retry-After`) and hard quotas (422
 * `policy_violation`), checked before a write runs, on counters every gateway
 * replica shares (`store.ts`).
 *
 * - Every write (REST POST/DELETE, WebSocket command frame) counts against the
 *   actor's and the workspace's rate.
 * - Every read (REST GET, a read RPC; a stream when it opens) counts against
 *   the actor's read rate, a bucket of its own so reads never use up writes;
 *   read counts are written behind, in batches (`write-behind-counters.ts`, which
 *   states the bounded overshoot across replicas); write counts too where
 *   the gateway is the only replica (embedded, `writesFlushMs`). Elsewhere
 *   write counts are exact across replicas, granted from blocks of units a
 *   replica took from the table (`reserved-counters.ts`).
 * - A task submission also counts against its agent's rate and, as a hard
 *   quota checked before the task exists, the workspace's tasks per UTC day.
 *   A submission that then fails gives its quota unit back. A REST connector
 *   delivery is admitted like one and keeps its unit only when it made a
 *   new task (not for a redelivery or a message).
 */

import type { Caller } from "@trellis/platform";
import { type HarnErrorResponse, harnError } from "../domain/errors.js";
import { JsonReader } from "../domain/json-input.js";
import type { RestCall, RouteLimits, RouteSpec } from "../http/context.js";
import { errorResponse, type RestResponse } from "../http/io.js";
import { visibleSession } from "../http/routes/common.js";
import type { Admission, GuardedOperation, QuotaReport } from "./admission.js";
import { dayMs, type LimitsConfig, type RateLimit } from "./config.js";
import { ReservedCounters } from "./reserved-counters.js";
import type { CounterResult, CounterTake, QuotaCounters } from "./store.js";
import { WriteBehindCounters } from "./write-behind-counters.js";

/** How long a replica keeps spare write units nobody uses before it gives them back. */
const BLOCK_HOLD_MS = 1_000;

/** What the write counters do, written behind or exact (see the two classes). */
type WriteCounters = Pick<WriteBehindCounters, "takeAll" | "refund" | "usage" | "close">;

/** A connector delivery: it may start a task (see {@link deliveryMadeTask}). */
const deliveryRoute = "POST /v1/connectors/{connector_id}/deliveries";

/** Routes that start a task (and so use the agent rate and the daily task quota). */
const taskRoutes = new Set([
  "POST /v1/sessions/{session_id}/tasks",
  "POST /v1/tasks",
  deliveryRoute,
]);

/**
 * Whether a delivery's answer says it made a task: a new delivery (201) of a
 * TASK connector. A redelivery (200) or a message made nothing to count.
 */
function deliveryMadeTask(response: RestResponse): boolean {
  if (response.status !== 201 || typeof response.body !== "string") return false;
  try {
    const body = JSON.parse(response.body) as { task_id?: unknown };
    return typeof body.task_id === "string";
  } catch {
    return false;
  }
}

export type { Admission, GuardedOperation, QuotaReport };

/** The key a quota's limit and usage go under, e.g. `tasks_per_day`, `writes_per_60s`. */
export function quotaLimitName(q: QuotaReport): string {
  return q.counts === "tasks_per_day" ? q.counts : `${q.counts}_per_${q.periodMs / 1000}s`;
}

/** Why a quota refuses now (its usage reached the limit), or null. */
export function quotaExhaustion(q: QuotaReport): "quota_exceeded" | "rate_limited" | null {
  if (q.used < q.limit) return null;
  return q.hard ? "quota_exceeded" : "rate_limited";
}

/** How the calls of one route are counted. */
interface RoutePlan {
  operation(call: RestCall): GuardedOperation;
  /** Whether the response means a task started (undefined: any success). */
  startedBy: ((response: RestResponse) => boolean) | undefined;
}

export class RequestLimits implements RouteLimits {
  private readonly wrapped = new WeakMap<RouteSpec, RouteSpec>();
  private readonly plans = new WeakMap<RouteSpec, RoutePlan>();
  private readonly reads: WriteBehindCounters;
  private readonly writes: WriteCounters;

  constructor(
    counters: QuotaCounters,
    readonly config: LimitsConfig,
    onFlushError: (error: unknown) => void = (error) =>
      console.warn(`[gateway] writing rate counters failed: ${String(error)}`),
  ) {
    this.reads = new WriteBehindCounters(counters, config.readsFlushMs ?? 0, onFlushError);
    const writesFlushMs = config.writesFlushMs ?? 0;
    this.writes =
      writesFlushMs > 0
        ? new WriteBehindCounters(counters, writesFlushMs, onFlushError)
        : new ReservedCounters(counters, {
            maxBlock: config.writesBlock ?? 1,
            holdMs: BLOCK_HOLD_MS,
            onError: onFlushError,
          });
  }

  /** Write the counts still held in memory (at shutdown). */
  async close(): Promise<void> {
    await Promise.all([this.reads.close(), this.writes.close()]);
  }

  /** The route with its handler behind the limits (reads as they are when reads are not limited). */
  wrap(route: RouteSpec): RouteSpec {
    if (this.planOf(route) === undefined) return route;
    let guarded = this.wrapped.get(route);
    if (guarded === undefined) {
      guarded = { ...route, handle: (call) => this.limit(route, call, () => route.handle(call)) };
      this.wrapped.set(route, guarded);
    }
    return guarded;
  }

  /** Run `work`, a call of `route`, behind the limits (the REST pipeline's `limits` stage). */
  limit(
    route: RouteSpec,
    call: RestCall,
    work: () => Promise<RestResponse | undefined>,
  ): Promise<RestResponse | undefined> {
    const plan = this.planOf(route);
    if (plan === undefined) return work();
    return this.guard(call, plan.operation(call), work, plan.startedBy);
  }

  /** What a route counts as; undefined when nothing limits it (reads, when not limited). */
  private planOf(route: RouteSpec): RoutePlan | undefined {
    const isRead = route.method === "GET";
    if (isRead && this.config.reads === undefined) return undefined;
    let plan = this.plans.get(route);
    if (plan === undefined) {
      const key = `${route.method} ${route.path}`;
      const isTask = taskRoutes.has(key);
      plan = {
        operation: (call) =>
          isRead ? { kind: "read" } : isTask ? taskOperation(call, route.path) : { kind: "write" },
        startedBy: key === deliveryRoute ? deliveryMadeTask : undefined,
      };
      this.plans.set(route, plan);
    }
    return plan;
  }

  /**
   * Run `work` unless a limit refuses it (then the refusal is the response).
   * Anonymous callers (public routes) are not counted here.
   */
  async guard(
    call: RestCall,
    operation: GuardedOperation,
    work: () => Promise<RestResponse | undefined>,
    /** Whether the response means a task started (default: any success). */
    startedBy: (response: RestResponse) => boolean = (response) => response.status < 300,
  ): Promise<RestResponse | undefined> {
    const admission = await this.admit(
      call.caller,
      call.requestId,
      operation,
      async (sessionId) =>
        // The session's agent (a 404 here is the same one the route would give).
        (await visibleSession(call, sessionId)).agentId,
    );
    if (!admission.ok) return errorResponse(admission.refusal);
    let started = false;
    try {
      const response = await work();
      started = response !== undefined && startedBy(response);
      return response;
    } finally {
      await admission.settle(started);
    }
  }

  /**
   * Check and count one operation of `caller` (any transport). When admitted,
   * `settle(started)` must follow the work: a task that did not start gives
   * its quota unit back.
   */
  async admit(
    caller: Caller,
    requestId: string,
    operation: GuardedOperation,
    agentOfSession: (sessionId: string) => Promise<string>,
  ): Promise<Admission> {
    const admitted = { ok: true as const, settle: async () => {} };
    const { actorId, workspaceId } = caller;
    if (actorId === "" && workspaceId === "") return admitted;
    const { actor, workspace, agent, reads, tasksPerDay } = this.config;
    // The counters, in the order they are taken (taking stops at the first refusal).
    const counters: Counter[] = [];
    const rate = (bucket: string, limit: RateLimit | undefined, scope: RateScope) => {
      if (limit !== undefined) counters.push({ bucket, ...limit, kind: scope });
    };
    if (operation.kind === "read") {
      if (reads === undefined) return admitted;
      // Reads are counted write-behind (write-behind-counters.ts): usually no statement.
      const taken = await this.reads.take(
        `rate:read:${workspaceId}:${actorId}`,
        reads.periodMs,
        reads.limit,
      );
      return taken.allowed
        ? admitted
        : { ok: false, refusal: rateRefusal(requestId, reads, "reads", taken) };
    }
    rate(`rate:actor:${workspaceId}:${actorId}`, actor, "actor");
    rate(`rate:workspace:${workspaceId}`, workspace, "workspace");
    if (operation.kind === "task") {
      let agentId = operation.agentId;
      if (agent && !agentId && operation.sessionId) {
        // The session's agent is looked up only once the caller's rates admit it.
        const refusal = await this.take(requestId, counters.splice(0), workspaceId);
        if (refusal) return { ok: false, refusal };
        agentId = await agentOfSession(operation.sessionId);
      }
      if (agent && agentId) rate(`rate:agent:${workspaceId}:${agentId}`, agent, "agent");
      if (tasksPerDay !== undefined) {
        counters.push({
          bucket: tasksPerDayBucket(workspaceId),
          periodMs: dayMs,
          limit: tasksPerDay,
          kind: "tasks_per_day",
        });
      }
    }
    const refusal = await this.take(requestId, counters, workspaceId);
    if (refusal) return { ok: false, refusal };
    const quota = counters.find((c) => c.kind === "tasks_per_day");
    if (quota?.windowStart === undefined) return admitted;
    const windowStart = quota.windowStart;
    return {
      ok: true,
      settle: async (started: boolean) => {
        // No task exists: the unit goes back (best effort).
        if (!started) await this.writes.refund(quota.bucket, windowStart).catch(() => undefined);
      },
    };
  }

  /**
   * Take `counters` (in one statement, or none when written behind); the
   * refusal of the first one refused, if any. Granted counters get their
   * `windowStart`.
   */
  private async take(
    requestId: string,
    counters: Counter[],
    workspaceId: string,
  ): Promise<HarnErrorResponse | undefined> {
    if (counters.length === 0) return undefined;
    const results = await this.writes.takeAll(counters);
    for (const [i, taken] of results.entries()) {
      const counter = counters[i] as Counter;
      if (taken.allowed) {
        counter.windowStart = taken.windowStart;
        continue;
      }
      return counter.kind === "tasks_per_day"
        ? quotaRefusal(requestId, workspaceId, counter.limit, taken)
        : rateRefusal(requestId, counter, counter.kind, taken);
    }
    return undefined;
  }

  /**
   * The quotas and limits that apply to a workspace, with its current usage;
   * with `actorId`, also that actor's own write and read rates (what throttles
   * the caller first).
   */
  async report(workspaceId: string, actorId?: string): Promise<QuotaReport[]> {
    const out: QuotaReport[] = [];
    const { tasksPerDay, workspace, actor, reads } = this.config;
    if (tasksPerDay !== undefined) {
      const usage = await this.writes.usage(tasksPerDayBucket(workspaceId), dayMs);
      out.push({
        id: `quota_tasks_per_day_${workspaceId}`,
        scope: "workspace",
        counts: "tasks_per_day",
        limit: tasksPerDay,
        periodMs: dayMs,
        ...usage,
        hard: true,
      });
    }
    if (workspace) {
      const usage = await this.writes.usage(`rate:workspace:${workspaceId}`, workspace.periodMs);
      out.push({
        id: `quota_write_rate_${workspaceId}`,
        scope: "workspace",
        counts: "writes",
        limit: workspace.limit,
        periodMs: workspace.periodMs,
        ...usage,
        hard: false,
      });
    }
    if (actorId && actor) {
      const bucket = `rate:actor:${workspaceId}:${actorId}`;
      out.push({
        id: `quota_actor_write_rate_${workspaceId}_${actorId}`,
        scope: "workspace",
        counts: "writes",
        actorId,
        limit: actor.limit,
        periodMs: actor.periodMs,
        ...(await this.writes.usage(bucket, actor.periodMs)),
        hard: false,
      });
    }
    if (actorId && reads) {
      const bucket = `rate:read:${workspaceId}:${actorId}`;
      out.push({
        id: `quota_actor_read_rate_${workspaceId}_${actorId}`,
        scope: "workspace",
        counts: "reads",
        actorId,
        limit: reads.limit,
        periodMs: reads.periodMs,
        ...(await this.reads.usage(bucket, reads.periodMs)),
        hard: false,
      });
    }
    return out;
  }
}

type RateScope = "actor" | "workspace" | "agent" | "reads";

const rateSubject: Record<RateScope, string> = {
  actor: "this actor",
  workspace: "this workspace",
  agent: "this agent",
  reads: "reads of this actor",
};

/** A counter of one admission. */
interface Counter extends CounterTake {
  kind: RateScope | "tasks_per_day";
  /** Set once granted: the window its unit was counted in. */
  windowStart?: Date;
}

/** 429 for a refused rate. */
function rateRefusal(
  requestId: string,
  rate: RateLimit,
  scope: RateScope,
  taken: CounterResult,
): HarnErrorResponse {
  const retryAfter = Math.max(1, Math.ceil((taken.resetAt.getTime() - Date.now()) / 1000));
  return harnError(
    "rate_limited",
    `too many requests for ${rateSubject[scope]}: at most ${rate.limit} per ${rate.periodMs / 1000}s; retry after ${retryAfter}s`,
    {
      requestId,
      details: {
        scope,
        limit: rate.limit,
        window_seconds: rate.periodMs / 1000,
        reset_at: taken.resetAt.toISOString(),
        retry_after_seconds: retryAfter,
      },
      headers: { "retry-after": String(retryAfter) },
    },
  );
}

/** 422 for the daily task quota. */
function quotaRefusal(
  requestId: string,
  workspaceId: string,
  tasksPerDay: number,
  taken: CounterResult,
): HarnErrorResponse {
  return harnError(
    "policy_violation",
    `workspace ${workspaceId} reached its quota of ${tasksPerDay} tasks per day; it resets at ${taken.resetAt.toISOString()}`,
    {
      requestId,
      details: {
        reason: "quota_exceeded",
        quota_id: `quota_tasks_per_day_${workspaceId}`,
        limit: tasksPerDay,
        used: taken.used,
        reset_at: taken.resetAt.toISOString(),
      },
    },
  );
}

function tasksPerDayBucket(workspaceId: string): string {
  return `quota:tasks_per_day:${workspaceId}`;
}

/** The session and agent a task submission names (read leniently: the route validates). */
function taskOperation(call: RestCall, path: string): GuardedOperation {
  let agentId: string | undefined;
  let sessionId = call.params.session_id;
  try {
    const body = JsonReader.body(call.body);
    agentId = body.string("persona_id");
    if (path === "/v1/tasks") sessionId = body.string("session_id");
  } catch {
    // A malformed body: the route refuses it with the precise error.
  }
  return { kind: "task", sessionId, agentId };
}
