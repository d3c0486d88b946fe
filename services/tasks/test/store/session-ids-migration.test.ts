// Migration 2027_05_01_000_session_ids_per_workspace on a database that
// already holds sessions: transcript rows and agent states take their
// session's workspace, and a second workspace can then use a taken id.
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tasksMigrations } from "../../src/store/migrations/index.js";

const NEW = "2027_05_01_000_session_ids_per_workspace";

let database: Database;
beforeAll(async () => {
  database = await createDatabase({ kind: "pglite" });
});
afterAll(async () => {
  await database.close();
});

describe(`migration ${NEW}`, () => {
  it("backfills workspace ids and makes session ids unique per workspace", async () => {
    const before = Object.fromEntries(Object.entries(tasksMigrations).filter(([n]) => n < NEW));
    await migrate(database, { schema: "tasks", migrations: before });
    const db = database.kysely;
    await sql`
      insert into tasks.sessions (id, workspace_id, state, root_session_id)
      values ('ses_taken', 'ws_a', 1, 'ses_taken'), ('ses_other', 'ws_b', 1, 'ses_other')`.execute(
      db,
    );
    await sql`
      insert into tasks.messages (id, session_id, position, turn, role, body)
      values ('m1', 'ses_taken', 0, 1, 2, ''::bytea), ('m2', 'ses_other', 0, 1, 2, ''::bytea)`.execute(
      db,
    );
    await sql`
      insert into tasks.session_states (session_id, state, task_id)
      values ('ses_taken', '{}'::jsonb, 't1')`.execute(db);

    await migrate(database, { schema: "tasks", migrations: tasksMigrations });

    const messages = await sql<{ id: string; workspace_id: string }>`
      select id, workspace_id from tasks.messages order by id`.execute(db);
    expect(messages.rows).toEqual([
      { id: "m1", workspace_id: "ws_a" },
      { id: "m2", workspace_id: "ws_b" },
    ]);
    const states = await sql<{ workspace_id: string }>`
      select workspace_id from tasks.session_states`.execute(db);
    expect(states.rows).toEqual([{ workspace_id: "ws_a" }]);
    // Another workspace takes the id; the same workspace still cannot.
    await sql`
      insert into tasks.sessions (id, workspace_id, state, root_session_id)
      values ('ses_taken', 'ws_b', 1, 'ses_taken')`.execute(db);
    await expect(
      sql`
        insert into tasks.sessions (id, workspace_id, state, root_session_id)
        values ('ses_taken', 'ws_a', 1, 'ses_taken')`.execute(db),
    ).rejects.toThrow(/sessions_pkey/);
    await sql`
      insert into tasks.messages (id, workspace_id, session_id, position, turn, role, body)
      values ('m3', 'ws_b', 'ses_taken', 0, 1, 2, ''::bytea)`.execute(db);
  });
});
