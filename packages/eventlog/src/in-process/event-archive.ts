import type { EventFilter, LoggedEvent } from "../event-log.js";

/** What {@link EventArchive.readAfter} reads. */
export interface ArchiveRead {
  /** Events after this position (exclusive). */
  afterPosition: bigint;
  /** …and at or below this one (inclusive). */
  throughPosition: bigint;
  /** At most this many events. */
  limit: number;
  /** Only events inside this filter (`"*"` workspace: every event). */
  filter: EventFilter | { workspaceId: "*" };
}

/**
 * The durable store behind a windowed {@link InProcessEventLog}: where the
 * events it no longer holds in memory are read back from. It holds the
 * log's events with the log's positions and sequences (embedded mode: the
 * outbox table, which is the durable log there; the in-process log is fed
 * from it and keeps its positions).
 *
 * Filters mean what they mean everywhere on the port (`eventMatches`): a
 * `sessionId` of `""` or `NO_SESSION` selects the events outside any session.
 *
 * @example
 *   // @trellis/storage implements it over an outbox table:
 *   const log = await InProcessEventLog.open({
 *     archive: createOutboxArchive(database, "trellis"),
 *     history: await readOutboxTail(database, "trellis", DEFAULT_EVENT_WINDOW),
 *   });
 */
export interface EventArchive {
  /** Matching events in the range, in position order. */
  readAfter(read: ArchiveRead): Promise<LoggedEvent[]>;
  /** The newest matching event at or below `throughPosition`, if any. */
  last(filter: EventFilter, throughPosition: bigint): Promise<LoggedEvent | undefined>;
  /** The event stored with this id, if any. */
  find(eventId: string): Promise<LoggedEvent | undefined>;
}
