/**
 * The quota counters table (schema `gateway`): one row per bucket, a fixed
 * window counter shared by every gateway replica (PostgreSQL in distributed
 * mode, the same table in PGlite embedded).
 */
import type { Kysely, Migration } from "kysely";

/**
 * One counter: `bucket` names what is counted and for whom (e.g.
 * `rate:actor:<id>`, `quota:tasks_per_day:workspace:<id>`); `count` is what
 * the window that started at `window_start` has used; `expires_at` is when the
 * row is worth nothing any more (the window's end).
 */
export interface QuotaCounterTable {
  bucket: string;
  window_start: Date;
  count: number;
  expires_at: Date;
}

export interface QuotaDatabase {
  quota_counters: QuotaCounterTable;
}

export const quotaMigrations: Record<string, Migration> = {
  "2026_11_26_001_create_quota_counters": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("quota_counters")
        .addColumn("bucket", "text", (c) => c.primaryKey())
        .addColumn("window_start", "timestamptz", (c) => c.notNull())
        .addColumn("count", "bigint", (c) => c.notNull())
        .addColumn("expires_at", "timestamptz", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("quota_counters_expires_idx")
        .on("quota_counters")
        .column("expires_at")
        .execute();
    },
  },
};
