/**
 * Helpers shared by the storage package's contract suites: the backend a
 * suite opens (storage, journal, journal unit, lease and publisher
 * contracts) and what the storage contract's parts (contract/*.contract.ts)
 * build their tests with.
 */
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import type { EventLog } from "@trellis/eventlog";
import { eventually, uniqueName } from "@trellis/testkit";
import { type Migration, sql, type Transaction } from "kysely";
import { afterAll, beforeAll, expect } from "vitest";
import type { Database } from "../database.js";
import { migrate } from "../migrate.js";
import { appendToOutbox, type OutboxEntry, readOutbox } from "../outbox/outbox.js";
import type { OutboxFold } from "../outbox/outbox-writer.js";
import type { StorageContractTarget } from "./suite.js";

/** One backend opened for a contract suite; its handles exist once the suite's beforeAll ran. */
export interface ContractBackend {
  readonly target: StorageContractTarget;
  /** The suite's first handle on the target. */
  readonly database: Database;
  /** A second handle on the same database (another "replica"); opened with `other: true`. */
  readonly other: Database;
  /** A fresh schema named `prefix_…`, with `migrations` of it run on `database`. */
  freshSchema(
    prefix: string,
    migrations: (schema: string) => Record<string, Migration>,
  ): Promise<string>;
}

/** Options of {@link openContractBackend}. */
export interface ContractBackendOptions {
  /** Open a second handle (`other`) too. */
  other?: boolean;
  /** Closes what the tests started, after them and before the target is torn down. */
  release?: () => Promise<unknown>;
  /** The beforeAll's timeout (opening PGlite can take most of a minute on a loaded box). */
  timeoutMs?: number;
}

/**
 * Registers, in the enclosing describe, the opening of `factory`'s target
 * and its handles before the tests, and after them `release` then the
 * target's teardown.
 */
export function openContractBackend(
  factory: () => Promise<StorageContractTarget>,
  options: ContractBackendOptions = {},
): ContractBackend {
  let target: StorageContractTarget | undefined;
  let database: Database | undefined;
  let other: Database | undefined;
  beforeAll(async () => {
    target = await factory();
    database = await target.open();
    if (options.other) other = await target.open();
  }, options.timeoutMs);
  afterAll(async () => {
    await options.release?.();
    await target?.teardown();
  });
  const opened = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`contract backend: ${what} is not open`);
    return value;
  };
  const backend: ContractBackend = {
    get target() {
      return opened(target, "the target");
    },
    get database() {
      return opened(database, "the database");
    },
    get other() {
      return opened(other, "the other handle");
    },
    async freshSchema(prefix, migrations) {
      const schema = uniqueName(prefix);
      await migrate(backend.database, { schema, migrations: migrations(schema) });
      return schema;
    },
  };
  return backend;
}

/**
 * Inserts a unit's folded rows as a caller's own statement would (a CTE
 * `mine`, positions selected beside it) and settles the fold with them.
 */
export async function insertFolded(trx: Transaction<unknown>, fold: OutboxFold): Promise<void> {
  const values = fold.rows.map(
    (r) =>
      sql`(${r.id}, ${r.workspace_id}, ${r.session_id}, ${r.resource_object}, ${r.resource_id},
        ${r.sequence}, ${r.kind}, ${r.body}, ${r.created_at})`,
  );
  const result = await sql<{ positions: unknown }>`
    with mine as (
      insert into ${sql.raw(fold.table)} (id, workspace_id, session_id, resource_object,
        resource_id, sequence, kind, body, created_at)
      values ${sql.join(values)} returning ${sql.raw(fold.returning)})
    select ${sql.raw(fold.positions("mine"))} as positions`.execute(trx);
  fold.settle(result.rows[0]?.positions);
}

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

/**
 * `transactions` concurrent transactions of 5 events each, spread over
 * `resources` tasks of `workspaceId`, each kicking `relay` once committed.
 */
export async function writeConcurrently(
  database: Database,
  schema: string,
  relay: { kick(): void },
  workspaceId: string,
  transactions: number,
  resources: number,
): Promise<void> {
  await Promise.all(
    Array.from({ length: transactions }, (_, tx) =>
      inTransaction(database, (trx) =>
        appendToOutbox(
          trx,
          schema,
          Array.from({ length: 5 }, (_, i) => event(workspaceId, `task_${(tx + i) % resources}`)),
        ),
      ).then(() => relay.kick()),
    ),
  );
}

/** The log's events of `workspaceId`, once it holds `count` or more. */
export function publishedEvents(
  log: EventLog,
  workspaceId: string,
  count: number,
): Promise<Event[]> {
  return eventually(
    async () => {
      const events = await readLog(log, workspaceId);
      return events.length >= count ? events : undefined;
    },
    { what: `${count} published events` },
  );
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
