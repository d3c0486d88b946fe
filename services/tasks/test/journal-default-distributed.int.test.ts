/**
 * The turn path's default in distributed mode (session 15): with
 * TRELLIS_TASKS_JOURNAL unset a tasks replica on PostgreSQL + JetStream runs
 * the session owner under leases — the turn is appended to `tasks.journal`
 * and the session's lease is held by the replica — while an explicit
 * `false` keeps the relational path (no journal entry, no lease), and a
 * value that is none of false / true / owner is refused by name.
 */
import { TaskStatus } from "@trellis/contracts/core";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadTasksConfig } from "../src/config.js";
import { createAgent, slowEcho, text, watchUntil } from "./support/fixtures.js";
import { distributedTarget, type TasksHarness } from "./support/harness.js";

describe("TRELLIS_TASKS_JOURNAL in distributed mode", () => {
  const target = distributedTarget();
  let db: pg.Client;

  beforeAll(async () => {
    db = new pg.Client({ connectionString: await target.databaseUrl() });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
    await target.teardown();
  });

  /** One completed turn of a new session on a replica started with `env`. */
  async function oneTurn(replicaId: string, env: Record<string, string>) {
    const replica: TasksHarness = await target.start({ env, replicaId });
    try {
      const agentId = await createAgent(replica, `echo-${replicaId}`, "scripted", slowEcho(0));
      const { session } = await replica.sessions.createSession({ agentId });
      const sessionId = session?.id as string;
      const { task } = await replica.tasks.submitTask({ sessionId, input: text("hello") });
      const done = await watchUntil(replica, task?.id as string);
      expect(done.task.status).toBe(TaskStatus.COMPLETED);
      const journal = await db.query<{ n: string }>(
        "select count(*) as n from tasks.journal where stream like $1",
        [`%${sessionId}%`],
      );
      const leases = await db.query<{ n: string }>(
        "select count(*) as n from tasks.session_leases where owner = $1",
        [replicaId],
      );
      return { journal: Number(journal.rows[0]?.n), leases: Number(leases.rows[0]?.n) };
    } finally {
      await replica.close();
    }
  }

  it("runs the session owner under leases when unset", async () => {
    const seen = await oneTurn("replica-default", {});
    // The submit and the finish appended (plus the lease's fence entry).
    expect(seen.journal).toBeGreaterThanOrEqual(2);
    expect(seen.leases).toBe(1);
  });

  it("keeps the relational path with TRELLIS_TASKS_JOURNAL=false", async () => {
    const seen = await oneTurn("replica-relational", { TRELLIS_TASKS_JOURNAL: "false" });
    expect(seen).toEqual({ journal: 0, leases: 0 });
  });

  it("refuses a value that is not false, true or owner, naming the variable", () => {
    for (const raw of ["on", "OWNER", "1", "owner "]) {
      expect(() => loadTasksConfig({ TRELLIS_TASKS_JOURNAL: raw })).toThrow(
        /TRELLIS_TASKS_JOURNAL/,
      );
    }
    // Unset or empty: the default applies (owner, decided in definition.ts).
    expect(loadTasksConfig({}).TRELLIS_TASKS_JOURNAL).toBeUndefined();
    expect(loadTasksConfig({ TRELLIS_TASKS_JOURNAL: "" }).TRELLIS_TASKS_JOURNAL).toBeUndefined();
    expect(loadTasksConfig({ TRELLIS_TASKS_JOURNAL: "false" }).TRELLIS_TASKS_JOURNAL).toBe("false");
  });
});
