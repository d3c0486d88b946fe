/**
 * One write transaction with its events, for the stores beside the task
 * store (branches, connectors): the state change and the events describing
 * it commit together (the outbox's unit of work), and the outbox writer hands
 * the committed rows to the relay so they reach the log at once.
 */
import type { Event } from "@trellis/contracts/core";
import type { OutboxWriter } from "@trellis/storage";
import type { Kysely, Transaction } from "kysely";

/** Where events go. */
export interface EventWriterOptions {
  /** The service's outbox (its writer kicks the relay after each commit). */
  outbox: OutboxWriter;
}

/**
 * Runs `work` in a transaction of `kysely`; the events it `emit`s are
 * appended to the outbox at the end of the same transaction.
 */
export function writeWithEvents<DB, T>(
  kysely: Kysely<DB>,
  options: EventWriterOptions,
  work: (trx: Transaction<DB>, emit: (event: Event) => void) => Promise<T>,
): Promise<T> {
  return options.outbox.transaction(kysely, (unit) => work(unit.trx, (event) => unit.add([event])));
}
