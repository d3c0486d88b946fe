/**
 * Per-request requirements (issue 23): a task may narrow its agent's routing
 * requirements (`SubmitTaskRequest.requirements`, chat `Send`). They are
 * stored with the task (trellis.adapters.v1.ExecutionRequirements, binary;
 * null: the agent's alone), so a retried or recovered turn honours them.
 */
import { type Kysely, type Migration, sql } from "kysely";

export const taskRequirements: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`alter table tasks add column requirements bytea`.execute(db);
  },
};
