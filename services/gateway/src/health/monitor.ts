/**
 * Health over REST: `GET /v1/ui/sessions/{id}/health` (the snapshot now) and
 * `GET /v1/ui/sessions/{id}/health/stream` (SSE: a `health_snapshot` frame
 * first, then one whenever the snapshot changes — on a new event, or when the
 * clock alone makes a turn stuck or a runtime limit crossed).
 *
 * Enforcement happens whenever a snapshot is taken: with `action:
 * cancel_turn`, a crossed limit cancels the session's running or waiting turn
 * through `TaskService.CancelTask` (reason `health policy: …`), at most once
 * per turn per gateway. Snapshots are taken on every read and stream frame
 * here, and in the background by the watchdog (./watchdog.ts) for every
 * session with an active turn, observed or not. See docs/architecture.md,
 * "Session health".
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService, type Session, TaskService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { isTrellisError, type Logger } from "@trellis/runtime";
import { sseComment, sseFrame } from "../domain/sse.js";
import type { RestCall } from "../http/context.js";
import { visibleSession } from "../http/routes/common.js";
import { startSse, streamAbort, writeSse, writeSseFailure } from "../http/sse-stream.js";
import { type HealthPolicy, healthPolicyOf } from "./policy.js";
import { ENFORCEMENT_REASON_PREFIX, type HealthEvaluation, HealthTracker } from "./tracker.js";

// Turns this gateway already canceled (bounded; a repeat cancel is harmless anyway).
const enforced = new Set<string>();
const ENFORCED_MEMORY = 10_000;

/** What reading a session's log and enforcing its policy need: a request's, or the watchdog's. */
export interface HealthContext {
  clients: ServiceClients;
  logger: Logger;
  /** Options of the calls to the tasks service (the caller's identity, or none for the system). */
  options(): CallOptions;
}

function contextOf(call: RestCall): HealthContext {
  return { clients: call.ports.clients, logger: call.ports.logger, options: () => call.options() };
}

/** The session's events after `afterId` ("" for all), in log order. */
export async function eventsAfter(
  ctx: HealthContext,
  session: { workspaceId: string; sessionId: string },
  afterId: string,
): Promise<Event[]> {
  const events = ctx.clients.get(EventService);
  const out: Event[] = [];
  for (let after = afterId; ; ) {
    // The largest page ListEvents serves: a long log is read in few requests.
    const page = await events.listEvents(
      { ...session, afterEventId: after, limit: 1000 },
      ctx.options(),
    );
    out.push(...page.events);
    const last = page.events.at(-1);
    if (!page.hasMore || last === undefined) return out;
    after = last.id;
  }
}

/** A session's whole log, in log order, read with the caller's identity. */
export function sessionLog(call: RestCall, session: Session): Promise<Event[]> {
  return eventsAfter(
    contextOf(call),
    { workspaceId: session.workspaceId, sessionId: session.id },
    "",
  );
}

/**
 * Cancel the active turn when the policy says so and a limit is crossed.
 * True when this call canceled it.
 */
export async function enforce(
  ctx: HealthContext,
  policy: HealthPolicy,
  evaluation: HealthEvaluation,
): Promise<boolean> {
  const taskId = evaluation.activeTaskId;
  if (policy.action !== "cancel_turn" || evaluation.breaches.length === 0 || !taskId) return false;
  if (enforced.has(taskId)) return false;
  if (enforced.size >= ENFORCED_MEMORY) enforced.clear();
  enforced.add(taskId);
  const crossed = evaluation.breaches
    .map((b) => `${b.metric} ${b.value} reached the limit ${b.limit}`)
    .join("; ");
  try {
    await ctx.clients
      .get(TaskService)
      .cancelTask({ taskId, reason: `${ENFORCEMENT_REASON_PREFIX} ${crossed}` }, ctx.options());
    ctx.logger.info("health policy canceled a turn", { task_id: taskId, crossed });
    return true;
  } catch (error) {
    // Already finished (or canceled by someone else): nothing left to stop.
    if (isTrellisError(error) && error.reason === "invalid_state_transition") return false;
    // Let a later snapshot try again: the cancel did not happen.
    enforced.delete(taskId);
    ctx.logger.warn("health policy could not cancel a turn", { task_id: taskId, error });
    return false;
  }
}

/** A session's tracker fed `events` (its log, in order), and its policy (validated). */
function trackerFrom(
  session: Session,
  events: readonly Event[],
): { tracker: HealthTracker; policy: HealthPolicy } {
  const policy = healthPolicyOf(session.metadata);
  const tracker = new HealthTracker(session.id);
  for (const event of events) tracker.apply(event);
  return { tracker, policy };
}

/** A session's tracker fed its whole log, and its policy (validated). */
async function trackerOf(
  call: RestCall,
  session: Session,
): Promise<{ tracker: HealthTracker; policy: HealthPolicy; lastId: string }> {
  const events = await sessionLog(call, session);
  return { ...trackerFrom(session, events), lastId: events.at(-1)?.id ?? "" };
}

/**
 * The health of a session whose tracker the caller fed (session detail):
 * `evaluation` is enforced once, like any snapshot read.
 */
export async function healthOfEvaluation(
  call: RestCall,
  policy: HealthPolicy,
  evaluation: HealthEvaluation,
): Promise<JsonObject> {
  await enforce(contextOf(call), policy, evaluation);
  return { object: "session_health", ...evaluation.snapshot };
}

/**
 * Trackers of sessions whose health was read, per gateway (its deps), so a
 * repeated read (a UI polling) reads only the events since the last one
 * instead of the whole log again. By workspace and session id (ids are
 * unique per workspace). Bounded; the least recently read goes.
 */
const readTrackers = new WeakMap<object, Map<string, CachedTracker>>();
const READ_TRACKERS = 1_000;

interface CachedTracker {
  tracker: HealthTracker;
  lastId: string;
  /** Reads of one session take turns: each applies only what the one before it had not. */
  turn: Promise<unknown>;
}

/** `GET /v1/ui/sessions/{id}/health`. */
export async function sessionHealth(call: RestCall, sessionId: string): Promise<JsonObject> {
  const session = await visibleSession(call, sessionId);
  let cache = readTrackers.get(call.ports);
  if (cache === undefined) {
    cache = new Map();
    readTrackers.set(call.ports, cache);
  }
  const key = JSON.stringify([session.workspaceId, session.id]);
  let cached = cache.get(key);
  if (cached === undefined) {
    cached = { tracker: new HealthTracker(session.id), lastId: "", turn: Promise.resolve() };
    if (cache.size >= READ_TRACKERS) cache.delete(cache.keys().next().value as string);
  } else {
    cache.delete(key);
  }
  cache.set(key, cached);
  const entry = cached;
  const read = entry.turn.then(async () => {
    // The policy is checked first: a malformed one is the answer, whatever the log holds.
    const policy = healthPolicyOf(session.metadata);
    const ref = { workspaceId: session.workspaceId, sessionId: session.id };
    for (const event of await eventsAfter(contextOf(call), ref, entry.lastId)) {
      entry.tracker.apply(event);
      entry.lastId = event.id;
    }
    const evaluation = entry.tracker.snapshot(Date.now(), policy);
    await enforce(contextOf(call), policy, evaluation);
    return { object: "session_health", ...evaluation.snapshot } as JsonObject;
  });
  entry.turn = read.catch(() => undefined);
  return read;
}

/** `GET /v1/ui/sessions/{id}/health/stream`. */
export async function streamSessionHealth(call: RestCall, sessionId: string): Promise<void> {
  const { res, ports } = call;
  const session = await visibleSession(call, sessionId);
  // A bad policy or an unreadable log is a plain error response, before the stream opens.
  const { tracker, policy, lastId } = await trackerOf(call, session);
  const context = contextOf(call);

  const { abort, stop } = streamAbort(call);
  startSse(call);

  let lastKey = "";
  let sequence = 0;
  // Snapshots go out one at a time, in order, from events and the clock alike.
  let queue = Promise.resolve();
  const publish = () => {
    queue = queue.then(async () => {
      if (abort.signal.aborted) return;
      const evaluation = tracker.snapshot(Date.now(), policy);
      await enforce(context, policy, evaluation);
      if (evaluation.key === lastKey) return;
      lastKey = evaluation.key;
      sequence += 1;
      await writeSse(
        res,
        sseFrame({
          id: String(sequence),
          event: "health_snapshot",
          data: JSON.stringify({ type: "health_snapshot", payload: evaluation.snapshot }),
        }),
      );
    });
    return queue;
  };
  // The clock can change the snapshot on its own (stuck, runtime): re-judge often enough.
  const tickMs = Math.max(200, Math.min(1000, (policy.stuckAfterSeconds * 1000) / 4));
  const ticker = setInterval(() => void publish(), tickMs);
  ticker.unref();
  const heartbeat = setInterval(() => {
    void writeSse(res, sseComment("ping"));
  }, ports.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();

  try {
    await writeSse(res, sseComment("stream open"));
    await publish();
    const stream = ports.clients
      .get(EventService)
      .streamEvents(
        { sessionId: session.id, afterEventId: lastId },
        { ...call.options({ streaming: true }), signal: abort.signal },
      );
    let seen = lastId;
    for await (const { event } of stream) {
      if (event === undefined || event.id === seen) continue;
      seen = event.id;
      tracker.apply(event);
      await publish();
    }
  } catch (error) {
    if (!abort.signal.aborted) {
      await writeSseFailure(call, error, "stream_error", () =>
        ports.logger.warn("health stream failed", { session_id: session.id, error }),
      );
    }
  } finally {
    clearInterval(ticker);
    clearInterval(heartbeat);
    stop();
    await queue.catch(() => undefined);
    if (!res.writableEnded && !res.destroyed) res.end();
  }
}
