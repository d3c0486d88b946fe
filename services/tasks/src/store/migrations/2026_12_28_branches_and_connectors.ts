/**
 * Branches and connectors (Harn Extended resources).
 *
 * - `branches`: one row per branch; a session branch names the session it
 *   was made from and its fork (`session_id`), with the fork point resolved.
 * - `connectors`: sources of provider activity, with what a delivery becomes.
 * - `connector_deliveries`: one row per provider delivery id of a connector.
 *   The unique `(connector_id, delivery_id)` is the dedupe: concurrent
 *   deliveries of one id race on the insert and only one wins; `input` keeps
 *   the normalized message so a redelivery finishes the first one's work
 *   from what was stored, not from what it was sent.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const branchesAndConnectors: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("branches")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("kind", "integer", (c) => c.notNull())
      .addColumn("base_ref", "text", (c) => c.notNull())
      .addColumn("parent_branch_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("parent_session_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("forked_from_event_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("forked_from_message_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("forked_message_count", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("created_by", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("merged_into", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createIndex("branches_by_parent_session")
      .on("branches")
      .columns(["parent_session_id", "seq"])
      .execute();

    await db.schema
      .createTable("connectors")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("provider", "text", (c) => c.notNull())
      .addColumn("status", "integer", (c) => c.notNull())
      .addColumn("status_reason", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("event_kinds", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
      .addColumn("delivery_mode", "integer", (c) => c.notNull())
      .addColumn("target_persona_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("target_session_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createIndex("connectors_by_workspace")
      .on("connectors")
      .columns(["workspace_id", "seq"])
      .execute();

    await db.schema
      .createTable("connector_deliveries")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("connector_id", "text", (c) => c.notNull())
      .addColumn("delivery_id", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("event_kind", "text", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("input", "bytea", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("session_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("message_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("failure", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addUniqueConstraint("connector_deliveries_once", ["connector_id", "delivery_id"])
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable("connector_deliveries").execute();
    await db.schema.dropTable("connectors").execute();
    await db.schema.dropTable("branches").execute();
  },
};
