/**
 * One write transaction with its events, for the stores beside the task
 * store (branches, connectors): the state change and the events describing
 * it commit together (transactional outbox), and the committed rows are
 * handed to the relay afterwards so they reach the log at once.
 */
import type { Event } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import { appendToOutboxLogged } from "@trellis/storage";
import type { Kysely, Transaction } from "kysely";

/** Where events go and who hears about them. */
export interface EventWriterOptions {
  /** The schema of the outbox. */
  outboxSchema: string;
  /** Called after a commit that logged events (kick the relay). */
  onLogged?: (logged: readonly LoggedEvent[]) => void;
}

/**
 * Runs `work` in a transaction of `kysely`; the events it `emit`s are
 * appended to the outbox at the end of the same transaction.
 */
export async function writeWithEvents<DB, T>(
  kysely: Kysely<DB>,
  options: EventWriterOptions,
  work: (trx: Transaction<DB>, emit: (event: Event) => void) => Promise<T>,
): Promise<T> {
  let logged: LoggedEvent[] = [];
  const result = await kysely.transaction().execute(async (trx) => {
    const events: Event[] = [];
    const value = await work(trx, (event) => events.push(event));
    if (events.length > 0) logged = await appendToOutboxLogged(trx, options.outboxSchema, events);
    return value;
  });
  if (logged.length > 0) options.onLogged?.(logged);
  return result;
}
