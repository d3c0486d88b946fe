/**
 * The publisher: a projector whose read model is the event log. It hands
 * the journal's public `Event` entries to the log, in position order,
 * batch by batch, and moves its durable position after the log took them.
 *
 * | it promises | how |
 * |---|---|
 * | every event entry committed to the journal reaches the log | the position moves only in the transaction that commits after `append` resolved; a crash before that re-reads and re-appends the batch |
 * | consumers see each event once | a re-append is stored once by the log: JetStream by `Nats-Msg-Id` = event id (duplicate window, 24 h by default) and, for events carrying their sequence, by finding the id at that sequence after the window too; the in-process log by position (`positionedLog`: journal position = log position) or by id |
 * | order | entries are read by position (gapless, visible in order) and each resource's events reach the log in the owner's append order; across resources the in-process log (`positionedLog`) keeps journal order exactly, JetStream's batch append publishes different resources in parallel |
 * | one publisher per name, even with two instances | the projector's claim of the batch (row lock on its position, held while publishing) |
 * | an event the log refuses for good does not stall the rest | over `MAX_EVENT_BYTES` (checked here, so both logs agree), `payload_too_large` / `invalid_request`: a stand-in (`event.dead_lettered`, same id, resource and sequence) goes out instead, at once; a body that does not decode is skipped; both counted (`trellis.journal.publisher.dead_letters`) and reported |
 * | a log that is down is waited for, a row that keeps failing is not | `service_unavailable`, `deadline_exceeded`, `rate_limited` and unknown errors retry with backoff (50 ms doubling to 5 s) for as long as they last; any other refusal of the same batch `maxAttempts` times in a row (e.g. a `conflict`) is narrowed down to its events and those are dead-lettered |
 * | lag and health | the projector's: gauge `trellis.journal.projector.lag`, `status()`, `projectorHealth(publisher)` |
 *
 * What it does not promise: a consumer that re-reads the log by event id
 * after JetStream's duplicate window could see a re-append of an event
 * published without a sequence (sequence 0) twice — only if the publisher
 * crashed between the append and its commit and restarted more than the
 * window later. The turn path's events carry their sequences.
 */
import { type Meter, metrics } from "@opentelemetry/api";
import type { Event } from "@trellis/contracts/core";
import {
  type AppendResult,
  type EventLog,
  encodedBodies,
  type LoggedEvent,
  MAX_EVENT_BYTES,
} from "@trellis/eventlog";
import { isTrellisError } from "@trellis/runtime";
import {
  type DeadLetter,
  deadLetterStandIn,
  decodeOutboxBody,
  isPermanentRefusal,
} from "../outbox/dead-letter.js";
import { invalidJournalInput } from "./journal-errors.js";
import type { JournalRecord } from "./journal-read.js";
import { createProjector, type Projector, type ProjectorOptions } from "./projector.js";

/** The counter of events the publisher could not publish as they are (attributes `trellis.publisher`, `trellis.publisher.reason`). */
export const publisherDeadLetterMetric = "trellis.journal.publisher.dead_letters";

/** A log that takes events with positions of the caller's (the in-process log). */
export interface PositionedLog {
  appendLogged(
    events: readonly LoggedEvent[],
    options?: { adopt?: boolean },
  ): Promise<AppendResult[]>;
}

/** Options of {@link createPublisher}. */
export interface PublisherOptions<DB> extends Omit<ProjectorOptions<DB>, "project"> {
  /** Where events go (JetStream, or an in-process log without `positionedLog`). */
  log: Pick<EventLog, "append">;
  /**
   * Hand events to this log with their journal position instead of calling
   * `log.append` (embedded mode: `InProcessEventLog.appendLogged`): the
   * log's positions are the journal's, gaps where entries are not events.
   */
  positionedLog?: PositionedLog;
  /**
   * Which entries are public events (protobuf `Event` bodies); the others
   * (step records) are passed over. E.g. `(r) => !r.kind.startsWith("tasks.step.")`.
   */
  isEvent(record: JournalRecord): boolean;
  /**
   * Times the log may refuse the same batch, for a reason that is neither
   * permanent nor the log being unavailable (a `conflict`, an internal
   * error), before its refused events are dead-lettered (default 5).
   */
  maxAttempts?: number;
  /** Each dead letter (default: a console error naming it); counted either way. */
  onDeadLetter?: (dead: DeadLetter) => void;
}

/** Counters of a {@link Publisher} since it started. */
export interface PublisherStats {
  /** Events the log took (duplicates included: a re-append after a crash). */
  published: number;
  /** Of those, the log already held (answered `duplicate`). */
  duplicates: number;
  deadLetters: number;
  /** Entries passed over because `isEvent` said no. */
  passed: number;
}

/** A running publisher: a {@link Projector} (position, `waitFor`, status, health) plus counters. */
export interface Publisher extends Projector {
  stats(): PublisherStats;
}

/** The log is down or busy: wait for it, whatever the row. */
function logUnwell(error: unknown): boolean {
  if (!isTrellisError(error)) return true;
  return (
    error.reason === "service_unavailable" ||
    error.reason === "deadline_exceeded" ||
    error.reason === "rate_limited"
  );
}

/**
 * Starts publishing `<schema>.journal` from the publisher's durable position
 * (its row in `journal_projection`, named `name`). See the module header
 * for what it guarantees.
 *
 * @example
 *   const publisher = await createPublisher({
 *     database, schema: "tasks", name: "events", journal, log: eventLog,
 *     isEvent: (record) => !record.kind.startsWith("tasks.step."),
 *   });
 *   // ListEvents after a write: await publisher.waitFor(lastPosition)
 */
export async function createPublisher<DB>(options: PublisherOptions<DB>): Promise<Publisher> {
  const { log, positionedLog, isEvent, name } = options;
  const maxAttempts = options.maxAttempts ?? 5;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw invalidJournalInput("maxAttempts must be a positive integer", "maxAttempts");
  }
  const meter: Meter = options.meter ?? metrics.getMeter("@trellis/storage");
  const counter = meter.createCounter(publisherDeadLetterMetric, {
    description:
      "Journal events the log refused for good (a stand-in went out) or that did not decode",
  });
  const onDeadLetter =
    options.onDeadLetter ??
    ((dead: DeadLetter) =>
      console.error(
        `[storage] publisher ${name}: dead-lettered position ${dead.position} (${dead.kind || "?"} ${dead.eventId || "?"}): ${dead.reason}: ${dead.message}`,
      ));
  const stats: PublisherStats = { published: 0, duplicates: 0, deadLetters: 0, passed: 0 };
  const report = (dead: DeadLetter): void => {
    stats.deadLetters++;
    counter.add(1, { "trellis.publisher": name, "trellis.publisher.reason": dead.reason });
    onDeadLetter(dead);
  };

  const append = async (batch: readonly LoggedEvent[]): Promise<void> => {
    const results = positionedLog
      ? await positionedLog.appendLogged(batch, { adopt: true })
      : await log.append(
          batch.map((logged) => logged.event),
          { encoded: encodedBodies(batch) },
        );
    stats.published += results.length;
    for (const result of results) if (result.duplicate) stats.duplicates++;
  };

  /**
   * Publishes the batch; when the log refuses it with an error `forGood`
   * says cannot change, publishes event by event and dead-letters each one
   * so refused. Anything else is thrown (the projector retries the batch).
   */
  const publish = async (
    batch: readonly LoggedEvent[],
    forGood: (error: unknown) => boolean,
  ): Promise<void> => {
    try {
      await append(batch);
      return;
    } catch (error) {
      if (!forGood(error)) throw error;
    }
    for (const entry of batch) {
      try {
        await append([entry]);
      } catch (error) {
        if (!forGood(error)) throw error;
        const reason = isTrellisError(error) ? error.reason : "internal_error";
        const message = error instanceof Error ? error.message : String(error);
        report({
          position: entry.position,
          eventId: entry.event.id,
          kind: entry.event.kind,
          reason,
          message,
        });
        // Small and well formed; refused too only when the log refuses the
        // resource itself (its sequence): then the event is skipped.
        const standIn: Event = deadLetterStandIn(entry.event, reason, message);
        await append([{ position: entry.position, event: standIn }]).catch((again: unknown) => {
          if (!forGood(again)) throw again;
        });
      }
    }
  };

  // The batch the log keeps refusing, and how often in a row.
  let stuckAt: bigint | undefined;
  let attempts = 0;

  const projector = await createProjector<DB>({
    ...options,
    async project(records) {
      const batch: LoggedEvent[] = [];
      for (const record of records) {
        if (!isEvent(record)) {
          stats.passed++;
          continue;
        }
        const event = decodeOutboxBody(record.body);
        if (event && record.body.byteLength > MAX_EVENT_BYTES) {
          // Refused by every log alike (JetStream would, the in-process log
          // would not): an event published embedded is publishable in the mesh.
          const message = `event of ${record.body.byteLength} bytes is over the log's ${MAX_EVENT_BYTES}`;
          report({
            position: record.position,
            eventId: event.id,
            kind: event.kind,
            reason: "payload_too_large",
            message,
          });
          const standIn = deadLetterStandIn(event, "payload_too_large", message);
          batch.push({ position: record.position, event: standIn });
        } else if (event) batch.push({ position: record.position, event, body: record.body });
        else {
          // Nothing to stand in for: no id, no resource.
          report({
            position: record.position,
            eventId: "",
            kind: record.kind,
            reason: "undecodable",
            message: "the journal entry's body is not an Event",
          });
        }
      }
      const first = batch[0]?.position;
      if (first === undefined) return;
      attempts = stuckAt === first ? attempts + 1 : 1;
      stuckAt = first;
      // After maxAttempts, a refusal that is not the log being down is the
      // row's own: dead-letter it rather than stall every event behind it.
      const forGood =
        attempts >= maxAttempts
          ? (error: unknown) => isPermanentRefusal(error) || !logUnwell(error)
          : isPermanentRefusal;
      await publish(batch, forGood);
      stuckAt = undefined;
      attempts = 0;
    },
  });

  return Object.assign(projector, { stats: () => ({ ...stats }) });
}
