/**
 * Session ids unique per workspace (issue 22, finding 4): the key of
 * `sessions` becomes (workspace_id, id), so another workspace can neither
 * take a client-chosen id nor learn that it is used. The rows found by
 * session id gain the workspace too:
 * - `messages`: a `workspace_id` column (backfilled from `sessions`), key
 *   (workspace_id, session_id, position);
 * - `session_states`: the same, key (workspace_id, session_id);
 * - `tasks`: the one-running-task-per-session guard and the mailbox and
 *   session indexes lead with the workspace.
 * Lookups by id alone (admin and internal callers without a workspace) use
 * `sessions_id_idx` and pick the default workspace's session, else the
 * oldest (`WriteUnit.lockSession`, `Sessions.getSession`).
 */
import { type Kysely, type Migration, sql } from "kysely";

export const sessionIdsPerWorkspace: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`alter table sessions drop constraint sessions_pkey`.execute(db);
    await sql`alter table sessions add constraint sessions_pkey primary key (workspace_id, id)`.execute(
      db,
    );
    await sql`create index sessions_id_idx on sessions (id, seq)`.execute(db);

    await sql`alter table messages add column workspace_id text not null default ''`.execute(db);
    await sql`
      update messages m set workspace_id = s.workspace_id
      from sessions s where s.id = m.session_id`.execute(db);
    await sql`alter table messages alter column workspace_id drop default`.execute(db);
    await sql`alter table messages drop constraint messages_pkey`.execute(db);
    await sql`alter table messages add constraint messages_pkey primary key (workspace_id, session_id, position)`.execute(
      db,
    );
    await sql`drop index messages_turn_start_idx`.execute(db);
    await sql`create index messages_turn_start_idx on messages (workspace_id, session_id, position) where role in (2, 5)`.execute(
      db,
    );

    await sql`alter table session_states add column workspace_id text not null default ''`.execute(
      db,
    );
    await sql`
      update session_states st set workspace_id = s.workspace_id
      from sessions s where s.id = st.session_id`.execute(db);
    await sql`alter table session_states alter column workspace_id drop default`.execute(db);
    await sql`alter table session_states drop constraint session_states_pkey`.execute(db);
    await sql`alter table session_states add constraint session_states_pkey primary key (workspace_id, session_id)`.execute(
      db,
    );

    await sql`drop index tasks_one_running_per_session`.execute(db);
    await sql`create unique index tasks_one_running_per_session on tasks (workspace_id, session_id) where run_state = 'running'`.execute(
      db,
    );
    await sql`drop index tasks_mailbox_idx`.execute(db);
    await sql`create index tasks_mailbox_idx on tasks (workspace_id, session_id, queue_seq) where run_state in ('queued', 'running')`.execute(
      db,
    );
    await sql`drop index tasks_session_idx`.execute(db);
    await sql`create index tasks_session_idx on tasks (workspace_id, session_id, seq)`.execute(db);

    await sql`drop index branches_by_parent_session`.execute(db);
    await sql`create index branches_by_parent_session on branches (workspace_id, parent_session_id, seq)`.execute(
      db,
    );
  },
};
