/**
 * The transactional outbox as one unit of work: a writer opens a unit (one
 * transaction), adds the events its state change produced, and commits; the
 * unit appends them to the outbox inside the transaction and, once it has
 * committed, hands the committed rows to the relay itself.
 *
 * | step | who | what happens |
 * |---|---|---|
 * | open | caller: `writer.transaction(kysely, work)` | one transaction; `unit.trx` is it |
 * | add | caller: `unit.add(events)` | events wait in the unit |
 * | fold (optional) | caller: `unit.fold()` | waiting events are sequenced; the caller inserts their rows in a CTE of its own statement and settles the positions it got back |
 * | commit | the unit, when `work` returns | events still waiting are appended; the transaction commits |
 * | hand over | the unit, after the commit | the relay is kicked with the committed rows and their positions |
 *
 * A rollback (an error from `work`) appends nothing and hands nothing over.
 */
import { clone } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import { type Kysely, type RawBuilder, sql, type Transaction } from "kysely";
import { assertSchemaName } from "../schema-name.js";
import {
  appendToOutboxLogged,
  outboxCounterTuple,
  outboxEntries,
  outboxPositionsSql,
  outboxRowTuple,
  sequenceFreshOutboxEvents,
  sequenceOutboxEvents,
} from "./outbox.js";
import type { NewOutboxRow } from "./outbox-schema.js";

/** What a unit hands its committed rows to: an `OutboxRelay` (its `kick`). */
export interface OutboxHandOver {
  /** See `OutboxRelay.kick`: the rows become the receiver's. */
  kick(committed?: readonly LoggedEvent[]): void;
}

/** Options of {@link createOutboxWriter}. */
export interface OutboxWriterOptions {
  /** The schema whose outbox the events go to. */
  schema: string;
  /**
   * The relay of that outbox: after each commit that added events it is
   * kicked with the committed rows (an embedded relay publishes them without
   * reading them back). Default: none (the relay finds the rows by its
   * NOTIFY or its poll).
   */
  relay?: OutboxHandOver;
}

/** Opens units of work on one outbox (see the module header). */
export interface OutboxWriter {
  /** The outbox's schema. */
  readonly schema: string;
  /**
   * Runs `work` in one transaction of `kysely`, appends the events it added
   * and did not fold, commits, then hands the committed rows to the relay.
   * Returns what `work` returned; an error from `work` rolls everything back.
   */
  transaction<DB, T>(kysely: Kysely<DB>, work: (unit: OutboxUnit<DB>) => Promise<T>): Promise<T>;
  /**
   * Wakes the relay (when there is one) to look for committed rows now: for
   * a writer that appended outbox rows in a transaction of its own (e.g. a
   * journal projector, `appendToOutboxLogged`) after that transaction
   * committed; with `committed` (its rows) the relay need not read them back.
   */
  kick(committed?: readonly LoggedEvent[]): void;
  /**
   * Events of resources that have none yet (e.g. `receipt/<a new id>`), for
   * a single statement of the caller's own that runs outside any
   * transaction — its implicit transaction is the unit of work, so no
   * BEGIN, sequence statement or COMMIT. Their sequences (1, 2, … per
   * resource) are assigned now, without asking the database; the statement
   * inserts the rows and the resources' counter rows and fails (unique
   * violation) if a resource had events after all. `adopt` as in
   * {@link OutboxUnit.add}.
   */
  fresh(events: readonly Event[], options?: { adopt?: boolean }): OutboxFreshFold;
}

/**
 * Outbox rows of fresh resources for one statement of the caller's own (see
 * {@link OutboxWriter.fresh}): `ctes(name)` goes into its `with` list,
 * `positions(name)` beside its result, and once it has committed with the
 * rows, `committed(value)` hands them to the relay.
 */
export interface OutboxFreshFold {
  /** How many events it holds. */
  readonly size: number;
  /**
   * Two data-modifying CTEs: `<name>_sequence` (the counter rows) and
   * `<name>` (the outbox rows, `returning id, position`). With `when` (a
   * boolean SQL expression) they insert only when it holds.
   */
  ctes(name: string, when?: RawBuilder<unknown>): RawBuilder<unknown>;
  /** SQL of one value: the positions the CTE `name` returned. */
  positions(name: string): string;
  /**
   * After the statement committed having inserted the rows: hands them to
   * the relay (without it the relay finds them by its NOTIFY or poll).
   */
  committed(positions: unknown): void;
}

/** One transaction's events on their way to the outbox. */
export interface OutboxUnit<DB> {
  /** The transaction: the caller's state change runs on it. */
  readonly trx: Transaction<DB>;
  /**
   * Adds events, appended in call order at commit (or by {@link fold}).
   * Their sequences and previous ids are assigned then, and empty ids and
   * times filled (see `appendToOutbox`). `adopt`: the caller gives the
   * objects up, so they are completed in place (default false: they are
   * copied now, and the caller's objects are never modified).
   */
  add(events: readonly Event[], options?: { adopt?: boolean }): void;
  /** How many added events wait to be written. */
  readonly pending: number;
  /**
   * Takes the waiting events for a statement of the caller's own (one round
   * trip less than appending them at commit): sequences them now and returns
   * their rows; undefined when none wait.
   */
  fold(): Promise<OutboxFold | undefined>;
}

/**
 * Outbox rows a caller inserts in its own statement, as a data-modifying CTE
 * `name as (insert into table (…) values rows… returning returning)`. It
 * must insert every row, in order, in this transaction, select
 * `positions(name)` beside its result and pass that value to `settle`.
 */
export interface OutboxFold {
  /** The outbox table, quoted and schema-qualified. */
  readonly table: string;
  /** The rows, in order. */
  readonly rows: readonly NewOutboxRow[];
  /** What the CTE's insert returns: `"id", "position"`. */
  readonly returning: string;
  /** SQL of one value: the positions the CTE `cte` returned. */
  positions(cte: string): string;
  /**
   * The value the statement returned for {@link positions}. Unsettled rows
   * are still committed and relayed, only read back by the relay instead of
   * handed over.
   */
  settle(positions: unknown): void;
}

/**
 * Creates an {@link OutboxWriter} for the outbox of `options.schema`.
 *
 * @example
 *   const outbox = createOutboxWriter({ schema: "tasks", relay });
 *   await outbox.transaction(database.kysely, async (unit) => {
 *     await unit.trx.insertInto("tasks").values(row).execute();
 *     unit.add([taskCreatedEvent]);
 *   });
 */
export function createOutboxWriter(options: OutboxWriterOptions): OutboxWriter {
  const { schema, relay } = options;
  assertSchemaName(schema);
  const table = `"${schema}"."outbox"`;
  return {
    schema,
    async transaction(kysely, work) {
      let unit: Unit<never> | undefined;
      const result = await kysely.transaction().execute(async (trx) => {
        const opened = new Unit(trx, schema, table);
        unit = opened as unknown as Unit<never>;
        const value = await work(opened);
        await opened.flush();
        return value;
      });
      if (relay && unit?.wrote) relay.kick(unit.committed());
      return result;
    },
    kick(committed) {
      relay?.kick(committed);
    },
    fresh(events, options = {}) {
      const sequenced = sequenceFreshOutboxEvents(events, options);
      return {
        size: sequenced.rows.length,
        ctes(name, when) {
          const gate = when === undefined ? sql`` : sql` where ${when}`;
          const counters = sequenced.counters.map((c) => outboxCounterTuple(c));
          const rows = sequenced.rows.map((r) => outboxRowTuple(r));
          // Rows go in call order, so within a resource positions follow sequences.
          return sql`${sql.id(`${name}_sequence`)} as (
            insert into ${sql.id(schema, "outbox_sequence")} (resource_object, resource_id,
              last_sequence, last_event_id, replaced_event_id)
            select * from (values ${sql.join(counters)}) v${gate}),
          ${sql.id(name)} as (
            insert into ${sql.id(schema, "outbox")} (id, workspace_id, session_id,
              resource_object, resource_id, sequence, kind, body, created_at)
            select * from (values ${sql.join(rows)}) v${gate}
            returning "id", "position")`;
        },
        positions: outboxPositionsSql,
        committed(positions) {
          const list = Array.isArray(positions)
            ? (positions as { id: string; position: string | bigint | number }[])
            : [];
          relay?.kick(outboxEntries(sequenced.events, list, sequenced.rows));
        },
      };
    },
  };
}

class Unit<DB> implements OutboxUnit<DB> {
  readonly trx: Transaction<DB>;
  readonly #schema: string;
  readonly #table: string;
  #waiting: Event[] = [];
  #logged: LoggedEvent[] = [];
  #unsettled = 0;
  /** True once events were added: the commit has rows for the relay. */
  wrote = false;

  constructor(trx: Transaction<DB>, schema: string, table: string) {
    this.trx = trx;
    this.#schema = schema;
    this.#table = table;
  }

  get pending(): number {
    return this.#waiting.length;
  }

  add(events: readonly Event[], options: { adopt?: boolean } = {}): void {
    if (events.length === 0) return;
    this.wrote = true;
    for (const event of events) {
      this.#waiting.push(options.adopt === true ? event : clone(EventSchema, event));
    }
  }

  async fold(): Promise<OutboxFold | undefined> {
    const events = this.#take();
    if (events === undefined) return undefined;
    // Every waiting event is the unit's own (copied when added unless adopted).
    const sequenced = await sequenceOutboxEvents(this.trx, this.#schema, events, { adopt: true });
    this.#unsettled += 1;
    let settled = false;
    return {
      table: this.#table,
      rows: sequenced.rows,
      returning: '"id", "position"',
      positions: outboxPositionsSql,
      settle: (positions) => {
        if (settled) throw new Error("outbox: a fold is settled once");
        settled = true;
        this.#unsettled -= 1;
        const list = Array.isArray(positions)
          ? (positions as { id: string; position: string | bigint | number }[])
          : [];
        this.#logged.push(...outboxEntries(sequenced.events, list, sequenced.rows));
      },
    };
  }

  /** Appends what still waits (at commit). */
  async flush(): Promise<void> {
    const events = this.#take();
    if (events === undefined) return;
    this.#logged.push(
      ...(await appendToOutboxLogged(this.trx, this.#schema, events, { adopt: true })),
    );
  }

  /** The committed rows in position order, or none when some were not settled. */
  committed(): LoggedEvent[] | undefined {
    if (this.#unsettled > 0) return undefined;
    return this.#logged.sort((a, b) =>
      a.position < b.position ? -1 : a.position > b.position ? 1 : 0,
    );
  }

  #take(): Event[] | undefined {
    if (this.#waiting.length === 0) return undefined;
    const list = this.#waiting;
    this.#waiting = [];
    return list;
  }
}
