import { fromBinary } from "@bufbuild/protobuf";
import { EventSchema } from "@trellis/contracts/core";
import {
  type ArchiveRead,
  type EventArchive,
  type EventFilter,
  type LoggedEvent,
  NO_SESSION,
} from "@trellis/eventlog";
import type { ExpressionBuilder } from "kysely";
import type { Database } from "../database.js";
import { outboxTables } from "./outbox.js";
import type { OutboxDatabase } from "./outbox-schema.js";

type OutboxExpressions = ExpressionBuilder<OutboxDatabase, "outbox">;

/** The SQL twin of the event log's `eventMatches` over the outbox's address columns. */
function matching(eb: OutboxExpressions, filter: EventFilter | { workspaceId: "*" }) {
  if (filter.workspaceId === "*") return eb.lit(true);
  const f = filter as EventFilter;
  const conditions = [eb("workspace_id", "=", f.workspaceId)];
  // "" and NO_SESSION both mean "outside any session", stored as "".
  if (f.sessionId !== undefined) {
    conditions.push(eb("session_id", "=", f.sessionId === NO_SESSION ? "" : f.sessionId));
  }
  if (f.resource) {
    conditions.push(eb("resource_object", "=", f.resource.object));
    conditions.push(eb("resource_id", "=", f.resource.id));
  }
  return eb.and(conditions);
}

function logged(row: { position: bigint; body: Uint8Array }): LoggedEvent {
  return { position: row.position, event: fromBinary(EventSchema, row.body) };
}

/**
 * The outbox of `schema` as the {@link EventArchive} of an in-process event
 * log whose positions are the outbox's (embedded mode: the relay appends
 * with `appendLogged`). Reads filter on the address columns in SQL; the
 * outbox is the authority, so rows are returned as stored.
 *
 * @example
 *   const archive = createOutboxArchive(database, "trellis");
 *   const log = await InProcessEventLog.open({
 *     archive,
 *     history: await readOutboxTail(database, "trellis", DEFAULT_EVENT_WINDOW),
 *   });
 */
export function createOutboxArchive<DB>(database: Database<DB>, schema: string): EventArchive {
  const db = outboxTables(database.kysely, schema);
  return {
    async readAfter(read: ArchiveRead): Promise<LoggedEvent[]> {
      const rows = await db
        .selectFrom("outbox")
        .select(["position", "body"])
        .where("position", ">", read.afterPosition)
        .where("position", "<=", read.throughPosition)
        .where((eb) => matching(eb, read.filter))
        .orderBy("position")
        .limit(read.limit)
        .execute();
      return rows.map(logged);
    },
    async last(filter: EventFilter, throughPosition: bigint): Promise<LoggedEvent | undefined> {
      const row = await db
        .selectFrom("outbox")
        .select(["position", "body"])
        .where("position", "<=", throughPosition)
        .where((eb) => matching(eb, filter))
        .orderBy("position", "desc")
        .limit(1)
        .executeTakeFirst();
      return row && logged(row);
    },
    async find(eventId: string): Promise<LoggedEvent | undefined> {
      const row = await db
        .selectFrom("outbox")
        .select(["position", "body"])
        .where("id", "=", eventId)
        .executeTakeFirst();
      return row && logged(row);
    },
  };
}

/**
 * The newest `count` rows of the outbox of `schema`, in position order,
 * published or not: what an in-process log over {@link createOutboxArchive}
 * loads at start (older rows stay in the archive).
 */
export async function readOutboxTail<DB>(
  database: Database<DB>,
  schema: string,
  count: number,
): Promise<LoggedEvent[]> {
  const rows = await outboxTables(database.kysely, schema)
    .selectFrom("outbox")
    .select(["position", "body"])
    .orderBy("position", "desc")
    .limit(count)
    .execute();
  return rows.reverse().map(logged);
}
