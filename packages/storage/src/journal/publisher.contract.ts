/**
 * The publisher contract: what `createPublisher` and `pruneJournal`
 * promise, run on PGlite + the in-process log (embedded mode) and on
 * PostgreSQL + JetStream (the mesh), with real servers and unique names.
 *
 * @example
 *   describePublisherContract("pglite + in-process", inProcessPublisherTarget);
 *
 * Each test has its own journal schema and its own workspace in the log.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  type Event,
  EventPayloadSchema,
  EventSchema,
  ResourceRefSchema,
} from "@trellis/contracts/core";
import { type EventLog, type LoggedEvent, MAX_EVENT_BYTES } from "@trellis/eventlog";
import { TrellisError } from "@trellis/runtime";
import { eventually, uniqueName } from "@trellis/testkit";
import { sql } from "kysely";
import { describe, expect, it } from "vitest";
import { openContractBackend } from "../contract/support.js";
import { migrate } from "../migrate.js";
import { DEAD_LETTER_KIND, type DeadLetter } from "../outbox/dead-letter.js";
import type { StorageContractTarget } from "../storage.contract.js";
import { memoryMeter } from "../testing/memory-meter.js";
import type { PublisherCrashConfig } from "../testing/publisher-crash-child.js";
import { createJournal, type Journal, type JournalEntry } from "./journal.js";
import { readJournal } from "./journal-read.js";
import { pruneJournal } from "./journal-retention.js";
import { journalMigrations } from "./journal-schema.js";
import { projectorHealth } from "./projector-health.js";
import {
  createPublisher,
  type PositionedLog,
  type Publisher,
  type PublisherOptions,
  publisherDeadLetterMetric,
} from "./publisher.js";

/** One log under test, fresh per test. */
export interface PublisherLogHandle {
  log: EventLog;
  /** Set when the log takes journal positions (in-process). */
  positioned?: PositionedLog;
  /** How a child process reaches this log (JetStream); crash tests are skipped without it. */
  child?: PublisherCrashConfig["nats"];
  dispose(): Promise<void>;
}

/** A backend pair: the database and the log. */
export interface PublisherContractTarget {
  storage(): Promise<StorageContractTarget>;
  openLog(): Promise<PublisherLogHandle>;
}

const STEP = "tasks.step.finished";
const isEvent = (record: { kind: string }) => !record.kind.startsWith("tasks.step.");

let counter = 0;
/** An event of `task` with the next sequence of that task (sequences assigned by the "owner"). */
function eventOf(
  workspaceId: string,
  task: string,
  sequence: number,
  extra: Partial<Omit<Event, "$typeName">> = {},
): Event {
  counter++;
  const event = create(EventSchema, {
    id: `evt_${workspaceId}_${task}_${sequence}_${counter}`,
    kind: "task.working",
    workspaceId,
    sessionId: "ses_1",
    resource: create(ResourceRefSchema, { object: "task", id: task }),
    sequence: BigInt(sequence),
  });
  return Object.assign(event, extra);
}
const entryOf = (event: Event): JournalEntry => ({
  stream: event.sessionId || "ses_1",
  kind: event.kind,
  body: toBinary(EventSchema, event),
});
const stepRecord = (n: number): JournalEntry => ({
  stream: "ses_1",
  kind: STEP,
  body: new TextEncoder().encode(`step ${n}`),
});

/** Registers the publisher contract suite for one backend pair. */
export function describePublisherContract(name: string, target: PublisherContractTarget): void {
  describe(`publisher contract: ${name}`, () => {
    const journals: Journal[] = [];
    const publishers: Publisher[] = [];
    const logs: PublisherLogHandle[] = [];
    const backend = openContractBackend(() => target.storage(), {
      async release() {
        await Promise.all(publishers.map((p) => p.stop()));
        await Promise.all(journals.map((j) => j.close()));
        await Promise.all(logs.map((l) => l.dispose()));
      },
      // Opening PGlite (WebAssembly) took over 60 s on the loaded 2-core box.
      timeoutMs: 180_000,
    });

    const setup = async () => {
      const schema = await backend.freshSchema("pub", journalMigrations);
      const journal = createJournal(backend.database, { schema });
      journals.push(journal);
      const handle = await target.openLog();
      logs.push(handle);
      const workspaceId = uniqueName("ws");
      return { schema, journal, handle, workspaceId };
    };
    type Setup = Awaited<ReturnType<typeof setup>>;

    const start = async (
      { schema, journal, handle }: Setup,
      options: Partial<PublisherOptions<unknown>> = {},
    ): Promise<Publisher> => {
      const publisher = await createPublisher({
        database: backend.database,
        schema,
        name: "events",
        journal,
        log: handle.log,
        ...(handle.positioned ? { positionedLog: handle.positioned } : {}),
        isEvent,
        retryMs: 5,
        maxRetryMs: 50,
        onError: () => {},
        onDeadLetter: () => {},
        ...options,
      });
      publishers.push(publisher);
      return publisher;
    };

    /**
     * The log of `s` (and its positioned side, where it has one), throwing
     * what `refusal` returns for a batch instead of appending it.
     */
    const refusingLogs = (
      s: Setup,
      refusal: (batch: readonly Event[]) => Error | undefined,
    ): Pick<PublisherOptions<unknown>, "log" | "positionedLog"> => {
      const positioned = s.handle.positioned;
      return {
        log: {
          append: async (batch) => {
            const error = refusal(batch);
            if (error) throw error;
            return s.handle.log.append(batch);
          },
        },
        ...(positioned
          ? {
              positionedLog: {
                appendLogged: async (batch, options) => {
                  const error = refusal(batch.map((logged) => logged.event));
                  if (error) throw error;
                  return positioned.appendLogged(batch, options);
                },
              },
            }
          : {}),
      };
    };

    /** What a consumer reading the workspace from the start sees. */
    const seen = async (log: EventLog, workspaceId: string): Promise<LoggedEvent[]> =>
      log.read({ filter: { workspaceId }, limit: 10_000 });

    const appendEvents = async (journal: Journal, events: Event[], steps = true) => {
      const entries: JournalEntry[] = [];
      events.forEach((event, i) => {
        entries.push(entryOf(event));
        if (steps && i % 3 === 2) entries.push(stepRecord(i));
      });
      const { positions } = await journal.append(entries);
      return positions[positions.length - 1] as bigint;
    };

    /**
     * Every event once, each resource's events in their sequence order. The
     * in-process log keeps journal order across resources too (it takes
     * journal positions); JetStream appends different resources of a batch
     * in parallel, so across resources its order is the log's. Returns what
     * the workspace's log holds.
     */
    const expectOnce = async (s: Setup, events: Event[]): Promise<LoggedEvent[]> => {
      const logged = await seen(s.handle.log, s.workspaceId);
      const ids = logged.map((l) => l.event.id);
      expect(new Set(ids).size).toBe(ids.length);
      if (s.handle.positioned) expect(ids).toEqual(events.map((e) => e.id));
      else expect([...ids].sort()).toEqual(events.map((e) => e.id).sort());
      const byResource = (list: Event[]) => {
        const map = new Map<string, string[]>();
        for (const e of list) {
          const key = `${e.resource?.object}/${e.resource?.id}`;
          map.set(key, [...(map.get(key) ?? []), `${e.id}@${e.sequence}`]);
        }
        return map;
      };
      expect(byResource(logged.map((l) => l.event))).toEqual(byResource(events));
      return logged;
    };

    it("publishes the journal's events in position order and passes over step records", async () => {
      const s = await setup();
      const publisher = await start(s);
      const events = Array.from({ length: 12 }, (_, i) =>
        eventOf(s.workspaceId, `task_${i % 3}`, Math.floor(i / 3) + 1),
      );
      const last = await appendEvents(s.journal, events.slice(0, 6));
      await publisher.waitFor(last, { timeoutMs: 30_000 });
      const last2 = await appendEvents(s.journal, events.slice(6));
      await publisher.waitFor(last2, { timeoutMs: 30_000 });
      const logged = await expectOnce(s, events);
      const stats = publisher.stats();
      expect(stats.passed).toBe(4);
      expect(stats.published).toBe(12);
      expect(stats.deadLetters).toBe(0);
      if (s.handle.positioned) {
        // Embedded: the log's positions are the journal's.
        const journal = await readJournal(backend.database.kysely, s.schema, { limit: 100 });
        const positions = new Map(journal.map((r) => [r.position, r.kind]));
        for (const l of logged) expect(positions.get(l.position)).toBe(l.event.kind);
      }
      expect(publisher.status()).toMatchObject({ lag: 0n, failures: 0, running: true });
    });

    it("resumes from its durable position: a new instance publishes only what is new", async () => {
      const s = await setup();
      const first = await start(s);
      const events = Array.from({ length: 6 }, (_, i) => eventOf(s.workspaceId, "task_a", i + 1));
      await first.waitFor(await appendEvents(s.journal, events.slice(0, 3)), {
        timeoutMs: 30_000,
      });
      await first.stop();
      await appendEvents(s.journal, events.slice(3));
      const second = await start(s);
      await second.waitFor(s.journal.head(), { timeoutMs: 30_000 });
      await expectOnce(s, events);
      expect(second.stats()).toMatchObject({ published: 3, duplicates: 0 });
    });

    it("wakes on a NOTIFY from a journal in another process, without polling", async () => {
      const s = await setup();
      const elsewhere = createJournal(await backend.target.open(), {
        schema: s.schema,
        notify: true,
      });
      journals.push(elsewhere);
      // No in-process journal to wake it, no poll to speak of.
      const publisher = await start(s, {
        journal: undefined,
        listen: true,
        pollIntervalMs: 600_000,
      });
      const events = Array.from({ length: 3 }, (_, i) => eventOf(s.workspaceId, "task_n", i + 1));
      await appendEvents(elsewhere, events);
      // Not waitFor (it would wake the publisher itself): only the NOTIFY can.
      await eventually(async () => (await seen(s.handle.log, s.workspaceId)).length === 3, {
        timeoutMs: 30_000,
        what: "the events in the log",
      });
      await expectOnce(s, events);
      expect(publisher.stats().published).toBe(3);
    });

    for (const crashAfter of ["half", "all"] as const) {
      it(`killed mid-batch (after ${crashAfter} of its events reached the log): restart publishes nothing twice, loses nothing`, async () => {
        const s = await setup();
        const events = Array.from({ length: 20 }, (_, i) =>
          eventOf(s.workspaceId, `task_${i % 4}`, Math.floor(i / 4) + 1),
        );
        const last = await appendEvents(s.journal, events);
        const reached = crashAfter === "half" ? 10 : 20;
        // The "process" dies inside the batch: the log took `reached`
        // events, the position never moved. It is stopped as killed.
        let died = false;
        const dying: Pick<EventLog, "append"> = {
          async append(batch) {
            if (died) throw crash;
            await s.handle.log.append(batch.slice(0, reached));
            died = true;
            throw crash;
          },
        };
        const positioned = s.handle.positioned;
        const crash = new Error("killed");
        const dyingPositioned: PositionedLog | undefined = positioned && {
          async appendLogged(batch, options) {
            if (died) throw crash;
            await positioned.appendLogged(batch.slice(0, reached), options);
            died = true;
            throw crash;
          },
        };
        const victim = await start(s, {
          log: dying,
          ...(dyingPositioned ? { positionedLog: dyingPositioned } : {}),
        });
        await eventually(() => died, { timeoutMs: 30_000, what: "the crash" });
        await victim.stop();
        expect(victim.position()).toBe(0n);
        expect((await seen(s.handle.log, s.workspaceId)).length).toBe(reached);

        const restarted = await start(s);
        await restarted.waitFor(last, { timeoutMs: 30_000 });
        await expectOnce(s, events);
        expect(restarted.stats()).toMatchObject({ published: 20, duplicates: reached });
      });
    }

    it("a poison event is dead-lettered and the events after it go out at once", async () => {
      const s = await setup();
      const metrics = memoryMeter();
      const dead: DeadLetter[] = [];
      const publisher = await start(s, {
        meter: metrics.meter,
        onDeadLetter: (d) => dead.push(d),
        // Retries would show as failures; a poison event must need none.
        retryMs: 60_000,
        maxRetryMs: 60_000,
      });
      const good1 = eventOf(s.workspaceId, "task_p", 1);
      const invalid = eventOf(s.workspaceId, "task_q", 1, { workspaceId: "" }); // no workspace: invalid
      const good2 = eventOf(s.workspaceId, "task_p", 2);
      const huge = eventOf(s.workspaceId, "task_p", 3, {
        payload: create(EventPayloadSchema, {
          kind: { case: "data", value: { text: "x".repeat(MAX_EVENT_BYTES) } },
        }),
      });
      const good3 = eventOf(s.workspaceId, "task_p", 4);
      const entries = [good1, invalid, good2, huge, good3].map(entryOf);
      entries.splice(2, 0, {
        stream: "ses_1",
        kind: "task.working",
        body: new Uint8Array([0xff, 0xff, 0xff]),
      });
      const { positions } = await s.journal.append(entries);
      await publisher.waitFor(positions.at(-1) as bigint, { timeoutMs: 30_000 });
      const logged = await seen(s.handle.log, s.workspaceId);
      expect(logged.map((l) => [l.event.id, l.event.kind])).toEqual([
        [good1.id, "task.working"],
        [good2.id, "task.working"],
        [huge.id, DEAD_LETTER_KIND],
        [good3.id, "task.working"],
      ]);
      // The stand-in keeps the resource's sequence gapless.
      expect(logged.map((l) => l.event.sequence)).toEqual([1n, 2n, 3n, 4n]);
      dead.sort((x, y) => (x.position < y.position ? -1 : 1));
      expect(dead.map((d) => [d.reason, d.eventId])).toEqual([
        ["invalid_request", invalid.id],
        ["undecodable", ""],
        ["payload_too_large", huge.id],
      ]);
      expect(publisher.status().failures).toBe(0);
      expect(await metrics.total(publisherDeadLetterMetric)).toBe(3);
      await metrics.shutdown();
    });

    it("waits out a log that is down (nothing dead-lettered), and health says so meanwhile", async () => {
      const s = await setup();
      let down = true;
      const unavailable = () =>
        new TrellisError({ reason: "service_unavailable", message: "log down (test)" });
      const dead: DeadLetter[] = [];
      const publisher = await start(s, {
        ...refusingLogs(s, () => (down ? unavailable() : undefined)),
        maxAttempts: 2,
        onDeadLetter: (d) => dead.push(d),
      });
      const events = Array.from({ length: 5 }, (_, i) => eventOf(s.workspaceId, "task_d", i + 1));
      const last = await appendEvents(s.journal, events);
      const health = projectorHealth(publisher, { maxFailures: 3 });
      await eventually(() => publisher.status().failures >= 5, { timeoutMs: 30_000 });
      expect(() => health.check(new AbortController().signal)).toThrow(/failing/);
      expect(publisher.status().lag).toBeGreaterThan(0n);
      down = false;
      await publisher.waitFor(last, { timeoutMs: 30_000 });
      await expectOnce(s, events);
      expect(dead).toEqual([]);
      expect(() => health.check(new AbortController().signal)).not.toThrow();
    });

    it("a row the log keeps refusing (conflict) is dead-lettered after maxAttempts, not stalled on", async () => {
      const s = await setup();
      const events = Array.from({ length: 4 }, (_, i) => eventOf(s.workspaceId, `task_${i}`, 1));
      const refused = events[1] as Event;
      const conflict = () =>
        new TrellisError({ reason: "conflict", message: "different history (test)" });
      const dead: DeadLetter[] = [];
      const publisher = await start(s, {
        ...refusingLogs(s, (batch) =>
          batch.some((e) => e.id === refused.id) ? conflict() : undefined,
        ),
        maxAttempts: 3,
        onDeadLetter: (d) => dead.push(d),
      });
      const last = await appendEvents(s.journal, events, false);
      await publisher.waitFor(last, { timeoutMs: 30_000 });
      const logged = await seen(s.handle.log, s.workspaceId);
      // The stand-in carries the refused id too, so it is refused as well: skipped.
      expect(logged.map((l) => l.event.id).sort()).toEqual(
        events
          .filter((e) => e !== refused)
          .map((e) => e.id)
          .sort(),
      );
      expect(dead.map((d) => [d.reason, d.eventId])).toEqual([["conflict", refused.id]]);
    });

    it("two instances with one name publish every event once", async () => {
      const s = await setup();
      const a = await start(s);
      const b = await start(s);
      const events = Array.from({ length: 60 }, (_, i) =>
        eventOf(s.workspaceId, `task_${i % 5}`, Math.floor(i / 5) + 1),
      );
      for (let i = 0; i < events.length; i += 10) {
        await appendEvents(s.journal, events.slice(i, i + 10));
        b.wake();
      }
      const head = s.journal.head();
      await a.waitFor(head, { timeoutMs: 30_000 });
      await b.waitFor(head, { timeoutMs: 30_000 });
      await expectOnce(s, events);
      expect(a.stats().duplicates + b.stats().duplicates).toBe(0);
      expect(a.stats().published + b.stats().published).toBe(60);
    });

    it("killed by SIGKILL inside a batch (child process): restart publishes nothing twice, loses nothing", async (ctx) => {
      const s = await setup();
      const nats = s.handle.child;
      if (backend.target.childConfig === undefined || nats === undefined) return ctx.skip();
      const events = Array.from({ length: 30 }, (_, i) =>
        eventOf(s.workspaceId, `task_${i % 3}`, Math.floor(i / 3) + 1),
      );
      const last = await appendEvents(s.journal, events);
      const config: PublisherCrashConfig = {
        database: backend.target.childConfig,
        schema: s.schema,
        nats,
        crashAfterEvents: 13,
      };
      const signal = await runChild(config);
      expect(signal).toBe("SIGKILL");
      const before = await seen(s.handle.log, s.workspaceId);
      expect(before.length).toBe(13);
      const position = await sql<{ position: bigint }>`
        select position from ${sql.id(s.schema, "journal_projection")} where name = 'events'`.execute(
        backend.database.kysely,
      );
      expect(BigInt(position.rows[0]?.position ?? 0n)).toBe(0n);
      const restarted = await start(s);
      await restarted.waitFor(last, { timeoutMs: 30_000 });
      await expectOnce(s, events);
      expect(restarted.stats()).toMatchObject({ published: 30, duplicates: 13 });
    }, 180_000); // a child process starting with tsx on a loaded 2-core box

    describe("pruneJournal", () => {
      it("deletes what every projector applied, keeps each stream's newest entry, never reuses positions", async () => {
        const schema = uniqueName("prune");
        await migrate(backend.database, { schema, migrations: journalMigrations(schema) });
        const journal = createJournal(backend.database, { schema });
        journals.push(journal);
        const text = new TextEncoder();
        const put = (stream: string, n: number) =>
          journal.append(
            Array.from({ length: n }, (_, i) => ({
              stream,
              kind: "k",
              body: text.encode(`${stream}${i}`),
            })),
          );
        // Without projectors nothing is applied: nothing goes.
        await put("a", 5); // 1-5
        await put("b", 2); // 6-7
        await put("a", 3); // 8-10
        expect((await pruneJournal(backend.database, { schema })).deleted).toBe(0);

        const positions = new Map<string, bigint>([
          ["fast", 10n],
          ["slow", 7n],
        ]);
        for (const [name, position] of positions) {
          await sql`insert into ${sql.id(schema, "journal_projection")} (name, position)
            values (${name}, ${position})`.execute(backend.database.kysely);
        }
        // Entries 1-7 applied by both. Kept of them: b's newest (7). 8-10 are above slow.
        const result = await pruneJournal(backend.database, { schema, chunk: 2 });
        expect(result).toEqual({ deleted: 6, lowest: 7n });
        const left = await readJournal(backend.database.kysely, schema, { limit: 100 });
        expect(left.map((r) => r.position)).toEqual([7n, 8n, 9n, 10n]);

        // Everything applied: the newest entry of each stream stays (a's is the journal's head).
        await sql`update ${sql.id(schema, "journal_projection")} set position = 10`.execute(
          backend.database.kysely,
        );
        expect((await pruneJournal(backend.database, { schema })).deleted).toBe(2);
        const kept = await readJournal(backend.database.kysely, schema, { limit: 100 });
        expect(kept.map((r) => [r.position, r.stream])).toEqual([
          [7n, "b"],
          [10n, "a"],
        ]);
        // Positions continue from the head; the fence of a pruned stream still holds.
        const next = await put("b", 1);
        expect(next.positions).toEqual([11n]);
        await expect(
          journal.append([{ stream: "a", kind: "k", body: text.encode("x") }], {
            expectedPosition: 10n,
          }),
        ).resolves.toMatchObject({ positions: [12n] });

        // keepSince: entries written since then stay although applied.
        await sql`update ${sql.id(schema, "journal_projection")} set position = 12`.execute(
          backend.database.kysely,
        );
        const since = new Date(Date.now() - 3_600_000);
        expect((await pruneJournal(backend.database, { schema, keepSince: since })).deleted).toBe(
          0,
        );
        expect((await pruneJournal(backend.database, { schema })).deleted).toBe(2);
      });
    });
  });
}

/** Runs the publisher crash child until it dies; resolves with its signal. */
function runChild(config: PublisherCrashConfig): Promise<NodeJS.Signals | null> {
  const childPath = fileURLToPath(new URL("../testing/publisher-crash-child.ts", import.meta.url));
  const packageDir = fileURLToPath(new URL("../..", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", childPath], {
      cwd: packageDir,
      env: { ...process.env, TRELLIS_PUBLISHER_CRASH: JSON.stringify(config) },
      stdio: ["ignore", "inherit", "inherit"],
    });
    child.on("error", reject);
    child.on("exit", (_code, signal) => resolve(signal));
  });
}
