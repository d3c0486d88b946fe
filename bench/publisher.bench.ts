/**
 * Publisher benchmark: what does it cost to move N committed events to the
 * event log — the journal's publisher (`createPublisher`) against today's
 * outbox relay (`createOutboxRelay`)?
 *
 * N events as turn steps, 3 events per step, 16 sessions, sequences per
 * task, each step one write by one of 32 writers: to the journal (its
 * events plus one step record, passed over by the publisher) or through an
 * outbox unit of work (`createOutboxWriter`, which hands its committed rows
 * to the relay). Each window uses a fresh schema and measures until the log
 * holds all N: CPU of this process (kysely, pg or PGlite, decoding, the log
 * client) plus, on Postgres, the server backends serving it. nats-server's
 * CPU is left out: it is shared with everyone on the machine.
 *
 * - `backlog`: the N events are written first (not measured), then the
 *   publisher or relay starts: the cost of publishing alone;
 * - `live`: the publisher or relay runs while the 32 writers write: writing
 *   plus publishing, as a turn's events take it today and would take it.
 *
 * Each runs as its mode would:
 *
 * - `pglite + in-process`: embedded mode — the relay with
 *   `logRebuiltFromOutbox` + `positionedLog`, the publisher with
 *   `positionedLog` (journal positions);
 * - `postgres + jetstream`: the mesh — the relay marking after append, the
 *   publisher appending to JetStream (a fresh stream per window).
 *
 * Run: `npm run bench -- publisher` or `npx tsx bench/publisher.bench.ts`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { clone, create, toBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import {
  type AppendResult,
  connectNats,
  type EventLog,
  InProcessEventLog,
  JetStreamEventLog,
  type LoggedEvent,
} from "@trellis/eventlog";
import {
  createDatabase,
  createJournal,
  createOutboxRelay,
  createOutboxWriter,
  createPublisher,
  type Database,
  type JournalEntry,
  journalMigrations,
  migrate,
  openPGlite,
  outboxMigrations,
} from "@trellis/storage";
import { deleteTestStreams, testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import { sql } from "kysely";
import { cpuMs } from "./lib/proc.js";

/** Options of {@link runPublisherBench}. */
export interface PublisherBenchOptions {
  /** Events per window (default 6,000). */
  events?: number;
  /** Windows per mode (default 3; the median is reported). */
  rounds?: number;
  databaseUrl?: string;
  /** Default both. */
  scenarios?: readonly PublisherBenchPoint["scenario"][];
}

/** One measured point. */
export interface PublisherBenchPoint {
  backend: string;
  /** `backlog`: drain N events written before; `live`: 32 writers write N events while it publishes. */
  scenario: "backlog" | "live";
  mode: "publisher" | "outbox relay";
  events: number;
  eventsPerSecond: number;
  /** CPU of this process per event (ms); `live` includes writing the events. */
  clientCpuMs: number;
  /** CPU of the Postgres backends per event (ms; 0 on PGlite). */
  serverCpuMs: number;
}

const STEP_EVENTS = 3;
const SESSIONS = 16;

interface Backend {
  name: string;
  database: Database;
  serverPids(): Promise<number[]>;
  /** A fresh, empty log; `positioned` when it takes the publisher's positions. */
  openLog(): Promise<{ log: EventLog; positioned?: InProcessEventLog; close(): Promise<void> }>;
  close(): Promise<void>;
}

async function openBackends(url: string | undefined): Promise<Backend[]> {
  const backends: Backend[] = [];
  const dir = mkdtempSync(join(tmpdir(), "trellis-publisher-bench-"));
  const pglite = await openPGlite({ dataDir: dir });
  const embedded = await createDatabase({ kind: "pglite", pglite });
  backends.push({
    name: "pglite + in-process",
    database: embedded,
    serverPids: async () => [],
    async openLog() {
      const log = new InProcessEventLog();
      return { log, positioned: log, close: () => log.close() };
    },
    async close() {
      await embedded.close();
      await pglite.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
  try {
    const { createTestDatabase } = await import("@trellis/testkit");
    process.env.TRELLIS_TEST_DATABASE_URL ??= url ?? "postgres://postgres@127.0.0.1:5432/postgres";
    const test = await createTestDatabase("trellis_bench_publisher");
    const database = await createDatabase({
      kind: "postgres",
      url: test.url,
      applicationName: "trellis_publisher_bench",
      poolSize: 10,
    });
    await database.ping();
    const connection = await connectNats({ servers: testNatsUrl, name: "publisher-bench" });
    const prefixes: string[] = [];
    backends.push({
      name: "postgres + jetstream",
      database,
      async serverPids() {
        const rows = await sql<{ pid: number }>`
          select pid from pg_stat_activity where application_name = 'trellis_publisher_bench'`.execute(
          database.kysely,
        );
        return rows.rows.map((r) => Number(r.pid));
      },
      async openLog() {
        const prefix = `pbench_${uniqueSuffix()}`;
        prefixes.push(prefix);
        const log = await JetStreamEventLog.open({ connection, prefix, storage: "file" });
        return {
          log,
          async close() {
            await log.close();
            await deleteTestStreams(prefix);
          },
        };
      },
      async close() {
        await connection.close();
        await database.close();
        await test.drop();
      },
    });
  } catch (error) {
    console.warn(`publisher bench: no PostgreSQL or NATS (${String(error)}); PGlite only`);
  }
  return backends;
}

/** The backlog's events, step by step (sequences per task, as an owner assigns them). */
function steps(events: number, workspaceId: string): Event[][] {
  const out: Event[][] = [];
  const sequences = new Map<string, bigint>();
  for (let s = 0; s * STEP_EVENTS < events; s++) {
    const session = `ses_${s % SESSIONS}`;
    const task = `task_${s % (SESSIONS * 4)}`;
    out.push(
      Array.from({ length: Math.min(STEP_EVENTS, events - s * STEP_EVENTS) }, (_, i) => {
        const sequence = (sequences.get(task) ?? 0n) + 1n;
        sequences.set(task, sequence);
        return create(EventSchema, {
          id: `evt_${workspaceId}_${s}_${i}`,
          kind: "task.working",
          workspaceId,
          sessionId: session,
          resource: create(ResourceRefSchema, { object: "task", id: task }),
          sequence,
        });
      }),
    );
  }
  return out;
}

async function window(
  backend: Backend,
  scenario: PublisherBenchPoint["scenario"],
  mode: PublisherBenchPoint["mode"],
  events: number,
): Promise<Omit<PublisherBenchPoint, "backend" | "scenario" | "mode" | "events">> {
  const { database } = backend;
  const schema = `pb_${uniqueSuffix()}`.toLowerCase();
  await migrate(database, {
    schema,
    migrations: { ...outboxMigrations(schema), ...journalMigrations(schema) },
  });
  const workspaceId = `ws_${uniqueSuffix()}`;
  const backlog = steps(events, workspaceId);
  const journal = createJournal(database, { schema });
  const { log, positioned, close } = await backend.openLog();
  let stored = 0;
  let finished: (() => void) | undefined;
  const done = new Promise<void>((resolve) => {
    finished = resolve;
  });
  const count = (results: AppendResult[]): AppendResult[] => {
    for (const result of results) if (!result.duplicate) stored++;
    if (stored >= events) finished?.();
    return results;
  };
  const counted: Pick<EventLog, "append"> = {
    append: async (batch) => count(await log.append(batch)),
  };
  const countedPositioned = positioned && {
    appendLogged: async (batch: readonly LoggedEvent[], options?: { adopt?: boolean }) =>
      count(await positioned.appendLogged(batch, options)),
  };
  const relay =
    mode === "outbox relay"
      ? createOutboxRelay({
          database,
          schema,
          eventLog: counted,
          ...(countedPositioned
            ? { logRebuiltFromOutbox: true, positionedLog: countedPositioned, listen: false }
            : {}),
        })
      : undefined;
  const writer = createOutboxWriter({ schema, ...(relay ? { relay } : {}) });
  // One turn step: its events (and, in the journal, its step record) in one write.
  const write = async (s: number): Promise<void> => {
    const step = backlog[s] as Event[];
    if (mode === "publisher") {
      const entries: JournalEntry[] = step.map((event) => ({
        stream: event.sessionId,
        kind: event.kind,
        body: toBinary(EventSchema, event),
      }));
      entries.push({ stream: `ses_${s % SESSIONS}`, kind: "tasks.step.finished", body: STEP });
      await journal.append(entries);
    } else {
      // The outbox assigns sequences itself.
      await writer.transaction(database.kysely, async (unit) =>
        unit.add(
          step.map((event) => Object.assign(clone(EventSchema, event), { sequence: 0n })),
          { adopt: true },
        ),
      );
    }
  };
  const writeAll = async (): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        for (let s = next++; s < backlog.length; s = next++) await write(s);
      }),
    );
  };
  if (scenario === "backlog") await writeAll();

  const pids = await backend.serverPids();
  const server0 = cpuOf(pids);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  let stop: () => Promise<void>;
  if (mode === "publisher") {
    const publisher = await createPublisher({
      database,
      schema,
      name: "events",
      journal,
      log: counted,
      ...(countedPositioned ? { positionedLog: countedPositioned } : {}),
      isEvent: (record) => !record.kind.startsWith("tasks.step."),
    });
    stop = () => publisher.stop();
  } else {
    relay?.start();
    stop = async () => relay?.stop();
  }
  if (scenario === "live") await writeAll();
  await done;
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  const server1 = cpuOf([...new Set([...pids, ...(await backend.serverPids())])]);
  await stop();
  await journal.close();
  await close();
  await sql`drop schema ${sql.id(schema)} cascade`.execute(database.kysely);
  let server = 0;
  for (const [pid, ms] of server1) server += ms - (server0.get(pid) ?? 0);
  return {
    eventsPerSecond: (events * 1000) / elapsed,
    clientCpuMs: (cpu.user + cpu.system) / 1000 / events,
    serverCpuMs: server / events,
  };
}

const STEP = new TextEncoder().encode("a step record".repeat(20));

function cpuOf(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuMs(pid));
    } catch {
      // exited
    }
  }
  return out;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Runs the publisher benchmark (see the module comment). */
export async function runPublisherBench(
  options: PublisherBenchOptions = {},
): Promise<PublisherBenchPoint[]> {
  const events = options.events ?? 6000;
  const rounds = options.rounds ?? 3;
  const modes = ["publisher", "outbox relay"] as const;
  const scenarios = options.scenarios ?? (["backlog", "live"] as const);
  const points: PublisherBenchPoint[] = [];
  for (const backend of await openBackends(options.databaseUrl)) {
    try {
      // A throwaway window each first (JIT, caches); then the modes alternate.
      for (const mode of modes) await window(backend, "backlog", mode, Math.min(events, 1000));
      for (const scenario of scenarios) {
        const windows = new Map<string, Awaited<ReturnType<typeof window>>[]>();
        for (let r = 0; r < rounds; r++) {
          for (const mode of modes) {
            const list = windows.get(mode) ?? [];
            list.push(await window(backend, scenario, mode, events));
            windows.set(mode, list);
          }
        }
        for (const mode of modes) {
          const list = windows.get(mode) ?? [];
          points.push({
            backend: backend.name,
            scenario,
            mode,
            events,
            eventsPerSecond: median(list.map((w) => w.eventsPerSecond)),
            clientCpuMs: median(list.map((w) => w.clientCpuMs)),
            serverCpuMs: median(list.map((w) => w.serverCpuMs)),
          });
        }
      }
    } finally {
      await backend.close();
    }
  }
  return points;
}

/** The points as the table `npm run bench` prints. */
export function formatPublisherBench(points: readonly PublisherBenchPoint[]): string {
  const header = [
    "backend             ",
    "scenario",
    "mode        ",
    "events/s",
    "client CPU ms/event",
    "server CPU ms/event",
  ];
  const rows = points.map((p) => [
    p.backend.padEnd(20),
    p.scenario.padEnd(8),
    p.mode.padEnd(12),
    p.eventsPerSecond.toFixed(0).padStart(8),
    p.clientCpuMs.toFixed(4).padStart(19),
    p.serverCpuMs.toFixed(4).padStart(19),
  ]);
  return [
    `publisher bench: ${points[0]?.events ?? "?"} events to the log per window (backlog: publishing only; live: 32 writers + publishing); median of windows`,
    ...[header, ...rows].map((cells) => cells.join("  ")),
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatPublisherBench(await runPublisherBench()));
  process.exit(0);
}
