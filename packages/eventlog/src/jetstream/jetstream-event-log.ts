import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  type Consumer,
  type ConsumerMessages,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StoredMsg,
} from "@nats-io/jetstream";
import { headers, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { type Event, EventSchema } from "@trellis/contracts/core";
import {
  encodeToken,
  eventSubject,
  filterSubject,
  positionOf,
  readLimit,
  subjectMatches,
  validateEvents,
  validateFilter,
} from "../address.js";
import {
  closedError,
  cursorExpired,
  eventTooLarge,
  invalidRequest,
  sequenceConflict,
  unavailable,
} from "../errors.js";
import {
  type AppendOptions,
  type AppendResult,
  type ConsumedEvent,
  type Cursor,
  type DurableConsumerOptions,
  type EventFilter,
  type EventLog,
  type LoggedEvent,
  MAX_EVENT_BYTES,
  type ReadQuery,
  type SubscribeQuery,
} from "../event-log.js";
import { formatTraceparent, parseTraceparent } from "../trace.js";
import {
  ConnectionWatch,
  closeConnection,
  natsError,
  openPrefixedStream,
  type PrefixedStream,
  type StreamOptions,
  withTimeout,
} from "./connection.js";
import { consumeDurable } from "./durable.js";

/** Options of {@link JetStreamEventLog.open}. */
export interface JetStreamEventLogOptions extends StreamOptions {
  /** An open connection (see `connectNats`); shared with other users unless `ownsConnection`. */
  connection: NatsConnection;
  /**
   * First subject token(s): events go to `<prefix>.events.…` (default
   * `"trellis"`). Give each test run its own prefix so runs never collide.
   */
  prefix?: string;
  /** Stream name (default `<PREFIX>_EVENTS`, e.g. `TRELLIS_EVENTS`). */
  streamName?: string;
  /** JetStream API and publish timeout (default 5000 ms). */
  requestTimeoutMs?: number;
  /** {@link JetStreamEventLog.ping} gives up after this long (default 2000 ms). */
  pingTimeoutMs?: number;
  /** Close the connection in {@link JetStreamEventLog.close} (default false). */
  ownsConnection?: boolean;
}

/** The last event of a resource subject as this process last saw it. */
interface ResourceHead {
  /** Stream sequence of the subject's last message (0: none), for `expect.lastSubjectSequence`. */
  streamSeq: number;
  sequence: bigint;
  eventId: string;
}

const EMPTY_HEAD: ResourceHead = { streamSeq: 0, sequence: 0n, eventId: "" };
const MSG_ID = "Nats-Msg-Id";
/** Give up on a sequence-0 append after this many lost races (heavy contention). */
const MAX_ATTEMPTS = 100;
/**
 * Bound of the in-memory caches (resource heads, event id → position), least
 * recently used dropped first. They serve the resources and cursors in use
 * now: a session's next append, a client resuming after its last event. A
 * miss costs a lookup on the stream, not a wrong answer. 20,000 entries
 * (~4 MB each) fill within a few thousand turns, so a process's heap levels
 * off early; at 100,000 a publisher's heap (receipts: one subject per
 * receipt) still grew at 100,000 turns (docs/benchmarks.md, session 19).
 */
const CACHE_LIMIT = 20_000;

function isWrongLastSequence(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/**
 * Decode a stored event; a `traceparent` header fills in a missing trace
 * context. Headers are parsed only then: on the delivery hot path most events
 * carry their trace in the body.
 */
function decodeEvent(data: Uint8Array, hdrs: () => MsgHdrs | undefined): Event {
  const event = fromBinary(EventSchema, data);
  if (!event.traceId) {
    const trace = parseTraceparent(hdrs()?.get("traceparent"));
    if (trace) {
      event.traceId = trace.traceId;
      event.spanId = trace.spanId;
    }
  }
  return event;
}

/** Insert into a Map used as a bounded cache: the oldest key goes first. */
function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > CACHE_LIMIT) map.delete(map.keys().next().value as K);
}

/**
 * The production {@link EventLog} on NATS JetStream (nats-server ≥ 2.9).
 *
 * Layout: one stream `<PREFIX>_EVENTS` over `<prefix>.events.>`, file storage;
 * each event is one message on `<prefix>.events.<workspace>.<session>.<object>.<id>`
 * (tokens escaped by `encodeToken`), body = protobuf `Event`, `Nats-Msg-Id` =
 * event id (dedupe within the duplicate window, 24 h by default), W3C
 * `traceparent` header when the event has a trace. Positions are stream sequences.
 *
 * Per-resource sequence: each append publishes with
 * `expect.lastSubjectSequence` = the stream sequence of the resource's last
 * message, so two writers can never both claim sequence n; the loser gets
 * API error 10071, reloads the head (last-by-subject) and retries. Heads are
 * cached, so the hot path is one publish round trip; a new resource is
 * optimistically assumed empty (create-if-absent `0`).
 *
 * Known limits (v1):
 * - an event-id cursor unknown to this process's cache is resolved by scanning
 *   the filter's subjects with a headers-only ordered consumer: O(events in the
 *   filter). Prefer position cursors for hot paths;
 * - a sequence-0 event retried after the duplicate window is stored again
 *   (events with an explicit sequence are recognised forever by id).
 *
 * @example
 *   const nc = await connectNats({ servers: "nats://127.0.0.1:4222" });
 *   const log = await JetStreamEventLog.open({ connection: nc, prefix: "trellis" });
 */
export class JetStreamEventLog implements EventLog {
  /** The stream holding the events. */
  readonly streamName: string;
  /** The subject prefix. */
  readonly prefix: string;

  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #watch: ConnectionWatch;
  readonly #ownsConnection: boolean;
  readonly #pingTimeoutMs: number;
  readonly #requestTimeoutMs: number;
  readonly #heads = new Map<string, ResourceHead>();
  readonly #ids = new Map<string, { position: number; subject: string }>();
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #live = new Set<{ end(): void }>();
  #closed = false;

  private constructor(options: JetStreamEventLogOptions, stream: PrefixedStream) {
    this.prefix = stream.prefix;
    this.streamName = stream.streamName;
    this.#nc = options.connection;
    this.#js = stream.js;
    this.#jsm = stream.jsm;
    this.#watch = new ConnectionWatch(options.connection);
    this.#ownsConnection = options.ownsConnection ?? false;
    this.#pingTimeoutMs = options.pingTimeoutMs ?? 2000;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 5000;
  }

  /** Connect to JetStream and create (or update) the stream. */
  static async open(options: JetStreamEventLogOptions): Promise<JetStreamEventLog> {
    return new JetStreamEventLog(options, await openPrefixedStream(options, "events", "EVENTS"));
  }

  // ── append ────────────────────────────────────────────────────────────────

  async append(events: readonly Event[], options: AppendOptions = {}): Promise<AppendResult[]> {
    this.#assertOpen();
    validateEvents(events);
    const { encoded } = options;
    if (events.length === 1) {
      // Hot path: no grouping, no pool.
      const event = events[0]!;
      const subject = eventSubject(this.prefix, event);
      return [
        await this.#serialized(subject, () => this.#appendOne(subject, event, encoded?.get(event))),
      ];
    }
    // Events of one resource must go one after another (each publish needs the
    // previous one's stream sequence); different resources go in parallel.
    const groups = new Map<string, number[]>();
    events.forEach((event, i) => {
      const subject = eventSubject(this.prefix, event);
      const group = groups.get(subject);
      if (group) group.push(i);
      else groups.set(subject, [i]);
    });
    const results = new Array<AppendResult>(events.length);
    const work = [...groups];
    let failure: { error: unknown } | undefined;
    const worker = async () => {
      for (let next = work.shift(); next && !failure; next = work.shift()) {
        const [subject, indexes] = next;
        try {
          await this.#serialized(subject, async () => {
            for (const i of indexes) {
              const event = events[i]!;
              results[i] = await this.#appendOne(subject, event, encoded?.get(event));
            }
          });
        } catch (error) {
          failure ??= { error };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(64, groups.size) }, worker));
    if (failure) throw failure.error;
    return results;
  }

  /** Run `fn` after every earlier call for `key` in this process settled. */
  async #serialized<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key);
    const run = previous ? previous.then(fn) : fn();
    const tail = run.then(
      () => {},
      () => {},
    );
    this.#locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    }
  }

  /** Append one event; `given` is its encoding as given (used when it is stored unchanged). */
  async #appendOne(subject: string, event: Event, given?: Uint8Array): Promise<AppendResult> {
    const explicit = event.sequence > 0n;
    let head = this.#heads.get(subject) ?? EMPTY_HEAD;
    let fresh = false;
    for (let attempt = 1; ; attempt++) {
      if (explicit && event.sequence !== head.sequence + 1n) {
        // The cache may be stale: decide against the server's head.
        if (!fresh) {
          head = await this.#loadHead(subject);
          fresh = true;
          continue;
        }
        const duplicate = await this.#findStored(subject, event, head);
        if (duplicate) return duplicate;
        throw sequenceConflict(
          `event ${event.id} has sequence ${event.sequence} but the resource is at ${head.sequence}`,
          {
            event_id: event.id,
            expected_sequence: String(head.sequence + 1n),
            sequence: String(event.sequence),
          },
        );
      }
      const sequence = head.sequence + 1n;
      const stored: Event = {
        ...event,
        sequence,
        previousEventId: event.previousEventId || head.eventId,
      };
      const traceparent = formatTraceparent(stored.traceId, stored.spanId);
      let hdrs: MsgHdrs | undefined;
      if (traceparent) {
        hdrs = headers();
        hdrs.set("traceparent", traceparent);
      }
      try {
        // Stored unchanged: its sequence was given, and its previous id (or there is none).
        const unchanged = explicit && stored.previousEventId === event.previousEventId;
        const body = given !== undefined && unchanged ? given : toBinary(EventSchema, stored);
        if (body.length > MAX_EVENT_BYTES)
          throw eventTooLarge(event.id, body.length, MAX_EVENT_BYTES);
        const ack = await this.#js.publish(subject, body, {
          msgID: event.id,
          expect: { lastSubjectSequence: head.streamSeq },
          ...(hdrs ? { headers: hdrs } : {}),
        });
        // The server checks the msg id before the expectation: a retry inside
        // the window comes back as a duplicate with the original's sequence.
        if (ack.duplicate) return await this.#storedAt(ack.seq, event);
        remember(this.#heads, subject, { streamSeq: ack.seq, sequence, eventId: event.id });
        remember(this.#ids, event.id, { position: ack.seq, subject });
        return { position: BigInt(ack.seq), duplicate: false, sequence };
      } catch (err) {
        if (!isWrongLastSequence(err)) throw natsError(err);
        // Another writer appended to this resource: reload the head and retry.
        if (attempt >= MAX_ATTEMPTS) {
          const message = `gave up appending ${event.id} after ${attempt} lost races`;
          throw sequenceConflict(message, { event_id: event.id }, err);
        }
        head = await this.#loadHead(subject);
        fresh = true;
        if (attempt > 2) {
          // Back off a little under heavy contention so the winners can finish.
          await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** attempt)));
        }
      }
    }
  }

  /** The resource's last message from the server (also refreshes the cache). */
  async #loadHead(subject: string): Promise<ResourceHead> {
    let msg: StoredMsg | null;
    try {
      msg = await this.#jsm.streams.getMessage(this.streamName, { last_by_subj: subject });
    } catch (err) {
      throw natsError(err);
    }
    if (!msg) {
      this.#heads.delete(subject);
      return EMPTY_HEAD;
    }
    const event = fromBinary(EventSchema, msg.data);
    const head = { streamSeq: msg.seq, sequence: event.sequence, eventId: event.id };
    remember(this.#heads, subject, head);
    return head;
  }

  /** The append result of an already stored event at stream sequence `seq`. */
  async #storedAt(seq: number, event: Event): Promise<AppendResult> {
    let msg: StoredMsg | null;
    try {
      msg = await this.#jsm.streams.getMessage(this.streamName, { seq });
    } catch (err) {
      throw natsError(err);
    }
    // Purged by max age: the position is still right; the sequence is what we know.
    const sequence = msg ? fromBinary(EventSchema, msg.data).sequence : event.sequence;
    return { position: BigInt(seq), duplicate: true, sequence };
  }

  /**
   * Whether an explicit-sequence event whose slot is taken is itself already
   * stored (a relay retry, possibly older than the dedupe window). The common
   * case is the resource's last event; otherwise scan the resource's subject.
   */
  async #findStored(
    subject: string,
    event: Event,
    head: ResourceHead,
  ): Promise<AppendResult | undefined> {
    if (head.eventId === event.id) {
      return { position: BigInt(head.streamSeq), duplicate: true, sequence: head.sequence };
    }
    if (head.sequence < event.sequence) return undefined;
    const seq = await this.#findId(subject, event.id, head.streamSeq);
    return seq ? this.#storedAt(seq, event) : undefined;
  }

  // ── read / subscribe ──────────────────────────────────────────────────────

  async read(query: ReadQuery): Promise<LoggedEvent[]> {
    this.#assertOpen();
    validateFilter(query.filter);
    const limit = readLimit(query.limit);
    const filter = filterSubject(this.prefix, query.filter);
    const after = await this.#resolve(query.after, filter);
    // Bound the read by the filter's last message now: the result is a
    // snapshot, and we know when to stop without waiting for more.
    const last = await this.#lastSeq(filter);
    if (last <= after) return [];
    const out: LoggedEvent[] = [];
    await this.#scan(filter, after + 1, last, false, limit, (msg) => {
      out.push(this.#toLogged(msg));
      return out.length < limit;
    });
    return out;
  }

  async last(filter: EventFilter): Promise<LoggedEvent | undefined> {
    this.#assertOpen();
    validateFilter(filter);
    let msg: StoredMsg | null;
    try {
      msg = await this.#jsm.streams.getMessage(this.streamName, {
        last_by_subj: filterSubject(this.prefix, filter),
      });
    } catch (err) {
      throw natsError(err);
    }
    if (!msg) return undefined;
    const stored = msg;
    const event = decodeEvent(stored.data, () => stored.header);
    remember(this.#ids, event.id, { position: stored.seq, subject: stored.subject });
    return { event, position: BigInt(stored.seq) };
  }

  async *subscribe(query: SubscribeQuery): AsyncGenerator<LoggedEvent, void, undefined> {
    this.#assertOpen();
    validateFilter(query.filter);
    const filter = filterSubject(this.prefix, query.filter);
    const after = await this.#resolve(query.after, filter);
    if (query.signal?.aborted) return;
    // One ordered consumer from the cursor: history and live are the same
    // delivery stream, so the seam has no gap and no duplicate; the client
    // recreates it from the last seen sequence after a disconnect.
    let consumer: Consumer;
    let messages: ConsumerMessages;
    try {
      consumer = await this.#js.consumers.get(this.streamName, {
        filter_subjects: filter,
        opt_start_seq: after + 1,
      });
      messages = await consumer.consume({ max_messages: 512 });
    } catch (err) {
      throw natsError(err);
    }
    // Released when the signal aborts too, not only when the loop below ends:
    // a caller that goes away may leave this generator suspended at its
    // yield for good, and the consumer (on the server for 5 minutes) and
    // its entry in #live (for good) must not outlive the subscription.
    let released: Promise<void> | undefined;
    const release = (): Promise<void> => {
      if (released) return released;
      query.signal?.removeEventListener("abort", release);
      this.#live.delete(live);
      // close() stops the pull at once, but settles only when the loop below
      // is done: the consumer cannot wait for it.
      const closed = messages.close().then(
        () => {},
        () => {},
      );
      released = closed;
      consumer.delete().catch(() => {});
      return closed;
    };
    const live = { end: () => void release() };
    this.#live.add(live);
    query.signal?.addEventListener("abort", release, { once: true });
    try {
      for await (const msg of messages) yield this.#toLogged(msg);
    } finally {
      await release();
    }
  }

  async *consume(options: DurableConsumerOptions): AsyncGenerator<ConsumedEvent, void, undefined> {
    this.#assertOpen();
    validateFilter(options.filter);
    if (!options.name) throw invalidRequest("a durable consumer needs a name", "name");
    const deliveries = consumeDurable({
      nc: this.#nc,
      js: this.#js,
      jsm: this.#jsm,
      stream: this.streamName,
      durable: encodeToken(options.name),
      filterSubject: filterSubject(this.prefix, options.filter),
      ackWaitMs: options.ackWaitMs ?? 30_000,
      maxMessages: 256,
      ...(options.keepAliveMs !== undefined ? { keepAliveMs: options.keepAliveMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      live: this.#live,
    });
    for await (const delivery of deliveries) {
      const { msg } = delivery;
      // Not remembered by id: a durable consumer (receipts, webhooks) resolves
      // no cursors, and its process would otherwise cache every event's id.
      yield {
        ...this.#toLogged(msg, { remember: false }),
        deliveryCount: msg.info.deliveryCount,
        ack: delivery.ack,
        nak: delivery.nak,
      };
    }
  }

  /** A stored message as a logged event; `remember` caches its id's position (default on). */
  #toLogged(msg: JsMsg, options: { remember?: boolean } = {}): LoggedEvent {
    const event = decodeEvent(msg.data, () => msg.headers);
    if (options.remember !== false) {
      remember(this.#ids, event.id, { position: msg.seq, subject: msg.subject });
    }
    return { event, position: BigInt(msg.seq) };
  }

  /** Stream sequence after which a cursor starts (0: from the beginning). */
  async #resolve(cursor: Cursor | undefined, filter: string): Promise<number> {
    if (!cursor) return 0;
    const position = positionOf(cursor);
    if (position !== undefined) {
      if (position > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw invalidRequest("afterPosition is out of range", "after.after_position");
      }
      return Number(position);
    }
    const eventId = (cursor as { afterEventId: string }).afterEventId;
    const known = this.#ids.get(eventId);
    if (known && subjectMatches(filter, known.subject)) return known.position;
    const last = await this.#lastSeq(filter);
    const found = last > 0 ? await this.#findId(filter, eventId, last) : undefined;
    if (!found) throw cursorExpired(eventId);
    return found;
  }

  /** Scan `filter` up to `last` for a message id, headers only (v1 cursor lookup). */
  async #findId(filter: string, eventId: string, last: number): Promise<number | undefined> {
    let found: { position: number; subject: string } | undefined;
    await this.#scan(filter, 1, last, true, 1000, (msg) => {
      if (msg.headers?.get(MSG_ID) !== eventId) return true;
      found = { position: msg.seq, subject: msg.subject };
      return false;
    });
    if (!found) return undefined;
    remember(this.#ids, eventId, found);
    return found.position;
  }

  /** Stream sequence of the filter's last message, 0 when it has none. */
  async #lastSeq(filter: string): Promise<number> {
    try {
      const msg = await this.#jsm.streams.getMessage(this.streamName, { last_by_subj: filter });
      return msg?.seq ?? 0;
    } catch (err) {
      throw natsError(err);
    }
  }

  /**
   * Visit the filter's messages with stream sequence in [from, to] through a
   * short-lived ordered consumer, until `visit` returns false. Guarded by an
   * idle timeout in case messages vanish (max age) before we reach `to`.
   */
  async #scan(
    filter: string,
    from: number,
    to: number,
    headersOnly: boolean,
    batch: number,
    visit: (msg: JsMsg) => boolean,
  ): Promise<void> {
    let consumer: Consumer;
    let messages: ConsumerMessages;
    try {
      consumer = await this.#js.consumers.get(this.streamName, {
        filter_subjects: filter,
        opt_start_seq: from,
        ...(headersOnly ? { headers_only: true } : {}),
      });
      messages = await consumer.consume({ max_messages: Math.max(64, Math.min(batch, 1000)) });
    } catch (err) {
      throw natsError(err);
    }
    let lastSeen = Date.now();
    const idle = setInterval(() => {
      if (Date.now() - lastSeen > this.#requestTimeoutMs) void messages.close().catch(() => {});
    }, 250);
    try {
      for await (const msg of messages) {
        lastSeen = Date.now();
        if (msg.seq > to) break;
        // `pending` 0: nothing after this one matches the filter (right now).
        if (!visit(msg) || msg.seq >= to || msg.info.pending === 0) break;
      }
    } catch (err) {
      throw natsError(err);
    } finally {
      clearInterval(idle);
      await messages.close().catch(() => {});
      consumer.delete().catch(() => {});
    }
  }

  // ── lifecycle ─────────────────────────────────────────────────────────────

  /** Fails at once while the client is disconnected, else asks JetStream (bounded by `pingTimeoutMs`). */
  async ping(): Promise<void> {
    this.#assertOpen();
    if (!this.#watch.connected) throw unavailable("nats");
    try {
      await withTimeout(this.#jsm.streams.info(this.streamName), this.#pingTimeoutMs, () =>
        unavailable("nats"),
      );
    } catch (err) {
      throw natsError(err);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#watch.stop();
    for (const live of [...this.#live]) live.end();
    if (this.#ownsConnection) await closeConnection(this.#nc);
  }

  #assertOpen(): void {
    if (this.#closed) throw closedError("event log");
  }
}
