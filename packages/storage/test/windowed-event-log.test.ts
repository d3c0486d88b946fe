// The in-process event log as embedded mode builds it: a small window of
// events in memory over a real outbox (PGlite) that holds them all. The
// window is tiny here so that every case crosses the seam between the two.
import { clone, create, toBinary } from "@bufbuild/protobuf";
import { timestampDate, timestampNow } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import {
  type AppendResult,
  type EventLog,
  InProcessEventLog,
  InProcessSignalBus,
  type LoggedEvent,
  MemoryConsumerPositionStore,
} from "@trellis/eventlog";
import { describeEventLogContract, type EventLogContractTarget } from "@trellis/eventlog/contract";
import {
  appendToOutbox,
  createDatabase,
  createOutboxArchive,
  createOutboxRelay,
  createOutboxWriter,
  type Database,
  migrate,
  type OutboxRelay,
  outboxMigrations,
  outboxTables,
  readOutbox,
  readOutboxTail,
} from "@trellis/storage";
import { eventually, uniqueName } from "@trellis/testkit";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// Internal to storage: a unit of work pairs its events with their positions.
import { insertFolded } from "../src/contract/support.js";
import { outboxEntries } from "../src/outbox/outbox.js";

const WINDOW = 5;

let database: Database;
let schemas = 0;

beforeAll(async () => {
  database = await createDatabase({ kind: "pglite" });
});
afterAll(async () => {
  await database.close();
});

async function freshOutbox(): Promise<string> {
  schemas += 1;
  const schema = `windowed_${schemas}`;
  await migrate(database, { schema, migrations: outboxMigrations(schema) });
  return schema;
}

function openWindowed(
  schema: string,
  positions: MemoryConsumerPositionStore,
  window = WINDOW,
): Promise<InProcessEventLog> {
  return readOutboxTail(database, schema, window).then((history) =>
    InProcessEventLog.open({
      archive: createOutboxArchive(database, schema),
      window,
      history,
      consumerPositions: positions,
    }),
  );
}

/**
 * The contract's target. In embedded mode the outbox decides positions and
 * sequences and the relay hands each row to the log; here an unwindowed
 * in-process log plays the outbox's deciding part (it answers `append`:
 * conflicts, duplicates, sequences), every event it stores is written to a
 * real outbox table at its position, then handed to the windowed log with
 * `appendLogged`, which answers every read.
 */
async function windowedTarget(): Promise<EventLogContractTarget> {
  const schema = await freshOutbox();
  // The log keeps a sequence per whole address (workspace, session,
  // resource); the outbox per resource, since a resource never changes
  // workspace. The suite reuses resource ids across workspaces.
  await sql`alter table ${sql.id(schema, "outbox")} drop constraint outbox_resource_sequence_key`.execute(
    database.kysely,
  );
  const positions = new MemoryConsumerPositionStore();
  const decider = new InProcessEventLog();
  let windowed = await openWindowed(schema, positions);
  let signals = new InProcessSignalBus();
  let relayed = 0n;
  let appending: Promise<unknown> = Promise.resolve();

  const relay = async (): Promise<void> => {
    const fresh = decider.snapshot().filter((logged) => logged.position > relayed);
    if (fresh.length === 0) return;
    const outbox = outboxTables(database.kysely, schema);
    for (let at = 0; at < fresh.length; at += 1000) {
      await outbox
        .insertInto("outbox")
        .values(
          fresh.slice(at, at + 1000).map(({ event, position }) => ({
            position,
            id: event.id,
            workspace_id: event.workspaceId,
            session_id: event.sessionId,
            resource_object: event.resource?.object ?? "",
            resource_id: event.resource?.id ?? "",
            sequence: event.sequence,
            kind: event.kind,
            body: toBinary(EventSchema, event),
            created_at: timestampDate(event.createdAt ?? timestampNow()),
          })),
        )
        .execute();
    }
    relayed = (fresh.at(-1) as LoggedEvent).position;
    await windowed.appendLogged(fresh);
  };

  const append = (events: readonly Event[]): Promise<AppendResult[]> => {
    // One at a time, like the one relay of the outbox.
    const run = appending.then(async () => {
      try {
        return await decider.append(events);
      } finally {
        // What was stored before a failure is relayed too.
        await relay();
      }
    });
    appending = run.catch(() => {});
    return run;
  };

  const log: EventLog = {
    append,
    read: (query) => windowed.read(query),
    subscribe: (query) => windowed.subscribe(query),
    last: (filter) => windowed.last(filter),
    consume: (options) => windowed.consume(options),
    ping: () => windowed.ping(),
    close: () => windowed.close(),
  };
  return {
    log,
    get signals() {
      return signals;
    },
    async replica() {
      return { log, signals };
    },
    async restart() {
      await appending;
      await windowed.close();
      await signals.close();
      windowed = await openWindowed(schema, positions);
      signals = new InProcessSignalBus();
      return { log, signals };
    },
    async dispose() {
      await appending;
      await windowed.close();
      await decider.close();
      await signals.close();
      await sql`drop schema ${sql.id(schema)} cascade`.execute(database.kysely);
    },
  };
}

describeEventLogContract(`InProcessEventLog, window of ${WINDOW} over an outbox`, windowedTarget);

const taskEvent = (workspaceId: string, taskId: string, note = ""): Event =>
  create(EventSchema, {
    kind: "task.progress",
    workspaceId,
    sessionId: "ses_1",
    resource: create(ResourceRefSchema, { object: "task", id: taskId }),
    payload: { kind: { case: "data", value: { note } } },
  });

/** Embedded mode in miniature: services write the outbox, the relay feeds the windowed log. */
interface Embedded {
  schema: string;
  log: InProcessEventLog;
  relay: OutboxRelay;
  positions: MemoryConsumerPositionStore;
  /** Commit events to the outbox (one transaction) and wait until the log has them. */
  write(events: Event[]): Promise<Event[]>;
  /** Stop the relay and close the log (the database stays). */
  stop(): Promise<void>;
}

async function startEmbedded(
  schema: string,
  positions = new MemoryConsumerPositionStore(),
): Promise<Embedded> {
  const log = await openWindowed(schema, positions);
  const errors: unknown[] = [];
  const relay = createOutboxRelay({
    database,
    schema,
    eventLog: log,
    positionedLog: log,
    logRebuiltFromOutbox: true,
    listen: false,
    pollIntervalMs: 50,
    onError: (error) => errors.push(error),
  });
  relay.start();
  return {
    schema,
    log,
    relay,
    positions,
    async write(events) {
      const written = await database.kysely
        .transaction()
        .execute((trx) => appendToOutbox(trx, schema, events));
      relay.kick();
      const lastId = (written.at(-1) as Event).id;
      const workspaceId = (written[0] as Event).workspaceId;
      await eventually(async () => (await log.last({ workspaceId }))?.event.id === lastId, {
        what: `event ${lastId} in the log`,
      });
      return written;
    },
    async stop() {
      await relay.stop();
      await log.close();
      expect(errors).toEqual([]);
    },
  };
}

const ids = (events: readonly LoggedEvent[]) => events.map((e) => e.event.id);

describe("windowed in-process log over the outbox", () => {
  it("rejects a plain append: events enter from the outbox with their positions", async () => {
    const schema = await freshOutbox();
    const log = await openWindowed(schema, new MemoryConsumerPositionStore());
    await expect(log.append([taskEvent("ws", "t")])).rejects.toMatchObject({
      reason: "invalid_request",
    });
    await log.close();
  });

  it("refuses a bad window and logged events without a sequence or a position, storing nothing", async () => {
    const schema = await freshOutbox();
    const archive = createOutboxArchive(database, schema);
    for (const window of [0, -1, 1.5, Number.NaN]) {
      expect(() => new InProcessEventLog({ archive, window })).toThrow(
        expect.objectContaining({ reason: "invalid_request", param: "window" }),
      );
    }
    const log = await openWindowed(schema, new MemoryConsumerPositionStore());
    const event = taskEvent("ws_bad", "t");
    event.id = "evt_bad_1";
    await expect(log.appendLogged([{ event, position: 1n }])).rejects.toMatchObject({
      reason: "invalid_request",
      param: "events[0].sequence",
    });
    const sequenced = clone(EventSchema, event);
    sequenced.sequence = 1n;
    for (const position of [0n, -3n]) {
      await expect(log.appendLogged([{ event: sequenced, position }])).rejects.toMatchObject({
        reason: "invalid_request",
        param: "events[0].position",
      });
    }
    expect(await log.read({ filter: { workspaceId: "ws_bad" } })).toEqual([]);
    await log.close();
  });

  it("delivers everything after its floor, in order, to a durable consumer far behind the window", async () => {
    const embedded = await startEmbedded(await freshOutbox());
    const ws = uniqueName("ws");
    const written: Event[] = [];
    for (let batch = 0; batch < 8; batch++) {
      written.push(
        ...(await embedded.write(
          Array.from({ length: 6 }, (_, i) => taskEvent(ws, `task_${i % 3}`, `${batch}.${i}`)),
        )),
      );
    }
    // An unrelated workspace in between must not reach a consumer of `ws`.
    await embedded.write([taskEvent(uniqueName("other"), "task_x")]);
    const more = await embedded.write([taskEvent(ws, "task_0", "late")]);
    const expected = [...written, ...more].map((e) => e.id);

    const got: LoggedEvent[] = [];
    for await (const delivery of embedded.log.consume({
      name: "far-behind",
      filter: { workspaceId: ws },
    })) {
      expect(delivery.deliveryCount).toBe(1);
      got.push(delivery);
      await delivery.ack();
      if (got.length === expected.length) break;
    }
    expect(ids(got)).toEqual(expected);
    // The floor it saved is the last event's outbox position.
    expect(embedded.positions.positions.get("far-behind")).toBe(got.at(-1)?.position);

    // A consumer whose saved floor is inside the archive resumes right after it.
    const floor = (got[10] as LoggedEvent).position;
    embedded.positions.positions.set("lagging", floor);
    const resumed: LoggedEvent[] = [];
    for await (const delivery of embedded.log.consume({
      name: "lagging",
      filter: { workspaceId: ws },
    })) {
      resumed.push(delivery);
      await delivery.ack();
      if (resumed.length === expected.length - 11) break;
    }
    expect(ids(resumed)).toEqual(expected.slice(11));
    await embedded.stop();
  });

  it("hands a subscriber from 0 every event once, in order, while appends trim the window", async () => {
    const embedded = await startEmbedded(await freshOutbox());
    const ws = uniqueName("ws");
    const first = await embedded.write(
      Array.from({ length: 20 }, (_, i) => taskEvent(ws, `task_${i % 4}`)),
    );
    const written = [...first];
    const total = 20 + 30 * 3;
    const received: LoggedEvent[] = [];
    const subscriber = (async () => {
      for await (const logged of embedded.log.subscribe({ filter: { workspaceId: ws } })) {
        received.push(logged);
        // A slow reader: the window moves on under it.
        await new Promise((resolve) => setImmediate(resolve));
        if (received.length === total) return;
      }
    })();
    for (let batch = 0; batch < 30; batch++) {
      written.push(
        ...(await embedded.write(
          Array.from({ length: 3 }, (_, i) => taskEvent(ws, `task_${(batch + i) % 4}`)),
        )),
      );
    }
    await subscriber;
    expect(ids(received)).toEqual(written.map((e) => e.id));
    const positions = received.map((e) => e.position);
    expect(positions.every((p, i) => i === 0 || p > (positions[i - 1] as bigint))).toBe(true);
    await embedded.stop();
  });

  it("keeps the outbox's positions, gaps included, across a restart; consumers resume from their floors", async () => {
    const schema = await freshOutbox();
    const ws = uniqueName("ws");
    let embedded = await startEmbedded(schema);
    const before = await embedded.write(
      Array.from({ length: 4 }, (_, i) => taskEvent(ws, `task_${i % 2}`)),
    );
    // A transaction that rolls back after its insert uses up a position.
    await expect(
      database.kysely.transaction().execute(async (trx) => {
        await appendToOutbox(trx, schema, [taskEvent(ws, "task_rolled_back")]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    const after = await embedded.write(
      Array.from({ length: 8 }, (_, i) => taskEvent(ws, `task_${i % 2}`)),
    );
    const outbox = (await readOutbox(database, schema, { limit: 100 })).map((row) => ({
      id: row.event.id,
      position: row.position,
    }));
    expect(outbox.map((row) => row.id)).toEqual([...before, ...after].map((e) => e.id));
    const gapAt = (outbox[4] as { position: bigint }).position;
    expect(gapAt - (outbox[3] as { position: bigint }).position).toBe(2n);
    const asLogged = (events: readonly LoggedEvent[]) =>
      events.map((e) => ({ id: e.event.id, position: e.position }));
    expect(asLogged(await embedded.log.read({ filter: { workspaceId: ws } }))).toEqual(outbox);

    // A durable consumer acks the first six events, then the process stops.
    const name = "receipts";
    let acked = 0;
    for await (const delivery of embedded.log.consume({ name, filter: { workspaceId: ws } })) {
      await delivery.ack();
      acked += 1;
      if (acked === 6) break;
    }
    expect(embedded.positions.positions.get(name)).toBe(outbox[5]?.position);
    await embedded.stop();

    // Restart: the log loads only the newest rows; positions are the same.
    embedded = await startEmbedded(schema, embedded.positions);
    expect(embedded.log.snapshot().length).toBeLessThanOrEqual(WINDOW);
    expect(asLogged(await embedded.log.read({ filter: { workspaceId: ws } }))).toEqual(outbox);
    expect(
      (
        await embedded.log.read({
          filter: { workspaceId: ws },
          after: { afterPosition: gapAt - 1n },
        })
      ).map((e) => e.event.id),
    ).toEqual(outbox.slice(4).map((row) => row.id));
    // An event-id cursor on an event no longer in memory still works.
    expect(
      ids(
        await embedded.log.read({
          filter: { workspaceId: ws },
          after: { afterEventId: outbox[1]?.id ?? "" },
          limit: 2,
        }),
      ),
    ).toEqual(outbox.slice(2, 4).map((row) => row.id));
    const latest = await embedded.log.last({
      workspaceId: ws,
      resource: { object: "task", id: "task_0" },
    });
    expect(latest?.event.id).toBe(after.at(-2)?.id);

    // New events continue after the outbox's positions; the consumer resumes after its floor.
    const late = await embedded.write([taskEvent(ws, "task_0", "late")]);
    const resumed: string[] = [];
    for await (const delivery of embedded.log.consume({ name, filter: { workspaceId: ws } })) {
      resumed.push(delivery.event.id);
      await delivery.ack();
      if (delivery.event.id === late[0]?.id) break;
    }
    expect(resumed).toEqual([...outbox.slice(6).map((row) => row.id), late[0]?.id]);
    const [lateLogged] = await embedded.log.read({
      filter: { workspaceId: ws },
      after: { afterPosition: (outbox.at(-1) as { position: bigint }).position },
    });
    const [lateRow] = await readOutbox(database, schema, {
      afterPosition: (outbox.at(-1) as { position: bigint }).position,
      limit: 1,
    });
    expect(lateLogged?.position).toBe(lateRow?.position);

    // The relay handing over rows the log already has (a retry) stores nothing new.
    const again = await embedded.log.appendLogged(
      (await readOutbox(database, schema, { limit: 100 })).map((row) => ({
        event: row.event,
        position: row.position,
      })),
    );
    expect(again.every((result) => result.duplicate)).toBe(true);
    expect(again.map((result) => result.position)).toEqual([
      ...outbox.map((row) => row.position),
      lateRow?.position,
    ]);
    // Another event at a position the log has passed (here: the gap) is refused.
    const other = clone(EventSchema, late[0] as Event);
    other.id = "evt_other";
    await expect(
      embedded.log.appendLogged([{ event: other, position: gapAt - 1n }]),
    ).rejects.toMatchObject({ reason: "invalid_request" });
    await embedded.stop();
  });
});

describe("outbox relay feeding a positioned log", () => {
  it("marks nothing; rows committed while no relay ran reach the restarted log and its consumers once", async () => {
    const schema = await freshOutbox();
    const ws = uniqueName("ws");
    let embedded = await startEmbedded(schema);
    const first = await embedded.write(
      Array.from({ length: 3 }, (_, i) => taskEvent(ws, `task_${i}`)),
    );
    await embedded.stop();
    // Committed with no relay running (a crash before the hand-over).
    const unrelayed = await database.kysely
      .transaction()
      .execute((trx) =>
        appendToOutbox(trx, schema, [taskEvent(ws, "task_0"), taskEvent(ws, "task_9")]),
      );
    // The relay rewrote no row: the log, not the column, says what it holds.
    const marked = await sql<{ n: string }>`
      select count(*)::text as n from ${sql.id(schema, "outbox")}
      where published_at is not null`.execute(database.kysely);
    expect(marked.rows[0]?.n).toBe("0");

    embedded = await startEmbedded(schema, embedded.positions);
    const all = [...first, ...unrelayed].map((e) => e.id);
    expect(ids(await embedded.log.read({ filter: { workspaceId: ws } }))).toEqual(all);
    // The relay goes on after what the log was rebuilt with.
    const late = await embedded.write([taskEvent(ws, "task_1", "late")]);
    const seen: string[] = [];
    for await (const delivery of embedded.log.consume({
      name: "each-once",
      filter: { workspaceId: ws },
    })) {
      seen.push(delivery.event.id);
      await delivery.ack();
      if (delivery.event.id === late[0]?.id) break;
    }
    expect(seen).toEqual([...all, late[0]?.id]);
    const logged = await embedded.log.read({ filter: { workspaceId: ws } });
    expect(ids(logged)).toEqual(seen);
    const rows = await readOutbox(database, schema, { limit: 100 });
    expect(logged.map((e) => e.position)).toEqual(rows.map((row) => row.position));
    expect(rows.every((row) => row.publishedAt === null)).toBe(true);
    await embedded.stop();
  });
});

describe("outbox relay: rows handed over with the kick", () => {
  /** A unit of work's hand-over, caught instead of given to a relay. */
  function caughtWriter(schema: string) {
    const handed: (readonly LoggedEvent[] | undefined)[] = [];
    const writer = createOutboxWriter({ schema, relay: { kick: (rows) => handed.push(rows) } });
    return { writer, handed };
  }

  it("a unit copies the caller's events unless it gives them up", async () => {
    const schema = await freshOutbox();
    const { writer, handed } = caughtWriter(schema);
    const mine = taskEvent("ws_seq", "task_1");
    const given = taskEvent("ws_seq", "task_1");
    await writer.transaction(database.kysely, async (unit) => {
      unit.add([mine]);
      unit.add([given], { adopt: true });
      expect(unit.pending).toBe(2);
    });
    const [copied, adopted] = handed[0] ?? [];
    expect(copied?.event).not.toBe(mine);
    expect(mine.sequence).toBe(0n);
    expect(mine.id).toBe("");
    expect(copied?.event.sequence).toBe(1n);
    expect(adopted?.event).toBe(given);
    expect(given.sequence).toBe(2n);
    expect(given.previousEventId).toBe(copied?.event.id);
  });

  it("a unit hands over exactly the committed rows: folded and appended, none after a rollback", async () => {
    const schema = await freshOutbox();
    const { writer, handed } = caughtWriter(schema);
    // A unit that adds nothing hands nothing over (no kick).
    await writer.transaction(database.kysely, async () => undefined);
    expect(handed).toEqual([]);
    await writer.transaction(database.kysely, async (unit) => {
      unit.add([taskEvent("ws_fold", "task_1"), taskEvent("ws_fold", "task_2")]);
      const fold = await unit.fold();
      expect(unit.pending).toBe(0);
      if (!fold) throw new Error("nothing folded");
      await insertFolded(unit.trx, fold);
      // Added after the fold: appended at commit.
      unit.add([taskEvent("ws_fold", "task_1", "later")]);
    });
    await expect(
      writer.transaction(database.kysely, async (unit) => {
        unit.add([taskEvent("ws_fold", "task_3")]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(handed).toHaveLength(1);
    const stored = await readOutbox(database, schema, { limit: 10 });
    expect(handed[0]?.map((e) => [e.position, e.event])).toEqual(
      stored.map((row) => [row.position, row.event]),
    );
    expect(stored.map((row) => row.event.sequence)).toEqual([1n, 1n, 2n]);
  });

  it("a unit whose fold was not settled kicks without rows (the relay reads them)", async () => {
    const schema = await freshOutbox();
    const { writer, handed } = caughtWriter(schema);
    await writer.transaction(database.kysely, async (unit) => {
      unit.add([taskEvent("ws_unsettled", "task_1")]);
      const fold = await unit.fold();
      await outboxTables(unit.trx, schema)
        .insertInto("outbox")
        .values(fold?.rows ?? [])
        .execute();
    });
    expect(handed).toEqual([undefined]);
    expect(await readOutbox(database, schema, { limit: 10 })).toHaveLength(1);
  });

  it("the log keeps copies of logged events unless the caller gives them up", async () => {
    const schema = await freshOutbox();
    const log = await openWindowed(schema, new MemoryConsumerPositionStore(), 100);
    const logged = (id: string, sequence: bigint) => {
      const event = taskEvent("ws_adopt", "task_1");
      event.id = id;
      event.sequence = sequence;
      event.createdAt = timestampNow();
      return event;
    };
    const copied = logged("evt_copied", 1n);
    const adopted = logged("evt_adopted", 2n);
    await log.appendLogged([{ event: copied, position: 1n }]);
    await log.appendLogged([{ event: adopted, position: 2n }], { adopt: true });
    const [first, second] = await log.read({ filter: { workspaceId: "ws_adopt" } });
    expect(first?.event).not.toBe(copied);
    expect(first?.event).toEqual({ ...copied, previousEventId: "" });
    expect(second?.event).toBe(adopted);
    await log.close();
  });

  it("pairs events with their rows' positions by id, in position order, and refuses a missing row", () => {
    const a = taskEvent("ws_p", "t");
    a.id = "evt_a";
    const b = taskEvent("ws_p", "t");
    b.id = "evt_b";
    expect(
      outboxEntries(
        [a, b],
        [
          { id: "evt_b", position: "7" },
          { id: "evt_a", position: 9n },
        ],
      ),
    ).toEqual([
      { event: b, position: 7n },
      { event: a, position: 9n },
    ]);
    expect(() => outboxEntries([a, b], [{ id: "evt_a", position: 3 }])).toThrow(/evt_b/);
    // With the rows (in the events' order), each entry carries its row's body.
    const bodies = [new Uint8Array([1]), new Uint8Array([2])];
    expect(
      outboxEntries(
        [a, b],
        [
          { id: "evt_a", position: 1n },
          { id: "evt_b", position: 2n },
        ],
        bodies.map((body) => ({ body })),
      ),
    ).toEqual([
      { event: a, position: 1n, body: bodies[0] },
      { event: b, position: 2n, body: bodies[1] },
    ]);
  });

  /**
   * A relay feeding a windowed log, recording the objects it hands to the
   * log: a row read back from the outbox arrives as a freshly decoded
   * object, a row handed over as the writer's own.
   */
  async function handOverRig() {
    const schema = await freshOutbox();
    const log = await openWindowed(schema, new MemoryConsumerPositionStore(), 1000);
    const received: LoggedEvent[] = [];
    const errors: unknown[] = [];
    const relay = createOutboxRelay({
      database,
      schema,
      eventLog: log,
      positionedLog: {
        appendLogged(events, options) {
          received.push(...events);
          return log.appendLogged(events, options);
        },
        get lastPosition() {
          return log.lastPosition;
        },
      },
      logRebuiltFromOutbox: true,
      listen: false,
      // Only kicks wake it within the test's time.
      pollIntervalMs: 60_000,
      onError: (error) => errors.push(error),
    });
    relay.start();
    // Units of work whose hand-over the test gives to the relay itself.
    const { writer, handed } = caughtWriter(schema);
    const commit = async (events: Event[]): Promise<LoggedEvent[]> => {
      await writer.transaction(database.kysely, async (unit) => unit.add(events));
      return [...(handed.pop() ?? [])];
    };
    const arrived = (count: number) =>
      eventually(() => received.length >= count, { what: `${count} events at the log` });
    // The first round reads whatever the outbox holds; the cursor starts there.
    await commit([taskEvent("ws_h", "task_start")]);
    relay.kick();
    await arrived(1);
    return { schema, log, relay, received, errors, commit, arrived };
  }

  it("publishes the committed rows a unit hands it without reading them back, at their positions", async () => {
    const rig = await handOverRig();
    // A writer wired to the relay, as the platform builds it.
    const handed: LoggedEvent[] = [];
    const writer = createOutboxWriter({
      schema: rig.schema,
      relay: {
        kick(rows) {
          handed.push(...(rows ?? []));
          rig.relay.kick(rows);
        },
      },
    });
    const commit = (events: Event[]) =>
      writer.transaction(database.kysely, async (unit) => unit.add(events));
    await commit([taskEvent("ws_h", "task_a"), taskEvent("ws_h", "task_b")]);
    await rig.arrived(3);
    await commit([taskEvent("ws_h", "task_a", "again")]);
    await rig.arrived(4);
    expect(handed).toHaveLength(3);
    const published = rig.received.slice(1);
    // The writer's own objects: nothing was decoded from the outbox.
    published.forEach((entry, i) => {
      expect(entry.event).toBe(handed[i]?.event);
      expect(entry.position).toBe(handed[i]?.position);
    });
    // And they are what the outbox holds, where it holds them.
    const stored = await readOutbox(database, rig.schema, { limit: 10 });
    expect(stored.slice(1).map((row) => [row.position, row.event])).toEqual(
      handed.map((entry) => [entry.position, entry.event]),
    );
    const inLog = await rig.log.read({ filter: { workspaceId: "ws_h" } });
    expect(inLog.map((e) => [e.position, e.event.id])).toEqual(
      stored.map((row) => [row.position, row.event.id]),
    );
    // The relay gives its objects up: the log keeps them rather than copies.
    inLog.slice(1).forEach((entry, i) => {
      expect(entry.event).toBe(handed[i]?.event);
    });
    await rig.relay.stop();
    await rig.log.close();
    expect(rig.errors).toEqual([]);
  });

  it("reads from the outbox what the log refuses as handed over", async () => {
    const rig = await handOverRig();
    const [committed] = await rig.commit([taskEvent("ws_h", "task_bad")]);
    // A writer's bug: the handed event is not the stored one (no sequence).
    const wrong = clone(EventSchema, committed?.event as Event);
    wrong.sequence = 0n;
    rig.relay.kick([{ event: wrong, position: committed?.position as bigint }]);
    await eventually(async () =>
      (await rig.log.read({ filter: { workspaceId: "ws_h" } })).some(
        (e) => e.event.id === committed?.event.id,
      ),
    );
    const inLog = await rig.log.read({ filter: { workspaceId: "ws_h" } });
    expect(inLog.at(-1)).toEqual({ position: committed?.position, event: committed?.event });
    // The refusal was reported once; the round after it read the row.
    expect(rig.errors).toHaveLength(1);
    expect(rig.errors[0]).toMatchObject({ reason: "invalid_request" });
    await rig.relay.stop();
    await rig.log.close();
  });

  it("reads from the outbox what continues the cursor but was not handed over, rolled-back positions included", async () => {
    const rig = await handOverRig();
    // Committed without a hand-over (a writer that only kicks, or none).
    const quiet = await rig.commit([taskEvent("ws_h", "task_q")]);
    // A rollback uses up a position.
    await database.kysely
      .transaction()
      .execute(async (trx) => {
        await appendToOutbox(trx, rig.schema, [taskEvent("ws_h", "task_r")]);
        throw new Error("roll back");
      })
      .catch(() => undefined);
    const handed = await rig.commit([taskEvent("ws_h", "task_h")]);
    expect(handed[0]?.position).toBe((quiet[0]?.position ?? 0n) + 2n);
    rig.relay.kick(handed);
    await rig.arrived(3);
    expect(rig.received.slice(1).map((e) => [e.position, e.event.id])).toEqual([
      [quiet[0]?.position, quiet[0]?.event.id],
      [handed[0]?.position, handed[0]?.event.id],
    ]);
    // Read back, not handed over: the row's decoded copy, equal to the writer's.
    expect(rig.received[2]?.event).not.toBe(handed[0]?.event);
    expect(rig.received[2]?.event).toEqual(handed[0]?.event);
    // Rows handed over again after they were published are passed over; the
    // new ones behind them continue the cursor and are taken.
    const after = await rig.commit([taskEvent("ws_h", "task_z")]);
    rig.relay.kick([...quiet, ...handed, ...after]);
    await rig.arrived(4);
    expect(rig.received).toHaveLength(4);
    expect(rig.received[3]?.event).toBe(after[0]?.event);
    await rig.relay.stop();
    await rig.log.close();
    expect(rig.errors).toEqual([]);
  });
});
