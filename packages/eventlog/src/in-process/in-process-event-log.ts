import { clone } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import {
  eventMatches,
  positionOf,
  readLimit,
  resourceKey,
  validateEvents,
  validateFilter,
} from "../address.js";
import { changedOrAborted } from "../async-queue.js";
import { DEFAULT_EVENT_WINDOW } from "../defaults.js";
import { cursorExpired, invalidRequest, sequenceConflict } from "../errors.js";
import type {
  AppendResult,
  ConsumedEvent,
  Cursor,
  DurableConsumerOptions,
  EventFilter,
  EventLog,
  LoggedEvent,
  ReadQuery,
  SubscribeQuery,
} from "../event-log.js";
import type { EventArchive } from "./event-archive.js";
import {
  assertOpen,
  type ConsumerPositionStore,
  DurableCursor,
  Journal,
  type JournalBackfill,
  type JournalEntry,
} from "./journal.js";

/** Events to start from: bare events get positions 1, 2, …; logged ones keep theirs. */
export type EventHistory = Iterable<LoggedEvent | Event>;

/** Events read from the archive per round trip when a subscriber catches up. */
const ARCHIVE_PAGE = 1000;

/** Options of {@link InProcessEventLog}. */
export interface InProcessEventLogOptions {
  /** History to load at construction (see {@link InProcessEventLog.hydrate}). */
  history?: EventHistory;
  /**
   * Where durable consumers keep their acked position. Without it positions
   * live in memory and a restart replays from the start.
   */
  consumerPositions?: ConsumerPositionStore;
  /** Default redelivery delay of an unacked event (30 s). */
  defaultAckWaitMs?: number;
  /**
   * The durable store that holds every event of this log (embedded mode: the
   * outbox). With it the log keeps only the newest {@link window} events in
   * memory and reads older ones from here when a reader, subscriber,
   * durable consumer or event-id cursor reaches back that far; events then
   * enter only through {@link InProcessEventLog.hydrate} and
   * {@link InProcessEventLog.appendLogged}, with the archive's positions.
   * Without it the log keeps everything in memory.
   */
  archive?: EventArchive;
  /**
   * Events kept in memory when there is an archive (default
   * {@link DEFAULT_EVENT_WINDOW}). Trimming runs once a sixteenth more have
   * piled up, so the log holds at most `window + window / 16`.
   */
  window?: number;
}

/** Options of {@link InProcessEventLog.open}: history may be streamed (e.g. paged from the outbox table). */
export interface OpenInProcessEventLogOptions extends Omit<InProcessEventLogOptions, "history"> {
  history?: EventHistory | AsyncIterable<LoggedEvent | Event>;
}

interface ResourceHead {
  sequence: bigint;
  eventId: string;
}

function isLogged(item: LoggedEvent | Event): item is LoggedEvent {
  return "event" in item && "position" in item;
}

/**
 * The embedded-mode {@link EventLog}: one process, events in memory.
 *
 * Durability comes from outside: in embedded mode the database outbox table is
 * the durable log. The log is built over it as its {@link EventArchive}: at
 * start it loads the newest events ({@link InProcessEventLog.open},
 * `history`), the outbox relay hands it each new event with its outbox
 * position ({@link InProcessEventLog.appendLogged}), so positions are the
 * outbox's and survive restarts, and whatever fell out of the in-memory
 * window is read back from the outbox. A {@link ConsumerPositionStore} lets
 * durable consumers resume where they were. Events handed out are shared
 * with the log: treat them as read-only.
 *
 * @example
 *   const log = await InProcessEventLog.open({
 *     archive,                             // EventArchive over the outbox
 *     history: newestOutboxRows,           // LoggedEvent[], position order
 *     consumerPositions: outbox.positions, // { load, save }
 *   });
 */
export class InProcessEventLog implements EventLog {
  readonly #journal = new Journal<Event>();
  /** The held events by id (only those in memory). */
  readonly #byId = new Map<string, LoggedEvent>();
  /** Per resource address, its newest event, while that event is held. */
  readonly #heads = new Map<string, ResourceHead>();
  readonly #consumers = new Map<
    string,
    Promise<{ cursor: DurableCursor<Event>; scope: { filter: DurableConsumerOptions["filter"] } }>
  >();
  readonly #positions: ConsumerPositionStore | undefined;
  readonly #defaultAckWaitMs: number;
  readonly #archive: EventArchive | undefined;
  readonly #window: number;
  /** Trim only once this many events above the window piled up (one splice per batch). */
  readonly #slack: number;
  /** `appendLogged` calls, one after the other (one may wait for the archive). */
  #appending: Promise<unknown> = Promise.resolve();

  constructor(options: InProcessEventLogOptions = {}) {
    this.#positions = options.consumerPositions;
    this.#defaultAckWaitMs = options.defaultAckWaitMs ?? 30_000;
    this.#archive = options.archive;
    const window = options.window ?? DEFAULT_EVENT_WINDOW;
    if (!Number.isInteger(window) || window < 1) {
      throw invalidRequest("window must be a positive integer", "window");
    }
    this.#window = this.#archive ? window : Number.POSITIVE_INFINITY;
    this.#slack = this.#archive ? Math.floor(window / 16) : 0;
    if (options.history) this.hydrate(options.history);
  }

  /** Create a log and load its history, which may be an async stream. */
  static async open(options: OpenInProcessEventLogOptions = {}): Promise<InProcessEventLog> {
    const { history, ...rest } = options;
    const log = new InProcessEventLog(rest);
    if (history && Symbol.asyncIterator in history) {
      let chunk: (LoggedEvent | Event)[] = [];
      for await (const item of history) {
        chunk.push(item);
        if (chunk.length >= 1000) {
          log.hydrate(chunk);
          chunk = [];
        }
      }
      log.hydrate(chunk);
    } else if (history) {
      log.hydrate(history);
    }
    return log;
  }

  /**
   * Load already-stored events (e.g. the outbox table after a restart), in
   * position order. History is trusted: sequences it carries are kept as they
   * are (a `0` gets the next one), ids already present are skipped, bare
   * events get the next positions. May be called in chunks; positions must
   * keep increasing.
   *
   * With an archive, history must be logged events with sequences (the
   * archive's own, typically its newest ones): positions below the first one
   * loaded into an empty log are read from the archive.
   */
  hydrate(events: EventHistory): void {
    assertOpen(this.#journal, "event log");
    let stored = 0;
    try {
      for (const item of events) {
        const event = isLogged(item) ? item.event : item;
        validateEvents([event]);
        if (this.#byId.has(event.id)) continue;
        if (this.#archive && (!isLogged(item) || event.sequence === 0n)) {
          throw invalidRequest(
            "a log with an archive loads logged events with their sequences",
            "history",
          );
        }
        const position = isLogged(item) ? item.position : this.#journal.lastPosition + 1n;
        if (position <= this.#journal.lastPosition) {
          throw invalidRequest(
            `history position ${position} is not after ${this.#journal.lastPosition}`,
            "history.position",
          );
        }
        this.#storeTrusted(event, position);
        stored++;
      }
    } finally {
      if (stored > 0) this.#trim();
      this.#journal.changed.notify();
    }
  }

  /**
   * Store events that already have their position in the archive (the
   * embedded outbox relay hands over each row with its outbox position), in
   * position order. Positions may have gaps; they become this log's
   * positions. Sequences are kept as they are (the archive assigned them). An
   * event at or below the last position is a duplicate when that position
   * holds the same event id (a relay's retry), an `invalid_request`
   * otherwise.
   *
   * `adopt`: the caller gives the event objects up (the relay, which decoded
   * them or was handed them for good), so the log keeps them instead of a
   * copy. Default false: the log stores copies, as `append` does.
   */
  appendLogged(
    events: readonly LoggedEvent[],
    options: { adopt?: boolean } = {},
  ): Promise<AppendResult[]> {
    try {
      assertOpen(this.#journal, "event log");
      validateEvents(events.map((e) => e.event));
      events.forEach(({ event, position }, i) => {
        if (event.sequence === 0n) {
          throw invalidRequest("a logged event needs its sequence", `events[${i}].sequence`);
        }
        if (typeof position !== "bigint" || position < 1n) {
          throw invalidRequest("a logged event needs a positive position", `events[${i}].position`);
        }
      });
    } catch (error) {
      // Refused as a rejection, like every other call of the port.
      return Promise.reject(error);
    }
    const adopt = options.adopt === true;
    const run = this.#appending.then(() => this.#appendLoggedInOrder(events, adopt));
    this.#appending = run.catch(() => {});
    return run;
  }

  async #appendLoggedInOrder(
    events: readonly LoggedEvent[],
    adopt: boolean,
  ): Promise<AppendResult[]> {
    const results: AppendResult[] = [];
    let stored = 0;
    try {
      for (const { event, position } of events) {
        if (position <= this.#journal.lastPosition) {
          results.push(await this.#storedAt(event.id, position));
          continue;
        }
        const held = this.#byId.get(event.id);
        if (held) {
          throw invalidRequest(
            `event ${event.id} is already at position ${held.position}, not ${position}`,
            "events.position",
          );
        }
        const copy = this.#storeTrusted(event, position, adopt);
        stored++;
        results.push({ position, duplicate: false, sequence: copy.sequence });
      }
    } finally {
      // Wake subscribers even when a later event of the batch failed.
      if (stored > 0) {
        this.#trim();
        this.#journal.changed.notify();
      }
    }
    return results;
  }

  /** The answer to re-appending `eventId` at `position`: a duplicate, or an error. */
  async #storedAt(eventId: string, position: bigint): Promise<AppendResult> {
    const held = this.#byId.get(eventId);
    let found: LoggedEvent | undefined = held;
    if (!held && this.#archive && position <= this.#journal.trimmedThrough) {
      found = await this.#archive.find(eventId);
    }
    if (found && found.position === position) {
      return { position, duplicate: true, sequence: found.event.sequence };
    }
    throw invalidRequest(
      `position ${position} is not after ${this.#journal.lastPosition} and does not hold event ${eventId}`,
      "events.position",
    );
  }

  /** Store an event as history gives it (sequence kept unless 0, previous id filled in). */
  #storeTrusted(event: Event, position: bigint, adopt = false): Event {
    // A windowed log starts where its history starts; what is below is the archive's.
    if (this.#archive && this.#journal.size === 0 && this.#journal.lastPosition === 0n) {
      this.#journal.startAfter(position - 1n);
    }
    const key = resourceKey(event);
    const head = this.#heads.get(key);
    const stored = adopt ? event : clone(EventSchema, event);
    if (stored.sequence === 0n) stored.sequence = (head?.sequence ?? 0n) + 1n;
    if (!stored.previousEventId && head && stored.sequence > 1n)
      stored.previousEventId = head.eventId;
    this.#store(stored, key, position);
    return stored;
  }

  /** Keep the window: drop the oldest events (and what points at them) once it overflows. */
  #trim(): void {
    if (this.#journal.size <= this.#window + this.#slack) return;
    for (const { value } of this.#journal.trimTo(this.#window)) {
      this.#byId.delete(value.id);
      const key = resourceKey(value);
      // The resource's newest event left memory: its sequence is the archive's business now.
      if (this.#heads.get(key)?.eventId === value.id) this.#heads.delete(key);
    }
  }

  /**
   * The highest position this log has stored (0 when none), whether or not
   * it is still held in memory: with an archive, every position up to it is
   * the archive's or this log's (what an outbox relay feeding it starts after).
   */
  get lastPosition(): bigint {
    return this.#journal.lastPosition;
  }

  /** The events held in memory, in position order (a copy of the list; events are shared, treat as read-only). */
  snapshot(): LoggedEvent[] {
    return this.#journal.held().map((e) => ({ event: e.value, position: e.position }));
  }

  async append(events: readonly Event[]): Promise<AppendResult[]> {
    assertOpen(this.#journal, "event log");
    if (this.#archive) {
      // Positions and sequences are the archive's: an event stored here alone
      // would be missing from it once it left the window (and take a position
      // the archive gives to another event).
      throw invalidRequest(
        "this log is fed from its archive: append to the archive (the outbox), which relays with appendLogged",
        "events",
      );
    }
    validateEvents(events);
    const results: AppendResult[] = [];
    try {
      for (const event of events) results.push(this.#appendOne(event));
    } finally {
      // Wake subscribers even when a later event of the batch failed.
      if (results.length > 0) this.#journal.changed.notify();
    }
    return results;
  }

  #appendOne(event: Event): AppendResult {
    const existing = this.#byId.get(event.id);
    if (existing) {
      return { position: existing.position, duplicate: true, sequence: existing.event.sequence };
    }
    const key = resourceKey(event);
    const head = this.#heads.get(key);
    const last = head?.sequence ?? 0n;
    if (event.sequence !== 0n && event.sequence !== last + 1n) {
      throw sequenceConflict(
        `event ${event.id} has sequence ${event.sequence} but the resource is at ${last}`,
        {
          event_id: event.id,
          expected_sequence: String(last + 1n),
          sequence: String(event.sequence),
        },
      );
    }
    const stored = clone(EventSchema, event);
    stored.sequence = last + 1n;
    if (!stored.previousEventId && head) stored.previousEventId = head.eventId;
    const position = this.#store(stored, key, this.#journal.lastPosition + 1n);
    return { position, duplicate: false, sequence: stored.sequence };
  }

  #store(event: Event, key: string, position: bigint): bigint {
    this.#journal.push(event, position);
    this.#byId.set(event.id, { event, position });
    const head = this.#heads.get(key);
    if (!head || event.sequence > head.sequence) {
      this.#heads.set(key, { sequence: event.sequence, eventId: event.id });
    }
    return position;
  }

  async read(query: ReadQuery): Promise<LoggedEvent[]> {
    assertOpen(this.#journal, "event log");
    validateFilter(query.filter);
    const limit = readLimit(query.limit);
    let after = await this.#resolve(query.after, query.filter);
    const out: LoggedEvent[] = [];
    // Older than the window: from the archive, up to where memory takes over.
    // The window may move on while the archive answers; then go back to it.
    while (this.#archive && after < this.#journal.trimmedThrough) {
      const through = this.#journal.trimmedThrough;
      const page = await this.#archive.readAfter({
        afterPosition: after,
        throughPosition: through,
        limit: limit - out.length,
        filter: query.filter,
      });
      out.push(...page);
      if (out.length >= limit) return out;
      after = through;
    }
    const end = this.#journal.end;
    for (let i = this.#journal.indexAfter(after); i < end && out.length < limit; i++) {
      const entry = this.#journal.at(i) as JournalEntry<Event>;
      if (eventMatches(entry.value, query.filter))
        out.push({ event: entry.value, position: entry.position });
    }
    return out;
  }

  async last(filter: EventFilter): Promise<LoggedEvent | undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(filter);
    for (let i = this.#journal.end - 1; i >= this.#journal.start; i--) {
      const entry = this.#journal.at(i) as JournalEntry<Event>;
      if (eventMatches(entry.value, filter))
        return { event: entry.value, position: entry.position };
    }
    const through = this.#journal.trimmedThrough;
    if (!this.#archive || through === 0n) return undefined;
    return this.#archive.last(filter, through);
  }

  async *subscribe(query: SubscribeQuery): AsyncGenerator<LoggedEvent, void, undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(query.filter);
    // Everything at or below `after` has been handed out or skipped.
    let after = await this.#resolve(query.after, query.filter);
    for (;;) {
      if (this.#journal.closed || query.signal?.aborted) return;
      const archive = this.#archive;
      if (archive && after < this.#journal.trimmedThrough) {
        const through = this.#journal.trimmedThrough;
        const page = await archive.readAfter({
          afterPosition: after,
          throughPosition: through,
          limit: ARCHIVE_PAGE,
          filter: query.filter,
        });
        for (const logged of page) {
          if (this.#journal.closed || query.signal?.aborted) return;
          after = logged.position;
          yield logged;
        }
        // A short page: nothing else matches up to `through`.
        if (page.length < ARCHIVE_PAGE) after = through;
        continue;
      }
      // Take the wake-up before draining: an append in between cannot be missed.
      const changed = this.#journal.changed.next;
      // One position cursor over the log: history flows into live (and the
      // archive into memory) with no gap and no duplicate at the seam.
      for (let i = this.#journal.indexAfter(after); i < this.#journal.end; i++) {
        const entry = this.#journal.at(i);
        // Trimmed while the caller held the last event: back to the archive.
        if (!entry) break;
        after = entry.position;
        if (eventMatches(entry.value, query.filter)) {
          yield { event: entry.value, position: entry.position };
          if (query.signal?.aborted) return;
        }
      }
      if (this.#archive && after < this.#journal.trimmedThrough) continue;
      await changedOrAborted(changed, query.signal);
    }
  }

  async *consume(options: DurableConsumerOptions): AsyncGenerator<ConsumedEvent, void, undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(options.filter);
    if (!options.name) throw invalidRequest("a durable consumer needs a name", "name");
    const cursor = await this.#cursor(options);
    const held = new Set<bigint>();
    const keepAlive =
      options.keepAliveMs !== undefined && options.keepAliveMs > 0
        ? setInterval(() => {
            for (const position of held) cursor.touch(position);
          }, options.keepAliveMs)
        : undefined;
    keepAlive?.unref();
    try {
      for (;;) {
        const delivery = await cursor.take(options.signal);
        if (!delivery) return;
        const { entry, deliveryCount } = delivery;
        held.add(entry.position);
        yield {
          event: entry.value,
          position: entry.position,
          deliveryCount,
          ack: async () => {
            held.delete(entry.position);
            await cursor.ack(entry.position);
          },
          nak: async (delayMs?: number) => {
            held.delete(entry.position);
            cursor.nak(entry.position, delayMs);
          },
        };
      }
    } finally {
      clearInterval(keepAlive);
      // Closing hands unacked events back at once (see EventLog docs).
      for (const position of held) cursor.nak(position);
    }
  }

  async #cursor(options: DurableConsumerOptions): Promise<DurableCursor<Event>> {
    const ackWaitMs = options.ackWaitMs ?? this.#defaultAckWaitMs;
    const matches = (event: Event) => eventMatches(event, options.filter);
    let pending = this.#consumers.get(options.name);
    if (!pending) {
      pending = (async () => {
        const floor = (await this.#positions?.load(options.name)) ?? 0n;
        // The filter the consumer was last opened with (create-or-update).
        const scope = { filter: options.filter };
        const archive = this.#archive;
        // A consumer behind the window reads the archive with its latest filter.
        const backfill: JournalBackfill<Event> | undefined = archive
          ? async (afterPosition, throughPosition, limit) =>
              (
                await archive.readAfter({
                  afterPosition,
                  throughPosition,
                  limit,
                  filter: scope.filter,
                })
              ).map((e) => ({ position: e.position, value: e.event }))
          : undefined;
        const cursor = new DurableCursor(
          options.name,
          this.#journal,
          matches,
          ackWaitMs,
          floor,
          this.#positions,
          backfill,
        );
        return { cursor, scope };
      })();
      // A failed load must not poison the name for later attempts.
      pending.catch(() => this.#consumers.delete(options.name));
      this.#consumers.set(options.name, pending);
      return (await pending).cursor;
    }
    const { cursor, scope } = await pending;
    // Create-or-update, like a JetStream durable: the latest definition wins.
    scope.filter = options.filter;
    cursor.matches = matches;
    cursor.ackWaitMs = ackWaitMs;
    return cursor;
  }

  async #resolve(cursor: Cursor | undefined, filter: EventFilter): Promise<bigint> {
    if (!cursor) return 0n;
    const position = positionOf(cursor);
    if (position !== undefined) return position;
    const eventId = (cursor as { afterEventId: string }).afterEventId;
    let found = this.#byId.get(eventId);
    // Not in memory: it may have left the window (the archive may also hold
    // events the log has not taken yet; those are no cursor yet).
    if (!found && this.#archive) {
      const archived = await this.#archive.find(eventId);
      if (archived && archived.position <= this.#journal.lastPosition) found = archived;
    }
    if (!found || !eventMatches(found.event, filter)) throw cursorExpired(eventId);
    return found.position;
  }

  async ping(): Promise<void> {
    assertOpen(this.#journal, "event log");
  }

  async close(): Promise<void> {
    if (this.#journal.closed) return;
    this.#journal.close();
    for (const pending of this.#consumers.values()) {
      pending.then(({ cursor }) => cursor.dispose()).catch(() => {});
    }
  }
}
