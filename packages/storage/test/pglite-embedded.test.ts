import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import {
  appendToOutbox,
  createDatabase,
  createOutboxRelay,
  type Database,
  migrate,
  openPGlite,
  outboxMigrations,
  ping,
  readOutbox,
} from "@trellis/storage";
import { eventually } from "@trellis/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { createRecordingEventLog } from "../src/testing/recording-event-log.js";

// Embedded mode only: PGlite on disk, and one instance shared by services.

const taskEvent = (id: string): Event =>
  create(EventSchema, {
    kind: "task.submitted",
    workspaceId: "ws_1",
    resource: create(ResourceRefSchema, { object: "task", id }),
  });

const append = (database: Database, schema: string, events: Event[]) =>
  database.kysely.transaction().execute((trx) => appendToOutbox(trx, schema, events));

describe("pglite on disk", () => {
  const dir = mkdtempSync(join(tmpdir(), "trellis-pglite-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps schema, outbox and sequences across close and reopen", async () => {
    const dataDir = join(dir, "db");
    const migrations = outboxMigrations("tasks");
    const first = await createDatabase({ kind: "pglite", dataDir });
    expect((await migrate(first, { schema: "tasks", migrations })).applied).toEqual(
      Object.keys(migrations),
    );
    const written = await append(first, "tasks", [taskEvent("task_1"), taskEvent("task_1")]);
    await first.close();
    await expect(ping(first)).rejects.toMatchObject({ reason: "service_unavailable" });

    const second = await createDatabase({ kind: "pglite", dataDir });
    expect((await migrate(second, { schema: "tasks", migrations })).applied).toEqual([]);
    const stored = await readOutbox(second, "tasks", { limit: 10 });
    expect(stored.map((s) => s.event.id)).toEqual(written.map((e) => e.id));
    const [next] = await append(second, "tasks", [taskEvent("task_1")]);
    expect(next?.sequence).toBe(3n);
    expect(next?.previousEventId).toBe(written[1]?.id);
    await second.close();
  });
});

describe("pglite shared by several services", () => {
  it("serves each service in its own schema; closing one leaves the others running", async () => {
    const shared = await openPGlite();
    const tasks = await createDatabase({ kind: "pglite", pglite: shared });
    const receipts = await createDatabase({ kind: "pglite", pglite: shared });
    await Promise.all([
      migrate(tasks, { schema: "tasks", migrations: outboxMigrations("tasks") }),
      migrate(receipts, { schema: "receipts", migrations: outboxMigrations("receipts") }),
    ]);
    const log = createRecordingEventLog();
    const relays = [
      createOutboxRelay({ database: tasks, schema: "tasks", eventLog: log }),
      createOutboxRelay({ database: receipts, schema: "receipts", eventLog: log }),
    ];
    for (const relay of relays) relay.start();

    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        i % 2 === 0
          ? append(tasks, "tasks", [taskEvent(`task_${i % 3}`)])
          : append(receipts, "receipts", [taskEvent(`rcpt_${i % 3}`)]),
      ),
    );
    await eventually(() => log.stats.stored === 10, { what: "both outboxes relayed" });
    await Promise.all(relays.map((r) => r.stop()));

    await tasks.close();
    expect(shared.closed).toBe(false);
    await expect(ping(tasks)).rejects.toMatchObject({ reason: "service_unavailable" });
    await expect(ping(receipts)).resolves.toBeUndefined();
    expect(await readOutbox(receipts, "receipts", { limit: 10 })).toHaveLength(5);
    await receipts.close();
    await shared.close();
  });

  it("rejects a config naming both a shared instance and a data directory", async () => {
    const shared = await openPGlite();
    await expect(
      createDatabase({ kind: "pglite", pglite: shared, dataDir: "/tmp/x" }),
    ).rejects.toMatchObject({ reason: "invalid_request", param: "dataDir" });
    await shared.close();
  });
});
