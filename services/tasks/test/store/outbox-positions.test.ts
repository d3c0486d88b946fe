// The tasks store's units of work hand the relay the outbox rows each write
// committed, with their positions (see OutboxRelay.kick): they must be
// exactly the rows the outbox holds — by the folded save statement and by the
// append at commit.
import { BusyPolicy } from "@trellis/contracts/tasks";
import type { LoggedEvent } from "@trellis/eventlog";
import { createDatabase, createOutboxWriter, type Database, readOutbox } from "@trellis/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userActor } from "../../src/domain/events.js";
import { PostgresTaskStore } from "../../src/store/postgres-task-store.js";
import { createStoreAgent, text } from "../support/fixtures.js";
import { migrateTasksStore } from "../support/store-suites.js";

let database: Database;
beforeAll(async () => {
  database = await createDatabase({ kind: "pglite" });
  await migrateTasksStore(database, "outbox_t");
});
afterAll(async () => {
  await database.close();
});

describe("tasks store: committed outbox rows for the relay", () => {
  it("reports each write's outbox rows with the positions the outbox gave them", async () => {
    const commits: (readonly LoggedEvent[])[] = [];
    const store = new PostgresTaskStore({
      database,
      schema: "tasks",
      // The units' hand-over, caught where the platform gives it to the relay.
      outbox: createOutboxWriter({
        schema: "outbox_t",
        relay: { kick: (committed) => commits.push(committed ?? []) },
      }),
      leaseMs: 30_000,
    });
    const context = { actor: userActor("usr_1") };
    const agentId = await createStoreAgent(store, context);
    // Events appended at commit (createSession), then folded into the save
    // statement (submitTask).
    const session = await store.createSession(
      { workspaceId: "default", initialMessages: [text("first")] },
      context,
    );
    await store.submitTask(
      {
        sessionId: session.id,
        agentId,
        input: text("hi"),
        busyPolicy: BusyPolicy.UNSPECIFIED,
        parentTaskId: "",
        createSession: false,
        workspaceId: "default",
      },
      context,
      "owner_1",
    );
    const reported = commits.flat();
    const stored = await readOutbox(database, "outbox_t", { limit: 100 });
    expect(stored.length).toBeGreaterThanOrEqual(4);
    expect(reported.map((e) => [e.position, e.event])).toEqual(
      stored.map((row) => [row.position, row.event]),
    );
    // Each commit's rows are in position order.
    for (const logged of commits) {
      const positions = logged.map((e) => e.position);
      expect(positions).toEqual([...positions].sort((a, b) => (a < b ? -1 : 1)));
    }
  });
});
