// The hand-written save statement must say exactly what kysely's builder
// said for the same rows: compared here text for text, parameter for parameter.
import { Kysely, PostgresDialect, sql } from "kysely";
import { describe, expect, it } from "vitest";
import { hotStatements } from "../../src/store/postgres-task-store.js";
import { qualified, quoteId, StatementWriter } from "../../src/store/statement.js";

// Compiles only: never connects.
const db = new Kysely<Record<string, Record<string, unknown>>>({
  dialect: new PostgresDialect({ pool: {} as never }),
});

describe("StatementWriter", () => {
  it("writes inserts, updates and CTEs as kysely compiles them", () => {
    const lease = sql<Date>`now() + make_interval(secs => ${30})`;
    const messages = [
      { id: "m1", body: new Uint8Array([1, 2]), position: 3n, note: undefined },
      { id: "m2", note: "second", position: 4n },
    ];
    const session = {
      state: 2,
      last_event_id: "evt_1",
      skipped: undefined,
      updated_at: sql`now()`,
    };
    const task = { id: "t1", status: 3, lease_expires_at: lease, flag: true, nothing: null };

    const writer = new StatementWriter(db);
    writer
      .withInsert("new_messages", qualified("tasks", "messages"), messages, '"position"')
      .withUpdate("saved_session", qualified("tasks", "sessions"), session, "s1", '"id"');
    const main = writer.insert(qualified("tasks", "tasks"), [task], "*");
    const ours = writer.text(main);

    const theirs = db
      .withSchema("tasks")
      .with("new_messages", (q) => q.insertInto("messages").values(messages).returning("position"))
      .with("saved_session", (q) =>
        q.updateTable("sessions").set(session).where("id", "=", "s1").returning("id"),
      )
      .insertInto("tasks")
      .values(task)
      .returningAll()
      .compile();
    expect(ours.sql).toBe(theirs.sql);
    expect(ours.params).toEqual(theirs.parameters);
  });

  it("keeps the hot statements' texts as kysely compiled them", () => {
    const hot = hotStatements("tasks");
    const scoped = db.withSchema("tasks");
    const lock = scoped
      .selectFrom("sessions")
      .selectAll()
      .where("workspace_id", "=", "w1")
      .where("id", "=", "s1")
      .forUpdate();
    expect(hot.lockSession).toBe(lock.compile().sql);
    const byId = scoped
      .selectFrom("sessions")
      .selectAll()
      .where("id", "=", "s1")
      .orderBy(sql`workspace_id = ${"default"}`, "desc")
      .orderBy("seq")
      .limit(1)
      .forUpdate()
      .compile();
    expect(hot.lockSessionById).toBe(byId.sql);
    expect(byId.parameters).toEqual(["s1", "default", 1]);
    const mailbox = scoped
      .selectFrom("tasks")
      .selectAll()
      .where("workspace_id", "=", "w1")
      .where("session_id", "=", "s1")
      .where("run_state", "in", ["queued", "running"])
      .orderBy(sql`run_state = 'running'`, "desc")
      .orderBy("queue_seq")
      .limit(2)
      .compile();
    expect(hot.mailbox).toBe(mailbox.sql);
    expect(mailbox.parameters).toEqual(["w1", "s1", "queued", "running", 2]);
    const finished = scoped
      .selectFrom("tasks")
      .selectAll()
      .where("workspace_id", "=", "w1")
      .where("session_id", "=", "s1")
      .where((eb) => eb.or([eb("id", "=", "t1"), eb("run_state", "=", "queued")]))
      .orderBy(sql`id = ${"t1"}`, "desc")
      .orderBy("queue_seq")
      .limit(2)
      .compile();
    expect(hot.finishedRun).toBe(finished.sql);
    expect(finished.parameters).toEqual(["w1", "s1", "t1", "queued", "t1", 2]);
  });

  it("refuses what it cannot write", () => {
    const writer = new StatementWriter(db);
    expect(() => writer.insert('"t"', [], "*")).toThrow("at least one row");
    expect(() => writer.update('"t"', { a: undefined }, "x", "*")).toThrow("at least one column");
    expect(quoteId('we"ird')).toBe('"we""ird"');
  });
});
