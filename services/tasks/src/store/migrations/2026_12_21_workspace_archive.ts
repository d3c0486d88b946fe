/**
 * Archived workspaces: `archived_at` is set once a workspace is archived; it
 * keeps everything it holds, readable, but takes no new sessions.
 */
import type { Kysely, Migration } from "kysely";

export const workspaceArchive: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable("workspaces").addColumn("archived_at", "timestamptz").execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.alterTable("workspaces").dropColumn("archived_at").execute();
  },
};
