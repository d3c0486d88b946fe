/**
 * Agent ids unique per workspace (issue 22): the key of `agents` becomes
 * (workspace_id, id), so another workspace can neither take an id nor learn
 * that it is used. Every lookup names the workspace (`Directory.loadAgent`);
 * lookups by id alone (admin and internal callers) use `agents_id_idx`.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const agentIdsPerWorkspace: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`alter table agents drop constraint agents_pkey`.execute(db);
    await sql`alter table agents add constraint agents_pkey primary key (workspace_id, id)`.execute(
      db,
    );
    await sql`create index agents_id_idx on agents (id)`.execute(db);
  },
};
