import { metrics } from "@opentelemetry/api";
import {
  type AppendResult,
  type EventLog,
  encodedBodies,
  type LoggedEvent,
} from "@trellis/eventlog";
import { sql } from "kysely";
import { sleep } from "../async.js";
import type { Database, Lease, Unlisten } from "../database.js";
import { storageError } from "../errors.js";
import { assertSchemaName } from "../schema-name.js";
import { type DeadLetter, decodeOutboxBody, publishOrDeadLetter } from "./dead-letter.js";
import { outboxTables } from "./outbox.js";
import { outboxChannel } from "./outbox-schema.js";

/** How often a cursor-following relay marks what it handed over (see markThenPublish). */
const MARK_INTERVAL_MS = 1000;

/** How long a NOTIFY naming a position not handed over waits for its kick (see notified). */
const NOTIFY_GRACE_MS = 20;

/**
 * The reason a wait for work ends early. One shared value: `abort()` without
 * a reason builds a DOMException (with its stack) per wake-up, several per turn.
 */
const WOKEN = new Error("outbox relay woken");

/** Options of {@link createOutboxRelay}. */
export interface OutboxRelayOptions<DB = unknown> {
  database: Database<DB>;
  /** The service schema whose outbox it relays. */
  schema: string;
  /** Where events go. Only `append` is used; it must deduplicate by event id. */
  eventLog: Pick<EventLog, "append">;
  /**
   * Look for work this often even without a notification (default 1000 ms).
   * The fallback for missed notifications; kick() and NOTIFY make it rare.
   */
  pollIntervalMs?: number;
  /** Rows read, published and marked per round (default 256). */
  batchSize?: number;
  /** First delay after a failed round; doubles up to `maxRetryDelayMs` (default 100 ms). */
  retryDelayMs?: number;
  /** Longest delay between retries (default 10 000 ms). */
  maxRetryDelayMs?: number;
  /** Errors of failed rounds (they are retried). Default: a console warning. */
  onError?: (error: unknown) => void;
  /**
   * Each row the log refused for good (see `dead-letter.ts`): the relay
   * published a stand-in in its place and moved on. Default: a console
   * error naming the row. Counted by `trellis.outbox.dead_letters` either way.
   */
  onDeadLetter?: (dead: DeadLetter) => void;
  /**
   * The event log is rebuilt from this outbox whenever the process starts
   * (embedded mode: the in-process log, see `readOutbox`), and this relay is
   * the only one of the schema. Then a round marks its rows published and
   * reads them in ONE statement (`update … returning`) before appending
   * them: an event marked but not appended when the process dies still
   * reaches the log at the next start, from the outbox. An append that
   * fails is retried with the same events before anything newer. Default
   * false (mark after append: the rule for a log outside the process).
   */
  logRebuiltFromOutbox?: boolean;
  /**
   * With `logRebuiltFromOutbox`, on PGlite: hand every event to this log
   * together with its outbox position instead of calling `eventLog.append`,
   * so the log's positions are the outbox's, gaps included (a rolled-back
   * insert uses up a position), and stay the same when the log is rebuilt
   * at the next start (embedded mode: `InProcessEventLog.appendLogged`).
   * Needs writers that commit in position order, which PGlite's single
   * connection guarantees.
   *
   * Such a log holds every outbox row up to its `lastPosition` (it was
   * rebuilt from the outbox when it opened), so the relay starts after that
   * position and writes nothing to the outbox: rows are not marked
   * published (`published_at` stays null), since the rebuilt log, not the
   * column, is what says a row reached it. One update per event less — a
   * chat turn's six outbox rows were each rewritten once to mark them.
   */
  positionedLog?: {
    /** `adopt`: the log may keep the objects (the relay never touches them again). */
    appendLogged(
      events: readonly LoggedEvent[],
      options?: { adopt?: boolean },
    ): Promise<AppendResult[]>;
    /** The highest outbox position the log holds (0 when it holds none). */
    readonly lastPosition: bigint;
  };
  /**
   * LISTEN for the outbox's NOTIFY (default true). Turn it off when every
   * writer calls `kick()` after its commit (one process): the NOTIFY would
   * only wake the relay a second time per commit, for a round that finds
   * nothing.
   */
  listen?: boolean;
}

/**
 * Moves committed outbox events to the event log (the relay half of the
 * transactional outbox).
 *
 * Rules it keeps:
 * - every committed event is published — after a crash anywhere, the next
 *   relay finds the rows still unpublished and publishes them;
 * - an event is published with its own id and sequence, so a re-publish
 *   after a crash between "published" and "marked published" is stored once
 *   by the log (the EventLog port's id rule);
 * - per resource, events are published in sequence order: rows go out in
 *   position order, and a resource's positions follow its sequences;
 * - one active relay per schema across all replicas: it holds the lock
 *   `trellis.outbox-relay.<schema>`; the others wait on it and the first in
 *   line takes over as soon as the holder stops or dies;
 * - wakes on `kick()`, on the outbox's NOTIFY (sent at commit; unless
 *   `listen: false`) and, failing both, every `pollIntervalMs`.
 *
 * A round the log rejects (down, or a `conflict` because it holds different
 * history for a resource) is retried with backoff and reported to `onError`;
 * it is never skipped, since skipping would break per-resource order. An
 * event the log refuses for good (too large, malformed) is dead-lettered:
 * a stand-in with its id and sequence goes out instead, `onDeadLetter` and
 * the `trellis.outbox.dead_letters` counter say so, and the relay goes on
 * at once (`dead-letter.ts`).
 *
 * Stop the relay before closing its database. A stopped relay stays
 * stopped; create a new one to resume.
 */
export interface OutboxRelay {
  /** Starts contending for the schema's relay lock, then relaying. Idempotent. */
  start(): void;
  /**
   * Look for work now (call after committing events to skip the poll delay).
   *
   * `committed`: the outbox rows the caller's transaction just committed, as
   * the outbox holds them — each event exactly as stored (its row's body
   * decoded would equal it) with its row's position. A unit of work
   * (`createOutboxWriter`) passes them itself after its commit. A relay that follows the outbox
   * by cursor (PGlite) publishes them without reading them back when they
   * continue from its cursor; rows that do not continue from it (a position
   * in between was committed by a writer that handed nothing over, or used
   * up by a rollback) are read from the outbox as usual. A relay that marks
   * after append (the default) publishes them without reading them back
   * while it leads, and marks them published in bulk within a second; a row
   * the log refuses as handed over (an earlier row of its resource is not
   * out yet) sends the round to the outbox. The relay takes the objects
   * over: the caller must not change them.
   */
  kick(committed?: readonly LoggedEvent[]): void;
  /** True while this relay holds the lock and is the one publishing. */
  readonly active: boolean;
  /** Stops: finishes the round in progress, releases the lock. */
  stop(): Promise<void>;
}

/**
 * Creates an {@link OutboxRelay} for one schema; call `start()` to run it.
 *
 * @example
 *   const relay = createOutboxRelay({ database, schema: "tasks", eventLog });
 *   relay.start();
 *   // after a commit that appended events:
 *   relay.kick();
 */
export function createOutboxRelay<DB>(options: OutboxRelayOptions<DB>): OutboxRelay {
  const { database, schema, eventLog } = options;
  assertSchemaName(schema);
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  const batchSize = options.batchSize ?? 256;
  const minDelay = options.retryDelayMs ?? 100;
  const maxDelay = options.maxRetryDelayMs ?? 10_000;
  const onError =
    options.onError ??
    ((error: unknown) =>
      console.warn(
        `[storage] outbox relay ${schema}: ${error instanceof Error ? error.message : String(error)}`,
      ));
  const db = outboxTables(database.kysely, schema);
  const positionedLog = options.positionedLog;
  if (positionedLog && (!options.logRebuiltFromOutbox || database.kind !== "pglite")) {
    throw storageError({
      reason: "invalid_request",
      message:
        "positionedLog needs logRebuiltFromOutbox on PGlite (outbox rows must reach the log in position order)",
      param: "positionedLog",
    });
  }
  const deadLetters = metrics
    .getMeter("@trellis/storage")
    .createCounter("trellis.outbox.dead_letters", {
      description: "Outbox rows the event log refused for good (a stand-in was published instead)",
    });
  const onDeadLetter =
    options.onDeadLetter ??
    ((dead: DeadLetter) =>
      console.error(
        `[storage] outbox relay ${schema}: dead-lettered row ${dead.position} (${dead.kind || "?"} ${dead.eventId || "?"}): ${dead.reason}: ${dead.message}`,
      ));
  const reportDead = (dead: readonly DeadLetter[]) => {
    for (const entry of dead) {
      deadLetters.add(1, {
        "trellis.outbox.schema": schema,
        "trellis.outbox.reason": entry.reason,
      });
      onDeadLetter(entry);
    }
  };
  const publishRaw = (batch: readonly LoggedEvent[]): Promise<unknown> =>
    positionedLog
      ? positionedLog.appendLogged(batch, { adopt: true })
      : eventLog.append(
          batch.map((logged) => logged.event),
          // The rows' bytes go out as they are, not encoded again.
          { encoded: encodedBodies(batch) },
        );
  // Publishes a batch; rows the log refuses for good are dead-lettered.
  const publish = async (batch: readonly LoggedEvent[]): Promise<void> =>
    reportDead(
      await publishOrDeadLetter(batch, publishRaw, (entry, event) => ({
        position: entry.position,
        event,
      })),
    );
  // Outbox rows to events; a body that does not decode is dead-lettered.
  const decodeRows = (rows: readonly { position: bigint; body: Uint8Array }[]): LoggedEvent[] => {
    const batch: LoggedEvent[] = [];
    for (const row of rows) {
      const event = decodeOutboxBody(row.body);
      if (event) batch.push({ position: row.position, event, body: row.body });
      else {
        reportDead([
          {
            position: row.position,
            eventId: "",
            kind: "",
            reason: "undecodable",
            message: "the outbox row's body is not an Event",
          },
        ]);
      }
    }
    return batch;
  };

  const stopping = new AbortController();
  let running: Promise<void> | undefined;
  let active = false;
  // Wake-ups. A wake asks for a round that starts after it (the commit it
  // reports happened before it). Every round clears what was asked before it
  // started; what arrives while a round runs is kept, so it is never lost:
  // `wakeAny` for a wake that names no rows, `wakeFor` for the positions a
  // wake named (a kick's committed rows, a NOTIFY's position). A wake whose
  // positions this relay already published is answered and dropped: each
  // commit in a server process both kicks and NOTIFYs, and the second of the
  // two would otherwise run a round that finds nothing (issue 20, point 5).
  // `wake` ends the current wait early.
  let wakeAny = false;
  const wakeFor = new Set<bigint>();
  // Rows handed over by a kick wait in `handed` (server hand-over).
  let wakeHanded = false;
  // Positions the last rounds published (insertion order; bounded).
  const published = new Set<bigint>();
  const publishedBound = batchSize * 4;
  let wake: (() => void) | undefined;

  const signal = (positions: readonly bigint[] | undefined): void => {
    if (positions === undefined || positions.length === 0) wakeAny = true;
    else {
      if (positions.every((p) => published.has(p))) return;
      for (const p of positions) wakeFor.add(p);
      if (wakeFor.size > publishedBound) {
        wakeFor.clear();
        wakeAny = true;
      }
    }
    wake?.();
  };

  const kick = (committed?: readonly LoggedEvent[]) => {
    if (committed !== undefined && committed.length > 0) {
      if (publishesHandOver) {
        // Leading on a server: publish them as handed over (no read-back).
        if (active) {
          handOver(committed);
          wakeHanded = true;
          wake?.();
          return;
        }
      } else if (takesHandOver) handOver(committed);
    }
    signal(committed?.map((entry) => entry.position));
  };

  // A NOTIFY's payload: the highest outbox position its statement inserted
  // (see `outboxMigrations`), or "" (an older trigger, a reconnect).
  //
  // While this relay takes hand-overs, the NOTIFY of its own process's
  // commit often arrives before the writer's kick (both leave PostgreSQL at
  // the commit; the kick waits for the commit's answer): a position it was
  // not handed is given NOTIFY_GRACE_MS for its kick before it asks for a
  // read. Another replica's rows reach the log that much later.
  const notified = (payload?: string): void => {
    const position = payload && /^[0-9]{1,19}$/.test(payload) ? BigInt(payload) : undefined;
    if (position === undefined || !publishesHandOver || !active) {
      signal(position === undefined ? undefined : [position]);
      return;
    }
    if (published.has(position) || isHanded(position)) return;
    awaitingKick.push(position);
    if (awaitingKick.length > publishedBound) {
      awaitingKick = [];
      signal(undefined);
      return;
    }
    graceTimer ??= setTimeout(() => {
      graceTimer = undefined;
      const positions = awaitingKick;
      awaitingKick = [];
      const unknown = positions.filter((p) => !published.has(p) && !isHanded(p));
      if (unknown.length > 0) signal(unknown);
    }, NOTIFY_GRACE_MS);
  };
  let awaitingKick: bigint[] = [];
  let graceTimer: ReturnType<typeof setTimeout> | undefined;

  // Positions a round published answer the wakes that named them.
  function publishedRows(positions: Iterable<bigint>): void {
    for (const p of positions) {
      published.add(p);
      wakeFor.delete(p);
    }
    if (published.size > publishedBound) {
      let excess = published.size - publishedBound;
      for (const p of published) {
        if (excess-- <= 0) break;
        published.delete(p);
      }
    }
  }

  // Called as a round starts: it answers every wake asked for before it.
  // True when one of them asks for a read of the outbox (not only the
  // publishing of handed-over rows).
  function roundStarts(): boolean {
    const read = wakeAny || wakeFor.size > 0;
    wakeAny = false;
    wakeFor.clear();
    wakeHanded = false;
    return read;
  }

  async function waitForWork(ms: number, lost: AbortSignal): Promise<void> {
    if (wakeAny || wakeFor.size > 0 || wakeHanded) return;
    // Rows published from a hand-over are marked at most MARK_INTERVAL_MS later.
    if (unmarked.length > 0)
      ms = Math.max(0, Math.min(ms, markedAt + MARK_INTERVAL_MS - Date.now()));
    const woken = new AbortController();
    wake = () => woken.abort(WOKEN);
    await sleep(ms, woken.signal, lost, stopping.signal);
    wake = undefined;
  }

  // Rows marked published whose append failed (logRebuiltFromOutbox): sent
  // again, before anything newer, so per-resource order holds.
  let unsent: LoggedEvent[] | undefined;

  // With logRebuiltFromOutbox the relay follows the outbox by position.
  // The first round marks and reads every row not yet published (rows left
  // by an earlier run) in one statement, and learns the outbox's head in the
  // same snapshot; after that a round only reads the rows after its cursor
  // (an index range scan, no write), and the rows it handed to the log are
  // marked published in bulk at most once per MARK_INTERVAL_MS and at stop.
  // With a positioned log (embedded mode) nothing is marked: the first round
  // starts after the log's last position, as the log was rebuilt from the
  // outbox, and a row never handed over before a crash is in the log the
  // next start rebuilds. Reading by cursor is sound only where writers
  // commit in position order (PGlite: one connection, one transaction at a time),
  // so no row can later appear at or below the cursor. Rows handed over but
  // not yet marked when the process dies are marked and re-appended at the
  // next start; the log keeps one copy per event id.
  // On a server, concurrent transactions commit out of position order: there
  // every round marks and reads what is unpublished, as the first one does.
  const followsByCursor = database.kind === "pglite";
  const takesHandOver = followsByCursor && options.logRebuiltFromOutbox === true;
  // Mark after append (a log outside the process, e.g. on a server): while
  // this relay leads, rows its own process's writers hand over with their
  // kick are published as handed over — no read-back — and marked published
  // in bulk at most once per MARK_INTERVAL_MS (and before every read, and at
  // stop). Rows nobody handed over (another replica's, a crashed process's,
  // a writer without a relay) are read from the outbox as before: on a
  // NOTIFY naming a position it was not handed, on a kick without rows, and
  // at least every `pollIntervalMs`. Per-resource order holds because the
  // log refuses a sequence that is not the next one (`conflict`): a handed
  // row whose resource has an earlier row not yet published (another
  // replica committed it and its NOTIFY is still on its way) fails, and the
  // round reads the outbox instead, which has both, in position order.
  // A crash between publish and mark re-publishes; the log keeps one copy.
  const publishesHandOver = options.logRebuiltFromOutbox !== true;
  // Positions published from a hand-over, not yet marked published.
  let unmarked: bigint[] = [];
  let lastReadAt = 0;
  let cursor: bigint | undefined;
  let markedUpTo = 0n;
  let markedAt = 0;

  // Rows writers handed over with their kick (see `kick`), not yet taken. A
  // round takes the run of them that continues from the cursor (position
  // cursor + 1, + 2, …) instead of reading those rows back; the first gap
  // ends the run and sends the round to the outbox. Bounded: a relay that
  // is not leading (or is behind) drops them and reads instead.
  let handed: LoggedEvent[] = [];

  function handOver(committed: readonly LoggedEvent[]): void {
    if (handed.length + committed.length > batchSize * 4) {
      handed = [];
      // Dropped: the outbox still has them.
      wakeAny = true;
    }
    handed.push(...committed);
  }

  function isHanded(position: bigint): boolean {
    for (const entry of handed) if (entry.position === position) return true;
    return false;
  }

  // Publishes the handed-over rows (server hand-over). False when the log
  // refused them: the caller reads the outbox instead (only what the outbox
  // holds is ever dead-lettered; ids dedupe what did go out).
  async function publishHanded(lost: AbortSignal): Promise<{ ok: boolean; count: number }> {
    let batch = handed.filter((entry) => !published.has(entry.position));
    handed = [];
    if (batch.length === 0 || lost.aborted) return { ok: true, count: 0 };
    batch.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
    if (batch.length > batchSize) {
      handed = batch.slice(batchSize);
      wakeHanded = true;
      batch = batch.slice(0, batchSize);
    }
    try {
      await publishRaw(batch);
    } catch {
      handed = [];
      return { ok: false, count: 0 };
    }
    const positions = batch.map((entry) => entry.position);
    publishedRows(positions);
    if (unmarked.length === 0) markedAt = Date.now();
    unmarked.push(...positions);
    return { ok: true, count: batch.length };
  }

  // Marks the rows published from a hand-over as published, in one statement.
  async function markUnmarked(): Promise<void> {
    if (unmarked.length === 0) return;
    const positions = unmarked;
    await sql`
      update ${sql.id(schema, "outbox")} set published_at = now()
      where position = any(${positions.map(String)}::bigint[]) and published_at is null`.execute(
      database.kysely,
    );
    unmarked = unmarked.length === positions.length ? [] : unmarked.slice(positions.length);
    markedAt = Date.now();
  }

  // The handed-over rows that continue from the cursor, in order; none when
  // the next position was not handed over (read it from the outbox).
  function takeHanded(after: bigint): LoggedEvent[] {
    if (handed.length === 0) return [];
    const pending = handed.filter((entry) => entry.position > after);
    pending.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
    let run = 0;
    while (
      run < pending.length &&
      run < batchSize &&
      (pending[run] as LoggedEvent).position === after + BigInt(run) + 1n
    ) {
      run++;
    }
    const taken = pending.slice(0, run);
    handed = pending.slice(run);
    return taken;
  }

  async function markThenPublish(): Promise<number> {
    if (unsent) {
      await publish(unsent);
      unsent = undefined;
    }
    // A positioned log already holds the outbox up to its last position.
    if (cursor === undefined && positionedLog) cursor = positionedLog.lastPosition;
    let rows: { position: bigint; body: Uint8Array }[];
    const taken = cursor === undefined ? [] : takeHanded(cursor);
    if (taken.length > 0) {
      rows = [];
    } else if (cursor === undefined || !followsByCursor) {
      const result = await sql<{
        position: bigint | null;
        body: Uint8Array | null;
        head: bigint | null;
      }>`
        with next as (
          select position from ${sql.id(schema, "outbox")}
          where published_at is null
          order by position
          limit ${batchSize}
        ), marked as (
          update ${sql.id(schema, "outbox")} as o set published_at = now()
          from next where o.position = next.position
          returning o.position, o.body
        )
        select m.position, m.body, h.head
        from (select max(position) as head from ${sql.id(schema, "outbox")}) as h
        left join marked as m on true`.execute(database.kysely);
      rows = result.rows.flatMap((row) =>
        row.position === null || row.body === null
          ? []
          : [{ position: row.position, body: row.body }],
      );
      // A full batch may leave unpublished rows behind: mark again next round.
      if (followsByCursor && rows.length < batchSize) {
        cursor = result.rows[0]?.head ?? 0n;
        markedUpTo = cursor;
        markedAt = Date.now();
      }
    } else {
      rows = (
        await sql<{ position: bigint; body: Uint8Array }>`
          select position, body from ${sql.id(schema, "outbox")}
          where position > ${cursor}
          order by position
          limit ${batchSize}`.execute(database.kysely)
      ).rows;
    }
    rows.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
    const batch: LoggedEvent[] = taken.length > 0 ? taken : decodeRows(rows);
    const last = batch.at(-1);
    if (last && cursor !== undefined && last.position > cursor) cursor = last.position;
    if (taken.length > 0) {
      try {
        await publishRaw(batch);
        publishedRows(batch.map((entry) => entry.position));
      } catch (error) {
        // The hand-over is only a shortcut: rows the log refuses as handed
        // over are read from the outbox instead (the round is retried), and
        // only what the outbox holds is ever dead-lettered.
        cursor = (taken[0] as LoggedEvent).position - 1n;
        handed = [];
        throw error;
      }
    } else if (batch.length > 0) {
      unsent = batch;
      await publish(batch);
      unsent = undefined;
      publishedRows(batch.map((entry) => entry.position));
    }
    if (Date.now() - markedAt >= MARK_INTERVAL_MS) await markPublished();
    return batch.length;
  }

  // Marks what the cursor passed (and the log holds) as published; nothing
  // for a positioned log, which says itself what it holds.
  async function markPublished(): Promise<void> {
    if (positionedLog || cursor === undefined || unsent || cursor <= markedUpTo) return;
    const upTo = cursor;
    await sql`
      update ${sql.id(schema, "outbox")} set published_at = now()
      where position > ${markedUpTo} and position <= ${upTo} and published_at is null`.execute(
      database.kysely,
    );
    markedUpTo = upTo;
    markedAt = Date.now();
  }

  // One round: the oldest unpublished rows, published then marked. Returns
  // how many rows it handled.
  async function relayBatch(lost: AbortSignal, readAsked: boolean): Promise<number> {
    if (options.logRebuiltFromOutbox) return markThenPublish();
    let handled = 0;
    let read = readAsked || Date.now() - lastReadAt >= pollIntervalMs;
    if (handed.length > 0) {
      const outcome = await publishHanded(lost);
      handled = outcome.count;
      if (!outcome.ok) read = true;
    }
    if (!read) {
      if (unmarked.length > 0 && Date.now() - markedAt >= MARK_INTERVAL_MS) await markUnmarked();
      return handled;
    }
    // Rows published from a hand-over are marked first, so the read does not
    // return them.
    await markUnmarked();
    lastReadAt = Date.now();
    return handled + (await readRound(lost));
  }

  async function readRound(lost: AbortSignal): Promise<number> {
    const rows = await db
      .selectFrom("outbox")
      .select(["position", "body"])
      .where("published_at", "is", null)
      .orderBy("position")
      .limit(batchSize)
      .execute();
    if (rows.length === 0) return 0;
    // Lost the lock while reading: another relay may be running already.
    if (lost.aborted) return 0;
    // A crash between append and the update below leaves the rows
    // unpublished: the next round re-publishes them, the log drops the
    // duplicates by id.
    await publish(decodeRows(rows));
    await db
      .updateTable("outbox")
      .set({ published_at: sql<Date>`now()` })
      .where(
        "position",
        "in",
        rows.map((row) => row.position),
      )
      .execute();
    publishedRows(rows.map((row) => row.position));
    // A full batch may leave more behind: the next round reads again.
    if (rows.length >= batchSize) wakeAny = true;
    return rows.length;
  }

  async function lead(lease: Lease): Promise<void> {
    let delay = minDelay;
    while (!stopping.signal.aborted && !lease.lost.aborted) {
      let handled: number;
      try {
        handled = await relayBatch(lease.lost, roundStarts() || lastReadAt === 0);
        delay = minDelay;
      } catch (error) {
        onError(error);
        // The retry reads the outbox (whatever part of the round failed).
        wakeAny = true;
        await sleep(delay, stopping.signal, lease.lost);
        delay = Math.min(delay * 2, maxDelay);
        continue;
      }
      // A full batch means there is probably more: go again at once.
      if (handled < batchSize) await waitForWork(pollIntervalMs, lease.lost);
    }
    // Stopping while still leading: mark the last window before letting go.
    if (!lease.lost.aborted) {
      await markPublished().catch(onError);
      await markUnmarked().catch(onError);
    }
    // Whoever leads next reads what this relay did not publish or mark.
    handed = [];
    unmarked = [];
    lastReadAt = 0;
  }

  async function run(): Promise<void> {
    let unlisten: Unlisten | undefined;
    try {
      if (options.listen !== false)
        unlisten = await database.listen(outboxChannel(schema), notified);
    } catch (error) {
      // Polling still works; say why latency is higher.
      onError(error);
    }
    let delay = minDelay;
    try {
      while (!stopping.signal.aborted) {
        let lease: Lease;
        try {
          lease = await database.acquireLock(`trellis.outbox-relay.${schema}`, {
            signal: stopping.signal,
          });
          delay = minDelay;
        } catch (error) {
          if (stopping.signal.aborted) break;
          onError(error);
          await sleep(delay, stopping.signal);
          delay = Math.min(delay * 2, maxDelay);
          continue;
        }
        active = true;
        try {
          await lead(lease);
        } finally {
          active = false;
          await lease.release().catch(onError);
        }
      }
    } finally {
      await unlisten?.().catch(onError);
    }
  }

  return {
    start() {
      if (running !== undefined || stopping.signal.aborted) return;
      running = run().catch(onError);
    },
    kick,
    get active() {
      return active;
    },
    async stop() {
      stopping.abort(new Error("relay stopped"));
      clearTimeout(graceTimer);
      wake?.();
      await running;
    },
  };
}
