import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { EventSchema } from "@trellis/contracts/core";
import { createLogger } from "@trellis/runtime";
import { appendToOutbox, readOutbox } from "@trellis/storage";
import { eventually } from "@trellis/testkit";
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import {
  EMBEDDED_OUTBOX_SCHEMA,
  type ServiceContext,
  type ServiceDefinition,
  startEmbedded,
} from "../src/index.js";

/** A tiny service that records events through the outbox, as real services do. */
function recorder(onContext: (ctx: ServiceContext) => void): ServiceDefinition {
  return {
    name: "recorder",
    provides: [],
    defaultPort: 0,
    create(ctx) {
      onContext(ctx);
      return {};
    },
  };
}

async function record(ctx: ServiceContext, ids: string[]): Promise<void> {
  await ctx.outbox.transaction(ctx.db.kysely, async (unit) => {
    unit.add(
      ids.map((id) =>
        create(EventSchema, {
          id,
          kind: "test.recorded",
          workspaceId: "default",
          sessionId: "ses_1",
          resource: { object: "session", id: "ses_1" },
        }),
      ),
    );
  });
}

describe("embedded mode", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("keeps events, their order and consumer positions across a restart", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-embedded-"));
    dirs.push(dataDir);
    let ctx: ServiceContext | undefined;
    const first = await startEmbedded({ services: [recorder((c) => (ctx = c))], dataDir, port: 0 });
    await record(ctx!, ["evt_1", "evt_2", "evt_3"]);
    await record(ctx!, ["evt_4", "evt_5"]);
    const filter = { workspaceId: "default", sessionId: "ses_1" };
    const before = await eventually(async () => {
      const read = await ctx!.eventLog.read({ filter });
      return read.length === 5 ? read : undefined;
    });
    // A durable consumer acks the first three.
    let acked = 0;
    for await (const item of ctx!.eventLog.consume({ name: "test-consumer", filter })) {
      await item.ack();
      if (++acked === 3) break;
    }
    await first.close({ graceMs: 100 });

    const second = await startEmbedded({
      services: [recorder((c) => (ctx = c))],
      dataDir,
      port: 0,
    });
    try {
      const after = await ctx!.eventLog.read({ filter });
      expect(after.map((e) => [e.event.id, e.position, e.event.sequence])).toEqual(
        before.map((e) => [e.event.id, e.position, e.event.sequence]),
      );
      // New events continue the per-resource sequence.
      await record(ctx!, ["evt_6"]);
      const sixth = await eventually(async () =>
        (await ctx!.eventLog.read({ filter })).find((e) => e.event.id === "evt_6"),
      );
      expect(sixth.event.sequence).toBe(6n);
      expect(sixth.event.previousEventId).toBe("evt_5");
      // The consumer resumes after what it acked.
      const resumed: string[] = [];
      for await (const item of ctx!.eventLog.consume({ name: "test-consumer", filter })) {
        resumed.push(item.event.id);
        await item.ack();
        if (resumed.length === 3) break;
      }
      expect(resumed).toEqual(["evt_4", "evt_5", "evt_6"]);
    } finally {
      await second.close({ graceMs: 100 });
    }
  });

  it("turns the outbox's NOTIFY trigger off: in one process every writer kicks the relay", async () => {
    let ctx: ServiceContext | undefined;
    const trellis = await startEmbedded({ services: [recorder((c) => (ctx = c))], port: 0 });
    try {
      const { rows } = await sql<{ enabled: string }>`
        select tgenabled as enabled from pg_trigger
        where tgname = 'outbox_notify'
          and tgrelid = ${`${EMBEDDED_OUTBOX_SCHEMA}.outbox`}::regclass`.execute(ctx!.db.kysely);
      expect(rows).toEqual([{ enabled: "D" }]);
      // Events still reach the log at once, from the kick.
      await record(ctx!, ["evt_kicked"]);
      await eventually(async () =>
        (await ctx!.eventLog.read({ filter: { workspaceId: "default" } })).some(
          (e) => e.event.id === "evt_kicked",
        ),
      );
    } finally {
      await trellis.close({ graceMs: 100 });
    }
  });

  it("keeps no index of unpublished rows: its relay never marks one published", async () => {
    let ctx: ServiceContext | undefined;
    const trellis = await startEmbedded({ services: [recorder((c) => (ctx = c))], port: 0 });
    try {
      const { rows } = await sql<{ name: string }>`
        select indexname as name from pg_indexes
        where schemaname = ${EMBEDDED_OUTBOX_SCHEMA} and tablename = 'outbox'
        order by indexname`.execute(ctx!.db.kysely);
      const names = rows.map((row) => row.name);
      expect(names).not.toContain("outbox_unpublished_idx");
      // The indexes its reads use stay: by position, id, resource, address.
      expect(names).toEqual(
        expect.arrayContaining([
          "outbox_pkey",
          "outbox_id_key",
          "outbox_resource_sequence_key",
          "outbox_workspace_position_idx",
          "outbox_workspace_session_position_idx",
        ]),
      );
      // Nothing is ever marked: the partial index would have held every row.
      await record(ctx!, ["evt_unmarked"]);
      await eventually(async () =>
        (await ctx!.eventLog.read({ filter: { workspaceId: "default" } })).some(
          (e) => e.event.id === "evt_unmarked",
        ),
      );
      const marked = await sql<{ n: number }>`
        select count(*)::int as n from ${sql.id(EMBEDDED_OUTBOX_SCHEMA, "outbox")}
        where published_at is not null`.execute(ctx!.db.kysely);
      expect(marked.rows).toEqual([{ n: 0 }]);
    } finally {
      await trellis.close({ graceMs: 100 });
    }
  });

  it("gives events their outbox positions, gaps included, and keeps them with a small window across a restart", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-embedded-"));
    dirs.push(dataDir);
    let ctx: ServiceContext | undefined;
    const start = () =>
      startEmbedded({ services: [recorder((c) => (ctx = c))], dataDir, port: 0, eventWindow: 2 });
    const first = await start();
    await record(ctx!, ["evt_a", "evt_b"]);
    // A rolled-back transaction uses up an outbox position.
    await expect(
      ctx!.db.kysely.transaction().execute(async (trx) => {
        await appendToOutbox(trx, ctx!.outboxSchema, [
          create(EventSchema, {
            id: "evt_rolled_back",
            kind: "test.recorded",
            workspaceId: "default",
            sessionId: "ses_1",
            resource: { object: "session", id: "ses_1" },
          }),
        ]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    await record(ctx!, ["evt_c", "evt_d", "evt_e"]);
    const filter = { workspaceId: "default", sessionId: "ses_1" };
    const outboxRows = async () =>
      (await readOutbox(ctx!.db, EMBEDDED_OUTBOX_SCHEMA, { limit: 100 })).map((row) => [
        row.event.id,
        row.position,
      ]);
    const rows = await outboxRows();
    expect(rows.map(([id]) => id)).toEqual(["evt_a", "evt_b", "evt_c", "evt_d", "evt_e"]);
    const logged = await eventually(async () => {
      const read = await ctx!.eventLog.read({ filter });
      return read.length === 5 ? read : undefined;
    });
    expect(logged.map((e) => [e.event.id, e.position])).toEqual(rows);
    expect((rows[2]?.[1] as bigint) - (rows[1]?.[1] as bigint)).toBe(2n);
    let acked = 0;
    for await (const item of ctx!.eventLog.consume({ name: "windowed-consumer", filter })) {
      await item.ack();
      if (++acked === 2) break;
    }
    await first.close({ graceMs: 100 });

    const second = await start();
    try {
      expect((await ctx!.eventLog.read({ filter })).map((e) => [e.event.id, e.position])).toEqual(
        rows,
      );
      await record(ctx!, ["evt_f"]);
      const resumed: string[] = [];
      for await (const item of ctx!.eventLog.consume({ name: "windowed-consumer", filter })) {
        resumed.push(item.event.id);
        await item.ack();
        if (resumed.length === 4) break;
      }
      expect(resumed).toEqual(["evt_c", "evt_d", "evt_e", "evt_f"]);
      const [sixth] = await ctx!.eventLog.read({
        filter,
        after: { afterPosition: rows.at(-1)?.[1] as bigint },
      });
      expect([sixth?.event.id, sixth?.position]).toEqual((await outboxRows()).at(-1));
    } finally {
      await second.close({ graceMs: 100 });
    }
  });

  it("checkpoints its database while running, and stops doing so at close", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-embedded-"));
    dirs.push(dataDir);
    const lines: string[] = [];
    const logger = createLogger({
      service: "trellis",
      level: "debug",
      write: (chunk) => lines.push(...chunk.split("\n").filter(Boolean)),
    });
    let ctx: ServiceContext | undefined;
    const trellis = await startEmbedded({
      services: [recorder((c) => (ctx = c))],
      dataDir,
      port: 0,
      logger,
      // Every round finds WAL past the bound (startup's migrations wrote some).
      maintenance: { checkpointWalBytes: 1, checkpointIntervalMs: 0, checkEveryMs: 20 },
    });
    const maintenance = () =>
      lines.map((line) => JSON.parse(line)).filter((line) => line.msg === "database maintenance");
    await record(ctx!, ["evt_1"]);
    await eventually(async () =>
      maintenance().some((line) => line.kind === "checkpoint") ? true : undefined,
    );
    await trellis.close({ graceMs: 100 });
    const count = maintenance().length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(maintenance().length).toBe(count);
    expect(lines.filter((line) => JSON.parse(line).level === "warn")).toEqual([]);
  });
});
