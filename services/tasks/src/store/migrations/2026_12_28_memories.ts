/**
 * Memory (Harn v1 "Memory"): durable knowledge kept apart from transcripts.
 * `workspace_id` is null for tenant scope. `idempotency_scope` is the
 * workspace id ('' for tenant scope) so an idempotency key is unique per
 * workspace; `request_hash` tells a retry from a different request.
 * JSON columns are text (content, provenance, metadata).
 */

import type { Migration } from "kysely";
import { type Kysely, sql } from "kysely";

export const memories: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("memories")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text")
      .addColumn("scope", "text", (c) => c.notNull())
      .addColumn("owner_id", "text", (c) => c.notNull())
      .addColumn("content", "text", (c) => c.notNull())
      .addColumn("provenance", "text", (c) => c.notNull())
      .addColumn("metadata", "text", (c) => c.notNull())
      .addColumn("idempotency_scope", "text", (c) => c.notNull())
      .addColumn("idempotency_key", "text")
      .addColumn("request_hash", "text")
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createIndex("memories_owner_idx")
      .on("memories")
      .columns(["workspace_id", "scope", "owner_id", "id"])
      .execute();
    await db.schema
      .createIndex("memories_idempotency_idx")
      .on("memories")
      .columns(["idempotency_scope", "idempotency_key"])
      .unique()
      .where(sql.ref("idempotency_key"), "is not", null)
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable("memories").execute();
  },
};
