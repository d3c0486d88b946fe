/**
 * A session's health, derived from its event log (a projection, like the UI
 * stream, and fed the same events in log order). The tracker keeps counters;
 * {@link HealthTracker.snapshot} judges them against the session's policy at
 * a given time, because `stuck` and the runtime depend on the clock.
 *
 * It reads the UI projection's envelopes (every tier) rather than raw events,
 * so tools, approvals, usage and turns mean exactly what the UI shows:
 *
 * - runtime: the summed `elapsed_ms` of ended turns, plus the running turn's time so far;
 * - tokens / cost: `usage` (from `agent.model_call`): input + output tokens, `cost_usd`;
 * - failed tool calls: `tool_outcome` with status `error` or `timeout`;
 * - loop warnings: the same tool with the same arguments a third (fourth, …) time in a row in one turn;
 * - context warnings: `context_warning` since the last `context_compacted`;
 * - waiting: a turn is `approval_required` and not yet answered;
 * - stuck: a turn runs and the log has had nothing from it for `stuck_after_seconds`;
 * - degraded: the last ended turn failed, a tool failed in the current turn, or
 *   the router placed the run degraded (`agent.routed`);
 * - budget pressure: a metric reached 80 % of its limit, or a context warning is open.
 *
 * A turn canceled with a reason starting `health policy:` was stopped by the
 * policy; the latest such cancel is the snapshot's `enforcement`, read back
 * from the log so it survives restarts.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Event } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { UiProjector } from "../ui/projection/index.js";
import { type HealthPolicy, policyJson } from "./policy.js";

/** The reason prefix of a turn the health policy canceled. */
export const ENFORCEMENT_REASON_PREFIX = "health policy:";

/** Share of a limit at which `budget_pressure` is raised. */
const PRESSURE_RATIO = 0.8;

interface RunningTurn {
  taskId: string;
  startedMs: number;
  lastActivityMs: number;
  failedTools: number;
  lastCall: string;
  repeats: number;
}

/** A limit the session crossed. */
export interface HealthBreach {
  metric: string;
  limit: number;
  value: number;
}

/** A snapshot with what enforcement needs. */
export interface HealthEvaluation {
  snapshot: JsonObject;
  /** The limits crossed now. */
  breaches: HealthBreach[];
  /** The turn enforcement would cancel (running or waiting), if any. */
  activeTaskId: string | undefined;
  /** What changes when the snapshot changes (without clock-driven numbers). */
  key: string;
}

function eventMs(event: Event): number | undefined {
  return event.createdAt ? Number(timestampMs(event.createdAt)) : undefined;
}

function numberOf(value: JsonValue | undefined): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

const round = (value: number, digits = 2) => Number(value.toFixed(digits));

/** Accumulates one session's events; judges them with {@link snapshot}. */
export class HealthTracker {
  readonly #sessionId: string;
  readonly #ui: UiProjector;
  readonly #running = new Map<string, RunningTurn>();
  readonly #waiting = new Set<string>();
  #endedRuntimeMs = 0;
  #tokens = 0;
  #costUsd = 0;
  #failedTools = 0;
  #loopWarnings = 0;
  #contextWarnings = 0;
  #lastTurnFailed = false;
  #routedDegraded = false;
  #closed = false;
  #enforcement: JsonObject | null = null;
  #lastEventId = "";
  #lastEventMs: number | undefined;

  constructor(sessionId: string, ui?: UiProjector) {
    this.#sessionId = sessionId;
    this.#ui = ui ?? new UiProjector({ sessionId });
  }

  /** The id of the last event applied. */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** Apply the session's next event (log order). */
  apply(event: Event): void {
    const at = eventMs(event) ?? this.#lastEventMs ?? 0;
    this.#lastEventId = event.id;
    this.#lastEventMs = at;
    const running = event.taskId ? this.#running.get(event.taskId) : undefined;
    if (running) running.lastActivityMs = at;
    if (event.kind === EVENT_KIND.routed && event.payload?.kind.case === "data") {
      this.#routedDegraded = event.payload.kind.value.degraded === true;
    }
    for (const envelope of this.#ui.project(event)) {
      const payload = { ...envelope.payload, ...envelope.debug };
      const taskId = typeof payload.task_id === "string" ? payload.task_id : "";
      switch (envelope.type) {
        case "session_state":
          if (payload.status === "running" && taskId !== "" && !this.#running.has(taskId)) {
            this.#running.set(taskId, {
              taskId,
              startedMs: at,
              lastActivityMs: at,
              failedTools: 0,
              lastCall: "",
              repeats: 0,
            });
          }
          if (payload.status === "closed") this.#closed = true;
          break;
        case "approval_required":
          this.#waiting.add(taskId);
          break;
        case "approval_applied":
          this.#waiting.delete(taskId);
          break;
        case "tool_call": {
          const turn = this.#running.get(taskId);
          if (!turn) break;
          const signature = `${String(payload.name)} ${JSON.stringify(payload.arguments ?? null)}`;
          turn.repeats = signature === turn.lastCall ? turn.repeats + 1 : 1;
          turn.lastCall = signature;
          if (turn.repeats >= 3) this.#loopWarnings += 1;
          break;
        }
        case "tool_outcome":
          if (payload.status === "error" || payload.status === "timeout") {
            // A call the turn's own failure settled is the turn's failure, not the tool's.
            if (typeof payload.reason === "string") break;
            this.#failedTools += 1;
            const turn = this.#running.get(taskId);
            if (turn) turn.failedTools += 1;
          }
          break;
        case "usage":
          this.#tokens += numberOf(payload.input_tokens) + numberOf(payload.output_tokens);
          this.#costUsd += numberOf(payload.cost_usd);
          break;
        case "context_warning":
          this.#contextWarnings += 1;
          break;
        case "context_compacted":
          this.#contextWarnings = 0;
          break;
        case "completed":
          this.#lastTurnFailed = false;
          break;
        case "error": {
          const canceled = payload.code === "turn_canceled";
          this.#lastTurnFailed = !canceled;
          const message = typeof payload.message === "string" ? payload.message : "";
          if (canceled && message.startsWith(ENFORCEMENT_REASON_PREFIX)) {
            this.#enforcement = {
              action: "cancel_turn",
              task_id: taskId,
              reason: message,
              event_id: event.id,
            };
          }
          break;
        }
        case "turn_end": {
          const turn = this.#running.get(taskId);
          this.#running.delete(taskId);
          this.#waiting.delete(taskId);
          const elapsed = numberOf(payload.elapsed_ms);
          this.#endedRuntimeMs +=
            elapsed > 0 ? elapsed : turn ? Math.max(0, at - turn.startedMs) : 0;
          break;
        }
      }
    }
  }

  /** The snapshot at `nowMs` under `policy`. */
  snapshot(nowMs: number, policy: HealthPolicy): HealthEvaluation {
    const turns = [...this.#running.values()];
    const runningMs = turns.reduce((sum, t) => sum + Math.max(0, nowMs - t.startedMs), 0);
    const runtimeMs = this.#endedRuntimeMs + runningMs;
    const stuckMs = policy.stuckAfterSeconds * 1000;
    const stuckTurns = turns.filter(
      (t) => !this.#waiting.has(t.taskId) && nowMs - t.lastActivityMs >= stuckMs,
    );
    const waiting = this.#waiting.size > 0;
    const degradedReasons: string[] = [];
    if (this.#lastTurnFailed) degradedReasons.push("the last turn failed");
    if (turns.some((t) => t.failedTools > 0))
      degradedReasons.push("a tool failed in the running turn");
    if (this.#routedDegraded) degradedReasons.push("the run was placed degraded");

    const metrics: Array<[string, number, number | undefined]> = [
      ["runtime_minutes", runtimeMs / 60_000, policy.maxRuntimeMinutes],
      ["tokens", this.#tokens, policy.maxTokens],
      ["cost_usd", this.#costUsd, policy.maxCostUsd],
      ["failed_tool_calls", this.#failedTools, policy.maxFailedToolCalls],
      ["loop_warnings", this.#loopWarnings, policy.maxLoopWarnings],
    ];
    const breaches: HealthBreach[] = [];
    const pressure: string[] = [];
    for (const [metric, value, limit] of metrics) {
      if (limit === undefined) continue;
      // A limit of 0 allows none at all.
      if (limit > 0 ? value >= limit : value > 0) {
        breaches.push({ metric, limit, value: round(value, 3) });
      } else if (limit > 0 && value >= limit * PRESSURE_RATIO) {
        pressure.push(`${metric} at ${Math.round((value / limit) * 100)}% of ${limit}`);
      }
    }
    if (this.#contextWarnings > 0) pressure.push("the context is near its token budget");
    for (const breach of breaches)
      pressure.push(`${breach.metric} ${breach.value} ≥ ${breach.limit}`);

    const flags = {
      stuck: stuckTurns.length > 0,
      waiting,
      degraded: degradedReasons.length > 0,
      budget_pressure: pressure.length > 0,
    };
    let score = 100;
    if (flags.stuck) score -= 40;
    if (flags.degraded) score -= 25;
    if (flags.budget_pressure) score -= 15 + 10 * Math.min(breaches.length, 2);
    if (flags.waiting) score -= 5;
    score -= Math.min(15, 3 * this.#failedTools + 5 * this.#loopWarnings);
    score = Math.max(0, Math.min(100, score));
    if (policy.minScore !== undefined && score < policy.minScore) {
      breaches.push({ metric: "score", limit: policy.minScore, value: score });
    }

    const reasons: JsonObject[] = [
      ...stuckTurns.map((t) => ({
        flag: "stuck",
        message: `turn ${t.taskId} has recorded nothing for ${Math.round((nowMs - t.lastActivityMs) / 1000)} s (limit ${policy.stuckAfterSeconds} s)`,
      })),
      ...[...this.#waiting].map((id) => ({
        flag: "waiting",
        message: `turn ${id} waits for an operator`,
      })),
      ...degradedReasons.map((message) => ({ flag: "degraded", message })),
      ...pressure.map((message) => ({ flag: "budget_pressure", message })),
    ];
    const status = score >= 80 ? "healthy" : score >= 50 ? "watch" : "unhealthy";
    const recovery = flags.stuck
      ? "cancel the stuck turn and resubmit, or raise stuck_after_seconds for slow agents"
      : waiting
        ? "answer the pending approval"
        : breaches.length > 0
          ? "raise the crossed limit in the session's health_policy or start a new session"
          : flags.degraded
            ? "inspect the failed turn or tool in the timeline"
            : null;
    const activeTaskId = turns[0]?.taskId ?? [...this.#waiting][0];
    const snapshot: JsonObject = {
      session_id: this.#sessionId,
      score,
      status,
      closed: this.#closed,
      flags,
      reasons,
      recovery_hint: recovery,
      metrics: {
        runtime_ms: Math.round(runtimeMs),
        total_tokens: this.#tokens,
        cost_usd: round(this.#costUsd, 6),
        failed_tool_calls: this.#failedTools,
        loop_warnings: this.#loopWarnings,
        context_warnings: this.#contextWarnings,
        running_task_id: turns[0]?.taskId ?? null,
        idle_ms: turns[0] ? Math.max(0, nowMs - turns[0].lastActivityMs) : null,
      },
      policy: {
        health: policyJson(policy),
        breaches: breaches.map((b) => ({ metric: b.metric, limit: b.limit, value: b.value })),
        enforcement: this.#enforcement,
      },
      last_event_id: this.#lastEventId || null,
    };
    // Clock-driven numbers (runtime, idle time) alone do not make a new snapshot.
    const key = JSON.stringify([
      score,
      status,
      this.#closed,
      flags,
      reasons.map((r) => r.flag),
      breaches.map((b) => b.metric),
      this.#enforcement,
      [this.#tokens, this.#costUsd, this.#failedTools, this.#loopWarnings, this.#contextWarnings],
    ]);
    return { snapshot, breaches, activeTaskId, key };
  }
}
