/**
 * The log-derived state of session detail (`GET /v1/ui/sessions/{id}`) of
 * the sessions this gateway served lately, so a UI refreshing the page reads
 * only the events appended since its last request instead of the whole log
 * (like the health reads of `../health/monitor.ts`).
 *
 * Per session it keeps a {@link SessionDetailProjector} and a
 * {@link HealthTracker} fed the same events, and the log position of the
 * last one. A request first asks the log for the session's latest event
 * (`EventLog.last`), then reads after the kept position in pages of
 * {@link DEFAULT_PAGE_SIZE}; the first request of a session pages through its
 * whole log. Both are folds over the log in order, so the result is the one
 * a projection of the whole log would give.
 *
 * The state is thrown away and the log read again from its start when it no
 * longer matches the log: the latest event is before the kept position, or
 * another event stands at it (the log was rebuilt or lost events), or an
 * event read does not continue its resource's sequence (the log was rebuilt
 * with the same events at new positions); also when the session's identity
 * changed (agent, lineage) or a request wants a longer channel window than
 * the one kept (the window only grows).
 *
 * It serves no one by itself: the caller checks that the session is visible
 * to the credential (workspace, scope) before asking, as for any read.
 * Bounded: the least recently read session goes first.
 */
import type { Event } from "@trellis/contracts/core";
import type { Session } from "@trellis/contracts/tasks";
import { type EventFilter, type EventLog, MAX_READ_LIMIT } from "@trellis/eventlog";
import { HealthTracker } from "../health/tracker.js";
import { DEFAULT_CHANNEL_ENVELOPES, SessionDetailProjector } from "./session-detail.js";

/** Sessions kept when the options do not say. */
export const DEFAULT_CACHED_SESSIONS = 1_000;
/** Events per read of the log when the options do not say. */
export const DEFAULT_PAGE_SIZE = 1_000;

/** Options of {@link SessionDetailCache}. */
export interface SessionDetailCacheOptions {
  /** The event log the sessions' events are read from (the port: in-process or JetStream). */
  eventLog: EventLog;
  /** Most sessions kept (default {@link DEFAULT_CACHED_SESSIONS}). */
  maxSessions?: number;
  /** Events per read (default {@link DEFAULT_PAGE_SIZE}, at most `MAX_READ_LIMIT`). */
  pageSize?: number;
}

/** A session's state, caught up with the log, handed to {@link SessionDetailCache.read}'s callback. */
export interface SessionLogView {
  detail: SessionDetailProjector;
  health: HealthTracker;
}

interface LogState extends SessionLogView {
  /** What the state was built for: a different one starts over. */
  identity: string;
  /** Position of the last event applied (0: none yet). */
  position: bigint;
  lastEventId: string;
  /** The sequence of the last event applied, per resource. */
  sequences: Map<string, bigint>;
}

interface CachedSession {
  state: LogState | undefined;
  /** Reads of one session take turns: each applies only what the one before it had not. */
  turn: Promise<unknown>;
}

function identityOf(session: Session): string {
  return JSON.stringify([
    session.workspaceId,
    session.agentId,
    session.parentSessionId,
    session.forkedFromEventId,
  ]);
}

/** The key of a session: its workspace and id (session ids are unique per workspace). */
function keyOf(session: Session): string {
  return JSON.stringify([session.workspaceId, session.id]);
}

function resourceOf(event: Event): string {
  return `${event.resource?.object ?? ""}/${event.resource?.id ?? ""}`;
}

/** The per-gateway cache of session detail state (see the module comment). */
export class SessionDetailCache {
  readonly #log: EventLog;
  readonly #maxSessions: number;
  readonly #pageSize: number;
  // By workspace and id. Insertion order = recency of reading: the first key
  // is the least recently read.
  readonly #sessions = new Map<string, CachedSession>();

  constructor(options: SessionDetailCacheOptions) {
    this.#log = options.eventLog;
    this.#maxSessions = Math.max(1, options.maxSessions ?? DEFAULT_CACHED_SESSIONS);
    this.#pageSize = Math.min(MAX_READ_LIMIT, Math.max(1, options.pageSize ?? DEFAULT_PAGE_SIZE));
  }

  /** Sessions kept now. */
  get size(): number {
    return this.#sessions.size;
  }

  /**
   * Catch `session`'s state up with the log and hand it to `use`, whose
   * result is returned. `use` runs before any other read of the session
   * changes the state, and must not keep it. `envelopes` is the channel
   * window the caller will ask the projector for.
   */
  async read<T>(session: Session, envelopes: number, use: (view: SessionLogView) => T): Promise<T> {
    const key = keyOf(session);
    let cached = this.#sessions.get(key);
    if (cached === undefined) {
      cached = { state: undefined, turn: Promise.resolve() };
      if (this.#sessions.size >= this.#maxSessions) {
        const oldest = this.#sessions.keys().next();
        if (!oldest.done) this.#sessions.delete(oldest.value);
      }
    } else {
      this.#sessions.delete(key);
    }
    this.#sessions.set(key, cached);
    const entry = cached;
    const result = entry.turn.then(async () => {
      try {
        entry.state = await this.#caughtUp(session, envelopes, entry.state);
        return use(entry.state);
      } catch (error) {
        // A read that failed halfway leaves nothing half-applied for the next one.
        entry.state = undefined;
        throw error;
      }
    });
    entry.turn = result.catch(() => undefined);
    return result;
  }

  #fresh(session: Session, window: number): LogState {
    return {
      detail: new SessionDetailProjector(session, window),
      health: new HealthTracker(session.id),
      identity: identityOf(session),
      position: 0n,
      lastEventId: "",
      sequences: new Map(),
    };
  }

  async #caughtUp(
    session: Session,
    envelopes: number,
    kept: LogState | undefined,
  ): Promise<LogState> {
    const window = Math.max(envelopes, kept?.detail.window ?? DEFAULT_CHANNEL_ENVELOPES);
    let state =
      kept !== undefined && kept.identity === identityOf(session) && kept.detail.window >= envelopes
        ? kept
        : this.#fresh(session, window);
    const filter: EventFilter = { workspaceId: session.workspaceId, sessionId: session.id };
    const latest = await this.#log.last(filter);
    if (state.position > 0n && latest?.position === state.position) {
      if (latest.event.id === state.lastEventId) return state;
      state = this.#fresh(session, window);
    } else if (state.position > 0n && (latest === undefined || latest.position < state.position)) {
      state = this.#fresh(session, window);
    }
    if (latest === undefined) return state;
    if (await this.#readOn(state, filter)) return state;
    // Not the continuation of what was applied: the log changed under us.
    state = this.#fresh(session, window);
    await this.#readOn(state, filter);
    return state;
  }

  /**
   * Apply the events after `state`'s position, page by page. False when one
   * does not continue its resource's sequence (the rest is then not applied);
   * a fresh state trusts the log as it is.
   */
  async #readOn(state: LogState, filter: EventFilter): Promise<boolean> {
    const check = state.position > 0n;
    for (;;) {
      const page = await this.#log.read({
        filter,
        ...(state.position > 0n ? { after: { afterPosition: state.position } } : {}),
        limit: this.#pageSize,
      });
      for (const { event, position } of page) {
        const resource = resourceOf(event);
        const previous = state.sequences.get(resource);
        if (check && previous !== undefined && event.sequence !== previous + 1n) return false;
        state.sequences.set(resource, event.sequence);
        state.detail.apply(event);
        state.health.apply(event);
        state.position = position;
        state.lastEventId = event.id;
      }
      if (page.length < this.#pageSize) return true;
    }
  }
}
