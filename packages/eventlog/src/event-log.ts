import type { JsonValue } from "@bufbuild/protobuf";
import type { Event, ResourceRef } from "@trellis/contracts/core";

/**
 * Which events a read or subscription covers. Events are addressed by
 * workspace, then session (events outside any session use {@link NO_SESSION}),
 * then resource. Omitting a level means "all of them".
 *
 * The address of an event is `(workspace_id, session_id, resource)`: a resource
 * is expected to keep the same workspace and session for all its events, and
 * its per-resource sequence is kept per address (on JetStream the address is
 * one subject, `<prefix>.events.<workspace>.<session>.<object>.<id>`).
 *
 * @example
 *   { workspaceId: "ws_1", sessionId: "ses_9", resource: { object: "task", id: "task_3" } }
 */
export interface EventFilter {
  workspaceId: string;
  sessionId?: string;
  /** A `ResourceRef` message or a plain `{ object, id }`. */
  resource?: Pick<ResourceRef, "object" | "id">;
}

/**
 * Session id used in subjects for events that belong to no session (an event
 * with an empty `session_id`). A filter may say `sessionId: NO_SESSION` to read
 * exactly those events; a real session id `"_"` is therefore not usable.
 */
export const NO_SESSION = "_";

/**
 * A position in the log. Positions increase strictly in append order across the
 * whole log (JetStream: the stream sequence; in-process: the append index, or
 * the archive's position, e.g. the outbox row's, gaps included) and are never
 * reused. A cursor is "after this position" or "after this event id".
 */
export type Cursor = { afterPosition: bigint } | { afterEventId: string };

/** An event as stored, with its log position. */
export interface LoggedEvent {
  event: Event;
  position: bigint;
  /**
   * The event's protobuf encoding as the archive it came from stores it (an
   * outbox row's body), when at hand: what a relay passes on as
   * {@link AppendOptions.encoded}. Logs do not set it on what they return.
   */
  body?: Uint8Array;
}

/** Options of {@link EventLog.append}. */
export interface AppendOptions {
  /**
   * Encodings of events as given (e.g. read from the outbox, sequence and
   * previous event id included): a log that stores bytes stores these
   * instead of encoding the event again, when it stores the event unchanged.
   */
  encoded?: ReadonlyMap<Event, Uint8Array>;
}

/** Each entry's `body`, by its event, for {@link AppendOptions.encoded} (undefined when none has one). */
export function encodedBodies(
  entries: readonly LoggedEvent[],
): ReadonlyMap<Event, Uint8Array> | undefined {
  const bodies = new Map<Event, Uint8Array>();
  for (const entry of entries) if (entry.body !== undefined) bodies.set(entry.event, entry.body);
  return bodies.size > 0 ? bodies : undefined;
}

/** The outcome of appending one event. */
export interface AppendResult {
  position: bigint;
  /** True when an event with the same id was already stored (nothing new stored). */
  duplicate: boolean;
  /** The per-resource sequence the event has in the log. */
  sequence: bigint;
}

/** A range read. */
export interface ReadQuery {
  filter: EventFilter;
  /**
   * Start after this cursor (default: from the beginning). An event-id cursor
   * must name an event inside `filter`, else the read fails with reason
   * `cursor_expired`.
   */
  after?: Cursor;
  /** At most this many events: 1 … {@link MAX_READ_LIMIT} (default 1000). */
  limit?: number;
}

/**
 * Largest encoded event the log takes, in bytes (protobuf `Event`). Below
 * NATS's default message limit (1 MiB) with room for headers, and the same in
 * every mode, so an event accepted embedded is accepted by the mesh: the
 * outbox refuses a larger event when it is written (`payload_too_large`),
 * never after it was queued for publishing, and the JetStream log refuses it
 * before sending.
 */
export const MAX_EVENT_BYTES = 1_000_000;

/** Largest `limit` a single {@link EventLog.read} accepts; page with cursors beyond it. */
export const MAX_READ_LIMIT = 10_000;

/** A live subscription: history after the cursor, then live, no gap, no duplicate. */
export interface SubscribeQuery {
  filter: EventFilter;
  after?: Cursor;
  signal?: AbortSignal;
}

/** A message handed to a durable consumer. Ack it once processed. */
export interface ConsumedEvent extends LoggedEvent {
  /** Mark processed: after a restart the consumer resumes after it. */
  ack(): Promise<void>;
  /** Ask for redelivery (after `delayMs`, default at once). */
  nak(delayMs?: number): Promise<void>;
  /** How many times it has been delivered (1 the first time). */
  deliveryCount: number;
}

/** Options of a durable consumer. */
export interface DurableConsumerOptions {
  /**
   * Durable name, unique per logical consumer (e.g. "receipts"). Iterators
   * opened with the same name compete (each event goes to one of them).
   */
  name: string;
  /**
   * Events the consumer sees; `{ workspaceId: "*" }` means every event. The
   * latest `consume` call's filter and `ackWaitMs` win (create-or-update).
   */
  filter: EventFilter | { workspaceId: "*" };
  /** Redeliver an unacked event after this long (default 30 s). */
  ackWaitMs?: number;
  /**
   * While this iterator holds an event — handed out, or pulled ahead and not
   * yet handed out — neither acked nor naked, tell the log every this many
   * ms that it is still being worked on (JetStream: an in-progress ack), so
   * the ack wait runs out only for what a dead consumer held. With it a
   * short `ackWaitMs` brings a crashed consumer's events back within
   * seconds without redelivering those of a live but slow one. Default: off.
   */
  keepAliveMs?: number;
  signal?: AbortSignal;
}

/**
 * EventLog is the append-only log of Trellis events (port; JetStream and
 * in-process implementations pass the same contract suite).
 *
 * Rules it keeps:
 * - an event id is stored at most once: appending it again returns
 *   `duplicate: true` and the original position;
 * - per resource, `sequence` is 1, 2, 3, … with no gap: an event with
 *   `sequence = 0` gets the next one; an event carrying a sequence must be exactly
 *   the next one (else `conflict`), which lets the outbox relay keep the
 *   sequence it assigned in the database;
 * - `previous_event_id` is filled in when empty;
 * - readers see events of one resource in sequence order.
 *
 * `append` is not atomic across a batch: events are stored in order per
 * resource and the first failure is thrown after the rest of the batch settled;
 * retrying the whole batch is safe because ids dedupe. Errors are
 * `TrellisError`s (from `@trellis/runtime`) with reasons `invalid_request`, `conflict`,
 * `cursor_expired` and `service_unavailable`.
 *
 * Durable consumers are at-least-once: an event not acked within `ackWaitMs`
 * (or nak'ed) is delivered again, possibly to another iterator or replica. An
 * iterator that closes leaves its unacked events to come back at the latest
 * after `ackWaitMs` (the in-process log hands them back at once).
 */
export interface EventLog {
  append(events: readonly Event[], options?: AppendOptions): Promise<AppendResult[]>;
  read(query: ReadQuery): Promise<LoggedEvent[]>;
  subscribe(query: SubscribeQuery): AsyncIterable<LoggedEvent>;
  /**
   * The filter's latest event, or undefined when it has none: where a reader
   * that wants only what happens from now on starts (`after` its position).
   */
  last(filter: EventFilter): Promise<LoggedEvent | undefined>;
  /** Durable consumer: resumes after the last acked event across restarts. */
  consume(options: DurableConsumerOptions): AsyncIterable<ConsumedEvent>;
  /** Resolves when the backing server is reachable (health checks). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A signal: input, approval or cancel sent to whatever waits on `signalId`. */
export interface Signal {
  signalId: string;
  /** Dedupe id: the same delivery id is stored once. Defaults to `signalId`. */
  deliveryId: string;
  payload: JsonValue;
  deliveredAt: Date;
}

/** Options of {@link SignalBus.subscribe}. */
export interface SignalSubscribeOptions {
  /** `""` or whole dot-separated segments ending in `"."`, e.g. `"task_123."`. */
  prefix: string;
  /** Durable group name; the durable state is kept per `(group, prefix)`. */
  group: string;
  /** Redeliver an unacked signal after this long (default 30 s). */
  ackWaitMs?: number;
  signal?: AbortSignal;
}

/** A signal handed to a subscriber; ack it once handled (at-least-once). */
export interface ReceivedSignal extends Signal {
  ack(): Promise<void>;
}

/**
 * SignalBus carries signals to whichever replica waits for them (port).
 * Delivery is at-least-once; a delivery id is stored once (dedupe; on
 * JetStream within the stream's duplicate window, 24 h by default).
 */
export interface SignalBus {
  deliver(signal: { signalId: string; deliveryId?: string; payload: JsonValue }): Promise<{
    duplicate: boolean;
  }>;
  /** The first stored delivery for `signalId`, if any (for a waiter that starts late). */
  get(signalId: string): Promise<Signal | undefined>;
  /**
   * Signals whose id starts with `prefix`, including those delivered before
   * the call and not yet acked by this durable `group`. Replicas sharing a
   * group (and prefix) compete: each signal goes to one of them.
   *
   * Signal ids are dot-separated segments (`task_123.input.q1`), and `prefix`
   * is whole segments: `""` (everything) or a string ending in `"."`
   * (`"task_123."`); anything else fails with `invalid_request`.
   */
  subscribe(options: SignalSubscribeOptions): AsyncIterable<ReceivedSignal>;
  close(): Promise<void>;
}
