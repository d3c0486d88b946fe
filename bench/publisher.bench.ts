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
  createJournal,
  createOutboxRelay,
  createOutboxWriter,
  createPublisher,
  type JournalEntry,
  journalMigrations,
  migrate,
  outboxMigrations,
} from "@trellis/storage";
import { deleteTestStreams, testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import { sql } from "kysely";
import { type BenchDatabase, cpuByPid, cpuSince, openBenchDatabases } from "./lib/databases.js";
import { alternatingMedians } from "./lib/windows.js";

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

interface Backend extends Omit<BenchDatabase, "name"> {
  name: string;
  /** A fresh, empty log; `positioned` when it takes the publisher's positions. */
  openLog(): Promise<{ log: EventLog; positioned?: InProcessEventLog; close(): Promise<void> }>;
}

/** PGlite with an in-process log; PostgreSQL with JetStream when both answer. */
async function openBackends(url: string | undefined): Promise<Backend[]> {
  const backends: Backend[] = [];
  for (const db of await openBenchDatabases({
    bench: "publisher",
    poolSize: 10,
    databaseUrl: url,
  })) {
    if (db.name === "pglite") {
      backends.push({
        ...db,
        name: "pglite + in-process",
        async openLog() {
          const log = new InProcessEventLog();
          return { log, positioned: log, close: () => log.close() };
        },
      });
      continue;
    }
    let connection: Awaited<ReturnType<typeof connectNats>>;
    try {
      connection = await connectNats({ servers: testNatsUrl, name: "publisher-bench" });
    } catch (error) {
      console.warn(`publisher bench: no NATS (${String(error)}); PGlite only`);
      await db.close();
      continue;
    }
    backends.push({
      ...db,
      name: "postgres + jetstream",
      async openLog() {
        const prefix = `pbench_${uniqueSuffix()}`;
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
        await db.close();
      },
    });
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
    get lastPosition() {
      return positioned.lastPosition;
    },
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
  const server0 = cpuByPid(pids);
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
  const server1 = cpuByPid([...new Set([...pids, ...(await backend.serverPids())])]);
  await stop();
  await journal.close();
  await close();
  await sql`drop schema ${sql.id(schema)} cascade`.execute(database.kysely);
  const server = cpuSince(server0, server1);
  return {
    eventsPerSecond: (events * 1000) / elapsed,
    clientCpuMs: (cpu.user + cpu.system) / 1000 / events,
    serverCpuMs: server / events,
  };
}

const STEP = new TextEncoder().encode("a step record".repeat(20));

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
        const measured = await alternatingMedians(modes, rounds, (mode) =>
          window(backend, scenario, mode, events),
        );
        for (const { mode, point } of measured) {
          points.push({ backend: backend.name, scenario, mode, events, ...point });
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
