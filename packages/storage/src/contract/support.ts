/** Helpers shared by the storage contract's parts (contract/*.contract.ts). */
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import type { EventLog } from "@trellis/eventlog";
import type { Transaction } from "kysely";
import { expect } from "vitest";
import type { Database } from "../database.js";
import { type OutboxEntry, readOutbox } from "../outbox/outbox.js";

/** A new event on `task` resource `resourceId`. */
export function event(
  workspaceId: string,
  resourceId: string,
  init: Partial<Pick<Event, "id" | "sequence" | "previousEventId">> = {},
): Event {
  return create(EventSchema, {
    kind: "test.happened",
    workspaceId,
    sessionId: "ses_1",
    resource: create(ResourceRefSchema, { object: "task", id: resourceId }),
    ...init,
  });
}

export function inTransaction<T>(
  database: Database,
  fn: (trx: Transaction<unknown>) => Promise<T>,
) {
  return database.kysely.transaction().execute(fn);
}

export async function readAll(database: Database, schema: string): Promise<OutboxEntry[]> {
  return readOutbox(database, schema, { limit: 100_000 });
}

export async function unpublished(database: Database, schema: string): Promise<number> {
  return (await readOutbox(database, schema, { limit: 100_000, unpublishedOnly: true })).length;
}

/** Everything the log holds for a workspace, in log order. */
export async function readLog(log: EventLog, workspaceId: string): Promise<Event[]> {
  const out: Event[] = [];
  let after: bigint | undefined;
  for (;;) {
    const page = await log.read({
      filter: { workspaceId },
      limit: 1000,
      ...(after === undefined ? {} : { after: { afterPosition: after } }),
    });
    if (page.length === 0) return out;
    out.push(...page.map((p) => p.event));
    after = page[page.length - 1]?.position;
  }
}

/** Each event's previous_event_id is the event before it. */
export function expectChained(events: Event[]): void {
  events.forEach((e, i) => {
    expect(e.previousEventId).toBe(i === 0 ? "" : events[i - 1]?.id);
  });
}

/** Per resource: sequences 1, 2, 3, … in the given order, chained by previous_event_id. */
export function expectPerResourceOrder(events: Event[]): void {
  const byResource = new Map<string, Event[]>();
  for (const e of events) {
    const key = `${e.resource?.object}/${e.resource?.id}`;
    byResource.set(key, [...(byResource.get(key) ?? []), e]);
  }
  for (const group of byResource.values()) {
    expect(group.map((e) => e.sequence)).toEqual(group.map((_, i) => BigInt(i + 1)));
    expectChained(group);
  }
}
