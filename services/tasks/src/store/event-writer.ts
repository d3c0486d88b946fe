/**
 * The stores beside the task store (branches, connectors): their tables in
 * the service's schema, and one write transaction with its events, so the
 * state change and the events describing it commit together (the outbox's
 * unit of work) and the outbox writer hands the committed rows to the relay
 * so they reach the log at once.
 */
import type { Event } from "@trellis/contracts/core";
import type { Database, OutboxWriter } from "@trellis/storage";
import type { Kysely, Transaction } from "kysely";

/** Where events go. */
export interface EventWriterOptions {
  /** The service's outbox (its writer kicks the relay after each commit). */
  outbox: OutboxWriter;
}

/** Options of a store beside the task store. */
export interface SchemaStoreOptions extends EventWriterOptions {
  database: Database<unknown>;
  /** The schema its tables are in. */
  schema: string;
}

/** A store's tables, read and written in its schema. */
export interface SchemaStore<DB> {
  /** Reads, in the store's schema. */
  db: Kysely<DB>;
  /**
   * Runs `work` in a transaction in the store's schema; the events it
   * `emit`s are appended to the outbox at the end of the same transaction.
   */
  write<T>(work: (trx: Transaction<DB>, emit: (event: Event) => void) => Promise<T>): Promise<T>;
}

/** The {@link SchemaStore} of `options`. */
export function schemaStore<DB>(options: SchemaStoreOptions): SchemaStore<DB> {
  const kysely = options.database.kysely as Kysely<DB>;
  return {
    db: kysely.withSchema(options.schema),
    write: (work) =>
      options.outbox.transaction(kysely, (unit) =>
        work(unit.trx.withSchema(options.schema), (event) => unit.add([event])),
      ),
  };
}
