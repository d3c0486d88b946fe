import { type Kysely, type Migration, type Selectable, sql } from "kysely";
import { assertSchemaName } from "../schema-name.js";
import { appendFunctionMigration } from "./journal-append-sql.js";

/**
 * One journal entry: table `<schema>.journal`. Written only by a journal
 * (`createJournal`), which keeps these rules:
 *
 * | column | rule |
 * |---|---|
 * | `position` | 1, 2, 3, … without gaps, in commit order: a reader that has seen `p` has seen every entry below `p` |
 * | `stream` | the ordering unit (a session); one stream's entries follow its appends' order |
 * | `kind` | what the entry is (e.g. an event kind), for readers that filter |
 * | `body` | the entry itself, opaque to storage (e.g. a protobuf `Event`) |
 * | `idempotency_key` | set on the first entry of an append that had one; unique |
 * | `append_size` | on that same row: how many entries the append wrote (they follow it) |
 * | `created_at` | the database clock at the write |
 */
export interface JournalTable {
  position: bigint;
  stream: string;
  kind: string;
  body: Uint8Array;
  idempotency_key: string | null;
  append_size: number | null;
  created_at: Date;
}

/** A row of {@link JournalTable} as read. */
export type JournalRow = Selectable<JournalTable>;

/**
 * How far each projector has applied the journal: table
 * `<schema>.journal_projection`, one row per projector name, written in the
 * same transaction as the projection itself.
 */
export interface JournalProjectionTable {
  name: string;
  position: bigint;
  updated_at: Date;
}

/**
 * Entries a projector could not apply (a deterministic refusal of the
 * database, e.g. text it cannot hold): table `<schema>.journal_dead_letter`,
 * one row per projector and position, written in the transaction that moves
 * the projector past the entry (see `createProjector`, "poison entries").
 */
export interface JournalDeadLetterTable {
  projector: string;
  position: bigint;
  stream: string;
  kind: string;
  /** The database's SQLSTATE (e.g. `22021`), or `refused`. */
  reason: string;
  message: string;
  created_at: Date;
}

/** The journal's tables, as they appear inside a service's schema. */
export interface JournalDatabase {
  journal: JournalTable;
  journal_projection: JournalProjectionTable;
  journal_dead_letter: JournalDeadLetterTable;
}

/** The NOTIFY channel a schema's journal signals on after a batch commits (when asked to). */
export function journalChannel(schema: string): string {
  return `trellis_journal_${schema}`;
}

/**
 * The migrations that create a service's journal; merge them into the
 * service's own before `migrate`, as with `outboxMigrations`.
 *
 * @example
 *   await migrate(database, {
 *     schema: "tasks",
 *     migrations: { ...outboxMigrations("tasks"), ...journalMigrations("tasks"), ...own },
 *   });
 */
export function journalMigrations(schema: string): Record<string, Migration> {
  assertSchemaName(schema);
  return {
    "2026_11_28_000_create_journal": {
      async up(db: Kysely<unknown>) {
        const s = db.schema.withSchema(schema);
        await s
          .createTable("journal")
          .addColumn("position", "bigint", (c) => c.primaryKey().check(sql`position > 0`))
          .addColumn("stream", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("body", "bytea", (c) => c.notNull())
          .addColumn("idempotency_key", "text")
          .addColumn("append_size", "integer")
          .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
          .execute();
        // Rebuilding one stream (a session taken over) reads it by position.
        await s
          .createIndex("journal_stream_idx")
          .on("journal")
          .columns(["stream", "position"])
          .execute();
        // Partial: appends without a key pay nothing for it.
        await s
          .createIndex("journal_idempotency_key")
          .unique()
          .on("journal")
          .column("idempotency_key")
          .where(sql.ref("idempotency_key"), "is not", null)
          .execute();
        await s
          .createTable("journal_projection")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("position", "bigint", (c) => c.notNull())
          .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
          .execute();
      },
      async down(db: Kysely<unknown>) {
        await db.schema.withSchema(schema).dropTable("journal_projection").execute();
        await db.schema.withSchema(schema).dropTable("journal").execute();
      },
    },
    "2027_04_03_000_create_journal_dead_letter": journalDeadLetterMigration(schema),
    "2027_06_04_000_create_journal_append": journalAppendFunctionMigration(schema),
  };
}

/**
 * The migration creating `journal_dead_letter` alone (idempotent: a service
 * that ran `journalMigrations` inside one of its own migrations before the
 * table existed runs this one as a later migration of its own).
 */
export function journalDeadLetterMigration(schema: string): Migration {
  assertSchemaName(schema);
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .withSchema(schema)
        .createTable("journal_dead_letter")
        .ifNotExists()
        .addColumn("projector", "text", (c) => c.notNull())
        .addColumn("position", "bigint", (c) => c.notNull())
        .addColumn("stream", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("reason", "text", (c) => c.notNull())
        .addColumn("message", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint("journal_dead_letter_pkey", ["projector", "position"])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.withSchema(schema).dropTable("journal_dead_letter").ifExists().execute();
    },
  };
}

/** The journal tables of `schema` seen through `kysely` (storage's tables, not the caller's `DB`). */
export function journalTables<DB>(kysely: Kysely<DB>, schema: string): Kysely<JournalDatabase> {
  assertSchemaName(schema);
  return (kysely as unknown as Kysely<JournalDatabase>).withSchema(schema);
}

/**
 * The migration creating `<schema>.journal_append`, the one-statement batch
 * of `createJournal` on PostgreSQL (journal-append-sql.ts). Idempotent
 * (`create or replace`): a service that ran `journalMigrations` inside one
 * of its own migrations runs this one as a later migration of its own. A
 * journal in a schema without it falls back to a transaction per batch.
 */
export function journalAppendFunctionMigration(schema: string): Migration {
  return appendFunctionMigration(schema, journalChannel(schema));
}
