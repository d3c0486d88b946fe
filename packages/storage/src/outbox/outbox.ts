import { randomUUID } from "node:crypto";
import { clone, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { timestampDate, timestampNow } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema } from "@trellis/contracts/core";
import { type LoggedEvent, MAX_EVENT_BYTES } from "@trellis/eventlog";
import type { TrellisError } from "@trellis/runtime";
import { type Kysely, type RawBuilder, sql, type Transaction } from "kysely";
import type { Database } from "../database.js";
import { storageError } from "../errors.js";
import { assertSchemaName } from "../schema-name.js";
import type { NewOutboxRow, OutboxDatabase, OutboxSequenceRow } from "./outbox-schema.js";

/**
 * The outbox tables of `schema` seen through `kysely`. The cast is the one
 * place storage steps outside the caller's `DB` type: the outbox tables are
 * storage's, not part of any service's table interface.
 */
export function outboxTables<DB>(kysely: Kysely<DB>, schema: string): Kysely<OutboxDatabase> {
  assertSchemaName(schema);
  return (kysely as unknown as Kysely<OutboxDatabase>).withSchema(schema);
}

/**
 * Appends events to the outbox of `schema`, inside the caller's transaction,
 * so they commit — and later reach the event log — exactly when the state
 * change they describe commits; a rollback leaves no event and uses up no
 * sequence.
 *
 * For each event, in order, it:
 * - assigns the resource's next `sequence` (1, 2, 3, … per `resource`, no gap)
 *   and `previous_event_id` (the resource's previous event; empty for 1);
 * - fills `id` (`evt_<uuid>`) and `created_at` (now) when empty;
 * - stores the complete event (protobuf binary) and returns the completed
 *   copies; the caller's objects are not modified.
 *
 * Concurrent transactions appending to the same resource are serialised by
 * that resource's counter row (the second waits for the first to commit or
 * roll back), so they never collide and sequences follow commit order.
 * One call locks its resources in a fixed order, so transactions that append
 * once never deadlock each other (a transaction appending several times
 * locks in call order; Postgres aborts a deadlock, retry it). Keep such
 * transactions short: the resource stays locked until commit.
 *
 * Throws a TrellisError (`invalid_request`) when an event has no resource,
 * already carries a sequence or previous event id (they are assigned here),
 * or repeats an id of the same batch; an id already stored fails the insert
 * (unique violation) and so the caller's transaction.
 */
export async function appendToOutbox<DB>(
  trx: Transaction<DB>,
  schema: string,
  events: readonly Event[],
): Promise<Event[]> {
  return (await appendToOutboxLogged(trx, schema, events)).map((entry) => entry.event);
}

/** Options of {@link sequenceOutboxEvents} and {@link appendToOutboxLogged}. */
export interface SequenceOptions {
  /** See {@link sequenceOutboxEvents}. Default false. */
  adopt?: boolean;
  /**
   * Events the caller holds encoded already (protobuf binary of the event
   * exactly as given: no sequence, no previous event id), e.g. an owned
   * step's event read from the journal: its row's body is that encoding
   * with the two assigned fields appended (protobuf's merge of repeated
   * scalar fields: the same message when parsed, same size), instead of
   * encoding the whole event again. An event given without an id or a
   * creation time (filled in here) is encoded in full.
   */
  encoded?: ReadonlyMap<Event, Uint8Array>;
}

/**
 * {@link appendToOutbox}, returning each completed event with the position
 * its row got — what a unit of work hands to the relay after its commit
 * (`outbox-writer.ts`), so the relay need not read the rows back. Options
 * as in {@link sequenceOutboxEvents}.
 */
export async function appendToOutboxLogged<DB>(
  trx: Transaction<DB>,
  schema: string,
  events: readonly Event[],
  options: SequenceOptions = {},
): Promise<LoggedEvent[]> {
  const { events: completed, rows } = await sequenceOutboxEvents(trx, schema, events, options);
  const db = outboxTables(trx, schema);
  const inserted: { id: string; position: bigint }[] = [];
  // Rows go in call order, so within a resource positions follow sequences.
  for (const chunk of chunks(rows, CHUNK)) {
    inserted.push(
      ...(await db.insertInto("outbox").values(chunk).returning(["id", "position"]).execute()),
    );
  }
  return outboxEntries(completed, inserted, rows);
}

/**
 * SQL of one value listing the rows that the data-modifying CTE `cte` (an
 * insert into the outbox `returning id, position`) inserted, as JSON
 * objects `{ id, position }` — what {@link outboxEntries} takes: a writer
 * that folds its outbox rows into a larger statement selects this beside
 * its own result.
 */
export function outboxPositionsSql(cte: string): string {
  const name = `"${cte.replaceAll('"', '""')}"`;
  return `(select json_agg(json_build_object('id', "id", 'position', "position"::text)) from ${name})`;
}

/**
 * Pairs sequenced events (`sequenceOutboxEvents`) with the positions their
 * rows got, as a statement inserting them returned them (`id`, `position`;
 * the position as a number or its text, e.g. from {@link outboxPositionsSql}):
 * the entries a writer hands to the relay, in position order, each with its
 * row's `body` when `rows` (the events' rows, in the same order) are given,
 * so the relay publishes the stored bytes instead of encoding again. Throws
 * when an event's row is missing — the caller's statement did not insert
 * what it was given.
 */
export function outboxEntries(
  events: readonly Event[],
  inserted: readonly { id: string; position: bigint | string | number }[],
  rows?: readonly Pick<NewOutboxRow, "body">[],
): LoggedEvent[] {
  const positions = new Map(inserted.map((row) => [row.id, BigInt(row.position)]));
  const entries = events.map((event, index): LoggedEvent => {
    const position = positions.get(event.id);
    if (position === undefined) {
      throw new Error(`outbox: no row was inserted for event ${event.id}`);
    }
    const body = rows?.[index]?.body;
    return body === undefined ? { event, position } : { event, position, body };
  });
  return entries.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
}

/**
 * The first half of {@link appendToOutbox}, for callers that write the
 * outbox rows in a statement of their own (a data-modifying CTE of the
 * transaction's last statement saves one round trip): assigns the events'
 * sequences — locking their resources until the transaction ends, as
 * `appendToOutbox` does — and returns the completed events and the rows to
 * insert into `<schema>.outbox`, in order. The caller must insert every row,
 * in order, in the same transaction; otherwise the sequences it took are
 * lost when the transaction commits (roll back instead).
 *
 * `adopt`: the caller gives the event objects up, so they are completed in
 * place and returned instead of copies (the caller's own, freshly built
 * events: a copy each would be wasted). Default false. `encoded`: see
 * {@link SequenceOptions}.
 */
export async function sequenceOutboxEvents<DB>(
  trx: Transaction<DB>,
  schema: string,
  events: readonly Event[],
  options: SequenceOptions = {},
): Promise<{ events: Event[]; rows: NewOutboxRow[] }> {
  assertSchemaName(schema);
  if (!trx.isTransaction) {
    throw invalid("appendToOutbox must run inside the caller's transaction", "trx");
  }
  if (events.length === 0) return { events: [], rows: [] };
  const adopt = options.adopt === true;
  // Read before `complete` fills in an id or a time the encoding lacks.
  const prefixes = encodedPrefixes(events, options.encoded);
  const completed = events.map((event, index) => complete(event, index, adopt));
  const seen = new Set<string>();
  for (const event of completed) {
    if (seen.has(event.id))
      throw invalid(`event id ${event.id} appears twice in one append`, "events");
    seen.add(event.id);
  }

  // Group per resource, keeping each resource's events in call order.
  const byResource = new Map<string, Event[]>();
  for (const event of completed) {
    const key = resourceKey(event);
    const group = byResource.get(key);
    if (group) group.push(event);
    else byResource.set(key, [event]);
  }
  // A fixed lock order (sorted keys; Postgres upserts VALUES rows in order)
  // means two transactions touching the same resources cannot deadlock.
  const keys = [...byResource.keys()].sort();
  const values = keys.map((key) => {
    const group = byResource.get(key) as Event[];
    const first = group[0] as Event;
    const last = group[group.length - 1] as Event;
    const resource = first.resource as NonNullable<Event["resource"]>;
    return sql`(${resource.object}, ${resource.id}, ${BigInt(group.length)}, ${last.id}, '')`;
  });
  const counters: CounterRow[] = [];
  // Chunks keep each statement under Postgres's 65 535 parameters.
  for (const chunk of chunks(values, CHUNK)) {
    // The row lock taken by this upsert is held until the caller's
    // transaction ends: it is what serialises writers of one resource.
    const result = await sql<CounterRow>`
      insert into ${sql.id(schema, "outbox_sequence")} as c
        (resource_object, resource_id, last_sequence, last_event_id, replaced_event_id)
      values ${sql.join(chunk)}
      on conflict (resource_object, resource_id) do update set
        last_sequence = c.last_sequence + excluded.last_sequence,
        last_event_id = excluded.last_event_id,
        replaced_event_id = c.last_event_id
      returning resource_object, resource_id, last_sequence, replaced_event_id`.execute(trx);
    counters.push(...result.rows);
  }

  for (const counter of counters) {
    const group = byResource.get(keyOf(counter.resource_object, counter.resource_id));
    if (group === undefined) throw new Error("outbox counter returned an unknown resource");
    let sequence = counter.last_sequence - BigInt(group.length);
    let previous = counter.replaced_event_id;
    for (const event of group) {
      sequence += 1n;
      event.sequence = sequence;
      event.previousEventId = previous;
      previous = event.id;
    }
  }

  return {
    events: completed,
    rows: completed.map((event, index) => outboxRow(event, prefixes?.[index])),
  };
}

/** Each event's usable encoding from `encoded` (see {@link SequenceOptions}), by index. */
function encodedPrefixes(
  events: readonly Event[],
  encoded: ReadonlyMap<Event, Uint8Array> | undefined,
): (Uint8Array | undefined)[] | undefined {
  if (encoded === undefined || encoded.size === 0) return undefined;
  return events.map((event) =>
    event.id !== "" &&
    event.createdAt !== undefined &&
    event.sequence === 0n &&
    event.previousEventId === ""
      ? encoded.get(event)
      : undefined,
  );
}

const SEQUENCE_FIELD = EventSchema.field.sequence.number;
const PREVIOUS_EVENT_FIELD = EventSchema.field.previousEventId.number;

/** `prefix` (the event encoded before sequencing) with its sequence and previous event id appended. */
function withSequence(prefix: Uint8Array, event: Event): Uint8Array {
  const writer = new BinaryWriter().tag(SEQUENCE_FIELD, WireType.Varint).uint64(event.sequence);
  if (event.previousEventId !== "") {
    writer.tag(PREVIOUS_EVENT_FIELD, WireType.LengthDelimited).string(event.previousEventId);
  }
  const tail = writer.finish();
  const body = new Uint8Array(prefix.length + tail.length);
  body.set(prefix);
  body.set(tail, prefix.length);
  return body;
}

/**
 * Events their writer sequenced itself, ready for a statement of the
 * caller's own (the journal's `AppendOptions.events`): the outbox rows and
 * each resource's counter row, absolute (see {@link sequencedOutboxCtes}).
 */
export interface SequencedOutboxRows {
  /** The events, as given (now with an id and a creation time). */
  events: Event[];
  rows: NewOutboxRow[];
  counters: OutboxSequenceRow[];
}

/**
 * Checks and encodes events whose writer assigned their sequences and
 * previous event ids — a writer that alone writes its resources' events and
 * knows their counters (a session owner) — so a bad one is refused up
 * front, alone, instead of failing a statement shared with other writers:
 * a resource; per resource, sequences that follow on from each other and
 * previous ids that chain them (the first `sequence` ≥ 1, its previous id
 * empty exactly when it is 1); ids unique among them; no NUL in the columns
 * stored as text; an encoding within the event log's limit. Fills a
 * missing id or creation time in place. A counter that moved meanwhile
 * (another writer) is not detected here: the outbox's unique
 * (resource, sequence) refuses the statement instead.
 */
export function sequencedOutboxRows(
  events: readonly Event[],
  param = "events",
): SequencedOutboxRows {
  const ids = new Set<string>();
  const counters = new Map<string, OutboxSequenceRow>();
  const rows = events.map((event, index) => {
    const at = `${param}[${index}]`;
    const resource = event.resource;
    if (resource === undefined || resource.object === "" || resource.id === "") {
      throw invalid(`${at} has no resource (object and id are required)`, param);
    }
    if (event.id === "") event.id = `evt_${randomUUID().replaceAll("-", "")}`;
    event.createdAt ??= timestampNow();
    const texts = [
      event.id,
      event.kind,
      event.workspaceId,
      event.sessionId,
      resource.object,
      resource.id,
    ];
    if (texts.some((text) => text.includes("\0"))) {
      throw invalid(
        `${at} has a NUL character in its id, kind, workspace, session or resource`,
        param,
      );
    }
    if (ids.has(event.id)) throw invalid(`${at}.id appears twice in one append`, param);
    ids.add(event.id);
    const key = resourceKey(event);
    const counter = counters.get(key);
    const chained = counter
      ? event.sequence === counter.last_sequence + 1n &&
        event.previousEventId === counter.last_event_id
      : event.sequence >= 1n && (event.sequence === 1n) === (event.previousEventId === "");
    if (!chained) {
      throw invalid(
        `${at} (${resource.object} ${resource.id}, sequence ${event.sequence}) does not follow on from the resource's previous event`,
        param,
      );
    }
    counters.set(key, {
      resource_object: resource.object,
      resource_id: resource.id,
      last_sequence: event.sequence,
      last_event_id: event.id,
      replaced_event_id: event.previousEventId,
    });
    return outboxRow(event);
  });
  return { events: [...events], rows, counters: [...counters.values()] };
}

/**
 * An outbox row as a typed VALUES tuple (the outbox's insert column order:
 * id, workspace, session, resource object and id, sequence, kind, body,
 * created at), after `lead` columns of the caller's own.
 */
export function outboxRowTuple(
  r: NewOutboxRow,
  ...lead: RawBuilder<unknown>[]
): RawBuilder<unknown> {
  return sql`(${sql.join([
    ...lead,
    sql`${r.id}::text, ${r.workspace_id}::text, ${r.session_id}::text,
      ${r.resource_object}::text, ${r.resource_id}::text, ${r.sequence}::bigint,
      ${r.kind}::text, ${r.body}::bytea, ${r.created_at}::timestamptz`,
  ])})`;
}

/** A counter row as a typed VALUES tuple (`outbox_sequence`'s column order), after `lead` columns. */
export function outboxCounterTuple(
  c: OutboxSequenceRow,
  ...lead: RawBuilder<unknown>[]
): RawBuilder<unknown> {
  return sql`(${sql.join([
    ...lead,
    sql`${c.resource_object}::text, ${c.resource_id}::text, ${c.last_sequence}::bigint,
      ${c.last_event_id}::text, ${c.replaced_event_id}::text`,
  ])})`;
}

/**
 * Two data-modifying CTEs for one statement of the caller's own, writing
 * {@link sequencedOutboxRows}: `<name>_sequence` sets each resource's
 * counter row to the given values (never lowering it) and `<name>` inserts
 * the rows, `returning id, position` ({@link outboxEntries} pairs them).
 * Several writes' rows may be concatenated; a resource's counter must then
 * be given once, its last.
 */
export function sequencedOutboxCtes(
  schema: string,
  name: string,
  rows: readonly NewOutboxRow[],
  counters: readonly OutboxSequenceRow[],
): RawBuilder<unknown> {
  assertSchemaName(schema);
  const counterValues = counters.map((c) => outboxCounterTuple(c));
  const rowValues = rows.map((r) => outboxRowTuple(r));
  // Rows go in call order, so within a resource positions follow sequences.
  return sql`${sql.id(`${name}_sequence`)} as (
    insert into ${sql.id(schema, "outbox_sequence")} as c (resource_object, resource_id,
      last_sequence, last_event_id, replaced_event_id)
    select * from (values ${sql.join(counterValues)}) v
    on conflict (resource_object, resource_id) do update set
      last_sequence = excluded.last_sequence,
      last_event_id = excluded.last_event_id,
      replaced_event_id = excluded.replaced_event_id
    where c.last_sequence < excluded.last_sequence),
  ${sql.id(name)} as (
    insert into ${sql.id(schema, "outbox")} (id, workspace_id, session_id,
      resource_object, resource_id, sequence, kind, body, created_at)
    select * from (values ${sql.join(rowValues)}) v
    returning "id", "position")`;
}

/**
 * {@link sequenceOutboxEvents} for events whose resources have no event yet
 * (e.g. a resource named by an id minted for it): no statement and no
 * transaction needed, each resource's events get sequences 1, 2, … in call
 * order. Returns, besides the rows, each resource's `outbox_sequence` row;
 * the caller inserts both in one statement of its own (a plain insert of the
 * counter rows, no `on conflict`: a resource that did have events fails the
 * statement with a unique violation instead of breaking its sequence).
 * Validation as in `appendToOutbox`.
 */
export function sequenceFreshOutboxEvents(
  events: readonly Event[],
  options: { adopt?: boolean } = {},
): { events: Event[]; rows: NewOutboxRow[]; counters: OutboxSequenceRow[] } {
  const adopt = options.adopt === true;
  const completed = events.map((event, index) => complete(event, index, adopt));
  const seen = new Set<string>();
  const counters = new Map<string, OutboxSequenceRow>();
  for (const event of completed) {
    if (seen.has(event.id))
      throw invalid(`event id ${event.id} appears twice in one append`, "events");
    seen.add(event.id);
    const resource = event.resource as NonNullable<Event["resource"]>;
    const key = resourceKey(event);
    const counter = counters.get(key);
    event.sequence = (counter?.last_sequence ?? 0n) + 1n;
    event.previousEventId = counter?.last_event_id ?? "";
    counters.set(key, {
      resource_object: resource.object,
      resource_id: resource.id,
      last_sequence: event.sequence,
      last_event_id: event.id,
      // As the first upsert of a resource leaves it (see sequenceOutboxEvents).
      replaced_event_id: "",
    });
  }
  return {
    events: completed,
    rows: completed.map((event) => outboxRow(event)),
    counters: [...counters.values()],
  };
}

/**
 * The outbox row of a sequenced event (refused when too large for the log);
 * `prefix`: the event's encoding before sequencing, when the caller had it.
 */
function outboxRow(event: Event, prefix?: Uint8Array): NewOutboxRow {
  const resource = event.resource as NonNullable<Event["resource"]>;
  const body = prefix ? withSequence(prefix, event) : toBinary(EventSchema, event);
  // Refused here, in the writer's transaction, rather than by the log after
  // it was queued (where it would stand in the way of every later event).
  if (body.length > MAX_EVENT_BYTES) {
    throw storageError({
      reason: "payload_too_large",
      message: `event ${event.kind} is ${body.length} bytes; the event log takes at most ${MAX_EVENT_BYTES}`,
      metadata: { kind: event.kind, size_bytes: String(body.length) },
    });
  }
  return {
    id: event.id,
    workspace_id: event.workspaceId,
    session_id: event.sessionId,
    resource_object: resource.object,
    resource_id: resource.id,
    sequence: event.sequence,
    kind: event.kind,
    body,
    created_at: timestampDate(event.createdAt ?? timestampNow()),
  };
}

// Rows per statement: 1000 × 9 columns stays well under the parameter limit.
const CHUNK = 1000;

interface CounterRow {
  resource_object: string;
  resource_id: string;
  last_sequence: bigint;
  replaced_event_id: string;
}

function* chunks<T>(items: readonly T[], size: number): Generator<T[]> {
  for (let at = 0; at < items.length; at += size) yield items.slice(at, at + size);
}

/** One event read back from an outbox. */
export interface OutboxEntry {
  /** The row's position (see `OutboxTable.position`). */
  position: bigint;
  event: Event;
  /** When the relay handed it to the event log; null while pending. */
  publishedAt: Date | null;
}

/** Options of {@link readOutbox}. */
export interface ReadOutboxOptions {
  /** Only rows after this position (exclusive). */
  afterPosition?: bigint;
  /** At most this many rows (required: the outbox can be large). */
  limit: number;
  /** Only rows not yet published. */
  unpublishedOnly?: boolean;
}

/**
 * Reads a schema's outbox in position order, published rows included unless
 * `unpublishedOnly` — the outbox as a durable log, e.g. for embedded mode to
 * rebuild its in-process event log at start (page with `afterPosition` = the
 * last position returned).
 *
 * Paging while writers are active can skip a row whose lower position
 * commits late (see `OutboxTable.position`): rebuild before accepting writes.
 * Rows removed by `pruneOutbox` are gone from this view.
 */
export async function readOutbox<DB>(
  database: Database<DB>,
  schema: string,
  options: ReadOutboxOptions,
): Promise<OutboxEntry[]> {
  let query = outboxTables(database.kysely, schema)
    .selectFrom("outbox")
    .select(["position", "body", "published_at"])
    .orderBy("position")
    .limit(options.limit);
  if (options.afterPosition !== undefined) {
    query = query.where("position", ">", options.afterPosition);
  }
  if (options.unpublishedOnly) query = query.where("published_at", "is", null);
  const rows = await query.execute();
  return rows.map((row) => ({
    position: row.position,
    event: fromBinary(EventSchema, row.body),
    publishedAt: row.published_at,
  }));
}

/** Options of {@link pruneOutbox}. */
export interface PruneOutboxOptions {
  /** Delete rows published more than this long ago (by the database clock). */
  olderThanMs: number;
  /** Delete in batches of this many rows, one transaction each (default 1000). */
  batchSize?: number;
}

/**
 * Retention: deletes published outbox rows older than `olderThanMs`; never an
 * unpublished row, never a sequence counter (so sequences continue after a
 * prune). Returns how many rows it deleted. Not run automatically: in
 * embedded mode the outbox is the durable event log, so pruning it drops
 * history for good; run it from a scheduled job where the event log keeps
 * its own copy.
 */
export async function pruneOutbox<DB>(
  database: Database<DB>,
  schema: string,
  options: PruneOutboxOptions,
): Promise<number> {
  const db = outboxTables(database.kysely, schema);
  const batchSize = options.batchSize ?? 1000;
  const cutoff = sql<Date>`now() - make_interval(secs => ${options.olderThanMs / 1000})`;
  let total = 0;
  for (;;) {
    // Small batches keep each delete's locks and WAL short next to live traffic.
    const result = await db
      .deleteFrom("outbox")
      .where("position", "in", (eb) =>
        eb
          .selectFrom("outbox")
          .select("position")
          .where("published_at", "<", cutoff)
          .orderBy("position")
          .limit(batchSize),
      )
      .executeTakeFirst();
    const deleted = Number(result.numDeletedRows);
    total += deleted;
    if (deleted < batchSize) return total;
  }
}

function complete(event: Event, index: number, adopt: boolean): Event {
  const resource = event.resource;
  if (resource === undefined || resource.object === "" || resource.id === "") {
    throw invalid(`events[${index}] has no resource (object and id are required)`, "events");
  }
  if (event.sequence !== 0n || event.previousEventId !== "") {
    throw invalid(
      `events[${index}] already has a sequence or previous_event_id; the outbox assigns them`,
      "events",
    );
  }
  const copy = adopt ? event : clone(EventSchema, event);
  if (copy.id === "") copy.id = `evt_${randomUUID().replaceAll("-", "")}`;
  copy.createdAt ??= timestampNow();
  return copy;
}

function resourceKey(event: Event): string {
  const resource = event.resource as NonNullable<Event["resource"]>;
  return keyOf(resource.object, resource.id);
}

// NUL cannot appear in a Postgres text value, so the key is unambiguous.
function keyOf(object: string, id: string): string {
  return `${object}\u0000${id}`;
}

function invalid(message: string, param: string): TrellisError {
  return storageError({ reason: "invalid_request", message, param });
}
