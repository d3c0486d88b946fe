/**
 * The receipts service's tables and the database-level guards of the chain:
 *
 * - `receipts_subject_key`: one receipt per (subject, kind), so a redelivered
 *   terminal event never issues a second receipt;
 * - `receipts_chain_position_key` / `receipts_chain_link_key`: one receipt
 *   per chain position and per predecessor in a workspace (no fork);
 * - `receipts_hash_key`: hashes are unique.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const createReceipts: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("receipts")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("chain_index", "bigint", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("subject_object", "text", (c) => c.notNull())
      .addColumn("subject_id", "text", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("receipt_hash", "text", (c) => c.notNull())
      .addColumn("previous_receipt_hash", "text")
      .addColumn("key_id", "text", (c) => c.notNull())
      .addColumn("final_state", "text", (c) => c.notNull())
      .addColumn("issued_at", "timestamptz", (c) => c.notNull())
      .addColumn("document", "text", (c) => c.notNull())
      .addUniqueConstraint("receipts_subject_key", ["subject_object", "subject_id", "kind"])
      .addUniqueConstraint("receipts_chain_position_key", ["workspace_id", "chain_index"])
      .addUniqueConstraint("receipts_chain_link_key", ["workspace_id", "previous_receipt_hash"])
      .addUniqueConstraint("receipts_hash_key", ["receipt_hash"])
      .execute();
    await db.schema
      .createIndex("receipts_task_idx")
      .on("receipts")
      .columns(["task_id", "chain_index"])
      .execute();

    await db.schema
      .createTable("chain_heads")
      .addColumn("workspace_id", "text", (c) => c.primaryKey())
      .addColumn("length", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("last_receipt_id", "text")
      .addColumn("last_receipt_hash", "text")
      .execute();

    await db.schema
      .createTable("task_events")
      .addColumn("event_id", "text", (c) => c.primaryKey())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("position", "bigint", (c) => c.notNull())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("event_hash", "text", (c) => c.notNull())
      .addColumn("facts", "jsonb", (c) => c.notNull())
      .addColumn("recorded_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createIndex("task_events_task_idx")
      .on("task_events")
      .columns(["task_id", "position"])
      .execute();

    await db.schema
      .createTable("signing_keys")
      .addColumn("key_id", "text", (c) => c.primaryKey())
      .addColumn("algorithm", "text", (c) => c.notNull())
      .addColumn("public_key_pem", "text", (c) => c.notNull())
      .addColumn("private_key_pem", "text")
      .addColumn("source", "text", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
  },
};
