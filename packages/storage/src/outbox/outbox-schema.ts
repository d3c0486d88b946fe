import {
  type ColumnType,
  type Generated,
  type Insertable,
  type Kysely,
  type Migration,
  type Selectable,
  sql,
  type Updateable,
} from "kysely";
import { assertSchemaName } from "../schema-name.js";

/**
 * One event waiting in (or already relayed from) a service's outbox: table
 * `<schema>.outbox`. The row is written in the same transaction as the state
 * change that caused the event, so the event exists iff the change committed.
 *
 * - `position` — bigserial, the outbox's global order. It is taken at insert
 *   time, not at commit time, so a lower position can become visible after a
 *   higher one (two transactions committing in the other order). It never
 *   breaks per-resource order: writers of one resource are serialised by its
 *   `outbox_sequence` row, so a resource's positions follow its sequence.
 *   Readers must not use "highest position seen" as a watermark across
 *   resources while writers are active.
 * - `sequence` — per resource (`resource_object`, `resource_id`): 1, 2, 3, …
 *   without gaps (unique, checked by the database).
 * - `body` — the complete `trellis.core.v1.Event`, protobuf binary; the other
 *   columns copy some of its fields for querying.
 * - `published_at` — null until the relay has handed the event to the event
 *   log; published rows may be pruned (`pruneOutbox`). Embedded mode's relay
 *   never sets it: there the outbox is the log, rebuilt at every start.
 */
export interface OutboxTable {
  position: Generated<bigint>;
  id: string;
  workspace_id: string;
  session_id: string;
  resource_object: string;
  resource_id: string;
  sequence: bigint;
  kind: string;
  body: Uint8Array;
  created_at: Date;
  published_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** A row of {@link OutboxTable} as read. */
export type OutboxRow = Selectable<OutboxTable>;
/** A row of {@link OutboxTable} as inserted. */
export type NewOutboxRow = Insertable<OutboxTable>;
/** An update of {@link OutboxTable}. */
export type OutboxRowUpdate = Updateable<OutboxTable>;

/**
 * The per-resource sequence counter: table `<schema>.outbox_sequence`, one
 * row per resource that has events. Appending to a resource upserts its row
 * (`insert … on conflict do update … returning`), which both hands out the
 * next sequences and row-locks the resource until the transaction ends — that
 * lock is what keeps concurrent writers gap-free and in order. Rows are never
 * pruned: they remember the resource's last sequence and event id.
 *
 * `replaced_event_id` is the `last_event_id` the row had before its latest
 * update: `returning` only sees the new row on Postgres < 18, and the first
 * event of a batch needs the previous tail as its `previous_event_id`.
 */
export interface OutboxSequenceTable {
  resource_object: string;
  resource_id: string;
  last_sequence: bigint;
  last_event_id: string;
  replaced_event_id: string;
}

/** A row of {@link OutboxSequenceTable} as read. */
export type OutboxSequenceRow = Selectable<OutboxSequenceTable>;

/** The outbox's tables, as they appear inside a service's schema. */
export interface OutboxDatabase {
  outbox: OutboxTable;
  outbox_sequence: OutboxSequenceTable;
}

/** The NOTIFY channel a schema's outbox signals on after each committed insert. */
export function outboxChannel(schema: string): string {
  return `trellis_outbox_${schema}`;
}

/**
 * The migrations that create a service's outbox. Merge them into the
 * service's own before calling `migrate`:
 *
 * @example
 *   await migrate(database, {
 *     schema: "tasks",
 *     migrations: { ...outboxMigrations("tasks"), "2026_11_22_create_tasks": createTasks },
 *   });
 *
 * Named `2026_11_22_000_…` so they sort before a service's first migration of
 * the same day.
 */
export function outboxMigrations(schema: string): Record<string, Migration> {
  assertSchemaName(schema);
  return {
    "2026_11_22_000_create_outbox": {
      async up(db: Kysely<unknown>) {
        const s = db.schema.withSchema(schema);
        await s
          .createTable("outbox")
          .addColumn("position", "bigserial", (c) => c.primaryKey())
          .addColumn("id", "text", (c) => c.notNull().unique())
          .addColumn("workspace_id", "text", (c) => c.notNull())
          .addColumn("session_id", "text", (c) => c.notNull())
          .addColumn("resource_object", "text", (c) => c.notNull())
          .addColumn("resource_id", "text", (c) => c.notNull())
          .addColumn("sequence", "bigint", (c) => c.notNull().check(sql`sequence > 0`))
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("body", "bytea", (c) => c.notNull())
          .addColumn("created_at", "timestamptz", (c) => c.notNull())
          .addColumn("published_at", "timestamptz")
          .addUniqueConstraint("outbox_resource_sequence_key", [
            "resource_object",
            "resource_id",
            "sequence",
          ])
          .execute();
        // The relay's query: unpublished rows in position order. Partial, so
        // it stays as small as the backlog.
        await s
          .createIndex("outbox_unpublished_idx")
          .on("outbox")
          .column("position")
          .where(sql.ref("published_at"), "is", null)
          .execute();
        // Retention: published rows by age.
        await s
          .createIndex("outbox_published_at_idx")
          .on("outbox")
          .column("published_at")
          .where(sql.ref("published_at"), "is not", null)
          .execute();
        await s
          .createTable("outbox_sequence")
          .addColumn("resource_object", "text", (c) => c.notNull())
          .addColumn("resource_id", "text", (c) => c.notNull())
          .addColumn("last_sequence", "bigint", (c) => c.notNull())
          .addColumn("last_event_id", "text", (c) => c.notNull())
          .addColumn("replaced_event_id", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("outbox_sequence_pkey", ["resource_object", "resource_id"])
          .execute();
        // Wake relays the moment a transaction that wrote events commits
        // (NOTIFY is delivered on commit, and only then). Once per statement,
        // and Postgres folds identical notifications of one transaction.
        const fn = sql.id(schema, "outbox_notify");
        await sql`
          create function ${fn}() returns trigger language plpgsql as $$
          begin
            perform pg_notify(${sql.lit(outboxChannel(schema))}, '');
            return null;
          end $$`.execute(db);
        await sql`
          create trigger outbox_notify after insert on ${sql.id(schema, "outbox")}
          for each statement execute function ${fn}()`.execute(db);
      },
      async down(db: Kysely<unknown>) {
        await db.schema.withSchema(schema).dropTable("outbox_sequence").execute();
        await db.schema.withSchema(schema).dropTable("outbox").execute();
        await sql`drop function ${sql.id(schema, "outbox_notify")}()`.execute(db);
      },
    },
    // The NOTIFY names the highest position its statement inserted, so a
    // relay that already published that row (it was kicked by the writer in
    // its own process) skips the round the notification would start. The
    // positions come from the statement's transition table: no sequence
    // state, correct for any insert.
    "2027_02_03_000_outbox_notify_position": {
      async up(db: Kysely<unknown>) {
        const fn = sql.id(schema, "outbox_notify");
        const table = sql.id(schema, "outbox");
        await sql`
          create or replace function ${fn}() returns trigger language plpgsql as $$
          begin
            perform pg_notify(
              ${sql.lit(outboxChannel(schema))},
              coalesce((select max(position) from inserted)::text, ''));
            return null;
          end $$`.execute(db);
        await sql`drop trigger outbox_notify on ${table}`.execute(db);
        await sql`
          create trigger outbox_notify after insert on ${table}
          referencing new table as inserted
          for each statement execute function ${fn}()`.execute(db);
      },
      async down(db: Kysely<unknown>) {
        const fn = sql.id(schema, "outbox_notify");
        const table = sql.id(schema, "outbox");
        await sql`drop trigger outbox_notify on ${table}`.execute(db);
        await sql`
          create or replace function ${fn}() returns trigger language plpgsql as $$
          begin
            perform pg_notify(${sql.lit(outboxChannel(schema))}, '');
            return null;
          end $$`.execute(db);
        await sql`
          create trigger outbox_notify after insert on ${table}
          for each statement execute function ${fn}()`.execute(db);
      },
    },
  };
}
