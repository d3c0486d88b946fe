/**
 * The tasks service's tables, the database-level guards of the task
 * lifecycle and the mailbox, and the default workspace with its echo agent.
 *
 * Guards that hold whatever the code does:
 * - `tasks_one_running_per_session`: at most one task of a session holds the
 *   mailbox (partial unique index), across every replica;
 * - `tasks_not_completed_and_canceled`: completed_at and canceled_at are never
 *   both set;
 * - trigger `tasks_terminal_guard`: a terminal status (COMPLETED 5, FAILED 6,
 *   CANCELED 7) never changes, so once CANCELED nothing replaces it.
 */
import { type Kysely, type Migration, sql } from "kysely";
import { DEFAULT_AGENT_ID, DEFAULT_WORKSPACE_ID, ECHO_GRAPH } from "../../domain/defaults.js";

const now = sql`now()`;

export const createTasks: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("workspaces")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("root", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("default_branch_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("default_agent_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();

    await db.schema
      .createTable("agents")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("version", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("description", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("backend", "text", (c) => c.notNull())
      .addColumn("tools", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
      .addColumn("autonomy_tier", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("receipt_policy", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("definition", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("safe_to_retry", "boolean", (c) => c.notNull().defaultTo(false))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("agents_workspace_idx")
      .on("agents")
      .columns(["workspace_id", "seq"])
      .execute();

    await db.schema
      .createTable("sessions")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("state", "smallint", (c) => c.notNull())
      .addColumn("agent_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("root_session_id", "text", (c) => c.notNull())
      .addColumn("parent_session_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("branch_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("forked_from_event_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("summary", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("last_event_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("transcript_epoch", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("message_count", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("turn_count", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("next_queue_seq", "bigint", (c) => c.notNull().defaultTo(1))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("sessions_workspace_idx")
      .on("sessions")
      .columns(["workspace_id", "seq"])
      .execute();

    await db.schema
      .createTable("messages")
      .addColumn("seq", "bigserial", (c) => c.notNull())
      .addColumn("id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("position", "bigint", (c) => c.notNull())
      .addColumn("turn", "bigint", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("role", "smallint", (c) => c.notNull())
      .addColumn("body", "bytea", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addPrimaryKeyConstraint("messages_pkey", ["session_id", "position"])
      .execute();
    // A fork shares its parent's messages (same ids): GetMessage picks the oldest.
    await db.schema.createIndex("messages_id_idx").on("messages").columns(["id", "seq"]).execute();
    // Truncation finds the (N+1)-th turn start by role.
    await sql`create index messages_turn_start_idx on messages (session_id, position) where role in (2, 5)`.execute(
      db,
    );
    await db.schema
      .createIndex("messages_task_idx")
      .on("messages")
      .columns(["task_id"])
      .where(sql.ref("task_id"), "<>", "")
      .execute();

    await db.schema
      .createTable("tasks")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("agent_id", "text", (c) => c.notNull())
      .addColumn("status", "smallint", (c) => c.notNull())
      .addColumn("run_state", "text", (c) =>
        c.notNull().check(sql`run_state in ('queued', 'running', 'waiting', 'done')`),
      )
      .addColumn("queue_seq", "bigint", (c) => c.notNull())
      .addColumn("input", "bytea", (c) => c.notNull())
      .addColumn("input_position", "bigint")
      .addColumn("created_by", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("branch_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("parent_task_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("assigned_backend", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("receipt_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("outcome_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("busy_policy", "smallint", (c) => c.notNull().defaultTo(0))
      .addColumn("idempotency_key", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addColumn("started_at", "timestamptz")
      .addColumn("completed_at", "timestamptz")
      .addColumn("canceled_at", "timestamptz")
      .addColumn("failure", "bytea")
      .addColumn("suspension", "bytea")
      .addColumn("signal_id", "text")
      .addColumn("checkpoint", "jsonb")
      .addColumn("resume_payload", "jsonb")
      .addColumn("output", "bytea")
      .addColumn("lease_owner", "text")
      .addColumn("lease_expires_at", "timestamptz")
      .addCheckConstraint(
        "tasks_not_completed_and_canceled",
        sql`completed_at is null or canceled_at is null`,
      )
      .execute();
    await db.schema
      .createIndex("tasks_workspace_idx")
      .on("tasks")
      .columns(["workspace_id", "seq"])
      .execute();
    await db.schema
      .createIndex("tasks_session_idx")
      .on("tasks")
      .columns(["session_id", "seq"])
      .execute();
    // The mailbox: its head, and the one task holding it.
    await sql`create index tasks_mailbox_idx on tasks (session_id, queue_seq) where run_state in ('queued', 'running')`.execute(
      db,
    );
    await sql`create unique index tasks_one_running_per_session on tasks (session_id) where run_state = 'running'`.execute(
      db,
    );
    // Recovery: expired leases.
    await sql`create index tasks_lease_idx on tasks (lease_expires_at) where run_state = 'running'`.execute(
      db,
    );
    await sql`create index tasks_signal_idx on tasks (signal_id) where signal_id is not null`.execute(
      db,
    );
    await sql`
      create function tasks_terminal_guard() returns trigger language plpgsql as $$
      begin
        if old.status in (5, 6, 7) and new.status <> old.status then
          raise exception 'task % is terminal (status %) and cannot become %', old.id, old.status, new.status
            using errcode = 'check_violation';
        end if;
        return new;
      end $$`.execute(db);
    await sql`
      create trigger tasks_terminal_guard before update of status on tasks
      for each row execute function tasks_terminal_guard()`.execute(db);

    await db.schema
      .createTable("idempotency_keys")
      .addColumn("scope", "text", (c) => c.notNull())
      .addColumn("key", "text", (c) => c.notNull())
      .addColumn("request_hash", "text", (c) => c.notNull())
      .addColumn("resource_id", "text", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .addPrimaryKeyConstraint("idempotency_keys_pkey", ["scope", "key"])
      .execute();

    await db.schema
      .createTable("signal_deliveries")
      .addColumn("delivery_id", "text", (c) => c.primaryKey())
      .addColumn("signal_id", "text", (c) => c.notNull())
      .addColumn("task_id", "text", (c) => c.notNull())
      .addColumn("payload", "jsonb")
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();

    await db.schema
      .createTable("outcomes")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("task_id", "text", (c) => c.notNull().unique())
      .addColumn("session_id", "text", (c) => c.notNull())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("status", "smallint", (c) => c.notNull())
      .addColumn("summary", "text", (c) => c.notNull())
      .addColumn("messages", "bytea", (c) => c.notNull())
      .addColumn("artifact_ids", "jsonb", (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("outcomes_workspace_idx")
      .on("outcomes")
      .columns(["workspace_id", "seq"])
      .execute();

    await db.schema
      .createTable("artifacts")
      .addColumn("seq", "bigserial", (c) => c.notNull().unique())
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text", (c) => c.notNull())
      .addColumn("session_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("task_id", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("kind", "smallint", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("mime_type", "text", (c) => c.notNull())
      .addColumn("uri", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("visibility", "smallint", (c) => c.notNull().defaultTo(0))
      .addColumn("sha256", "text", (c) => c.notNull().defaultTo(""))
      .addColumn("size_bytes", "bigint", (c) => c.notNull().defaultTo(0))
      .addColumn("content", "bytea")
      .addColumn("metadata", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(now))
      .execute();
    await db.schema
      .createIndex("artifacts_workspace_idx")
      .on("artifacts")
      .columns(["workspace_id", "seq"])
      .execute();

    // The default workspace and its echo agent (embedded mode's starting point).
    await sql`
      insert into workspaces (id, name, root, default_agent_id)
      values (${DEFAULT_WORKSPACE_ID}, 'Default workspace', '', ${DEFAULT_AGENT_ID})
      on conflict (id) do nothing`.execute(db);
    await sql`
      insert into agents (id, workspace_id, name, version, description, backend, definition, safe_to_retry)
      values (${DEFAULT_AGENT_ID}, ${DEFAULT_WORKSPACE_ID}, 'echo', '1',
              'Replies with the text of its input (scripted).', 'scripted',
              ${JSON.stringify(ECHO_GRAPH)}::jsonb, true)
      on conflict (id) do nothing`.execute(db);
  },
};
