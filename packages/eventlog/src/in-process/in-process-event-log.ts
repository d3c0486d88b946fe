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
import { assertOpen, type ConsumerPositionStore, DurableCursor, Journal } from "./journal.js";

/** Events to start from: bare events get positions 1, 2, …; logged ones keep theirs. */
export type EventHistory = Iterable<LoggedEvent | Event>;

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
 * The embedded-mode {@link EventLog}: everything in memory, one process.
 *
 * Durability comes from outside: in embedded mode the database outbox table is
 * the durable log, so on restart the caller reloads it with
 * {@link InProcessEventLog.open} (`history`) and passes a
 * {@link ConsumerPositionStore} so durable consumers resume where they were.
 * Events handed out are shared with the log: treat them as read-only.
 *
 * @example
 *   const log = await InProcessEventLog.open({
 *     history: outbox.readAll(),          // AsyncIterable<LoggedEvent>
 *     consumerPositions: outbox.positions, // { load, save }
 *   });
 */
export class InProcessEventLog implements EventLog {
  readonly #journal = new Journal<Event>();
  readonly #byId = new Map<string, LoggedEvent>();
  readonly #heads = new Map<string, ResourceHead>();
  readonly #consumers = new Map<string, Promise<DurableCursor<Event>>>();
  readonly #positions: ConsumerPositionStore | undefined;
  readonly #defaultAckWaitMs: number;

  constructor(options: InProcessEventLogOptions = {}) {
    this.#positions = options.consumerPositions;
    this.#defaultAckWaitMs = options.defaultAckWaitMs ?? 30_000;
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
   */
  hydrate(events: EventHistory): void {
    assertOpen(this.#journal, "event log");
    for (const item of events) {
      const event = isLogged(item) ? item.event : item;
      validateEvents([event]);
      if (this.#byId.has(event.id)) continue;
      const position = isLogged(item) ? item.position : this.#journal.lastPosition + 1n;
      if (position <= this.#journal.lastPosition) {
        throw invalidRequest(
          `history position ${position} is not after ${this.#journal.lastPosition}`,
          "history.position",
        );
      }
      const key = resourceKey(event);
      const head = this.#heads.get(key);
      const stored = clone(EventSchema, event);
      if (stored.sequence === 0n) stored.sequence = (head?.sequence ?? 0n) + 1n;
      if (!stored.previousEventId && head && stored.sequence > 1n)
        stored.previousEventId = head.eventId;
      this.#store(stored, key, position);
    }
    this.#journal.changed.notify();
  }

  /** Every stored event in position order (a copy of the list; events are shared, treat as read-only). */
  snapshot(): LoggedEvent[] {
    return this.#journal.entries.map((e) => ({ event: e.value, position: e.position }));
  }

  async append(events: readonly Event[]): Promise<AppendResult[]> {
    assertOpen(this.#journal, "event log");
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
    const after = this.#resolve(query.after, query.filter);
    const out: LoggedEvent[] = [];
    const entries = this.#journal.entries;
    for (let i = this.#journal.indexAfter(after); i < entries.length && out.length < limit; i++) {
      const entry = entries[i]!;
      if (eventMatches(entry.value, query.filter))
        out.push({ event: entry.value, position: entry.position });
    }
    return out;
  }

  async last(filter: EventFilter): Promise<LoggedEvent | undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(filter);
    const entries = this.#journal.entries;
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i]!;
      if (eventMatches(entry.value, filter))
        return { event: entry.value, position: entry.position };
    }
    return undefined;
  }

  async *subscribe(query: SubscribeQuery): AsyncGenerator<LoggedEvent, void, undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(query.filter);
    let index = this.#journal.indexAfter(this.#resolve(query.after, query.filter));
    for (;;) {
      if (this.#journal.closed || query.signal?.aborted) return;
      // Take the wake-up before draining: an append in between cannot be missed.
      const changed = this.#journal.changed.next;
      const entries = this.#journal.entries;
      // One index over an append-only array: history flows into live with no
      // gap and no duplicate at the seam.
      while (index < entries.length) {
        const entry = entries[index++]!;
        if (eventMatches(entry.value, query.filter)) {
          yield { event: entry.value, position: entry.position };
          if (query.signal?.aborted) return;
        }
      }
      await changedOrAborted(changed, query.signal);
    }
  }

  async *consume(options: DurableConsumerOptions): AsyncGenerator<ConsumedEvent, void, undefined> {
    assertOpen(this.#journal, "event log");
    validateFilter(options.filter);
    if (!options.name) throw invalidRequest("a durable consumer needs a name", "name");
    const cursor = await this.#cursor(options);
    const held = new Set<bigint>();
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
      // Closing hands unacked events back at once (see EventLog docs).
      for (const position of held) cursor.nak(position);
    }
  }

  #cursor(options: DurableConsumerOptions): Promise<DurableCursor<Event>> {
    const ackWaitMs = options.ackWaitMs ?? this.#defaultAckWaitMs;
    const matches = (event: Event) => eventMatches(event, options.filter);
    let pending = this.#consumers.get(options.name);
    if (!pending) {
      pending = (async () => {
        const floor = (await this.#positions?.load(options.name)) ?? 0n;
        return new DurableCursor(
          options.name,
          this.#journal,
          matches,
          ackWaitMs,
          floor,
          this.#positions,
        );
      })();
      // A failed load must not poison the name for later attempts.
      pending.catch(() => this.#consumers.delete(options.name));
      this.#consumers.set(options.name, pending);
      return pending;
    }
    return pending.then((cursor) => {
      // Create-or-update, like a JetStream durable: the latest definition wins.
      cursor.matches = matches;
      cursor.ackWaitMs = ackWaitMs;
      return cursor;
    });
  }

  #resolve(cursor: Cursor | undefined, filter: EventFilter): bigint {
    if (!cursor) return 0n;
    const position = positionOf(cursor);
    if (position !== undefined) return position;
    const eventId = (cursor as { afterEventId: string }).afterEventId;
    const found = this.#byId.get(eventId);
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
      pending.then((cursor) => cursor.dispose()).catch(() => {});
    }
  }
}
