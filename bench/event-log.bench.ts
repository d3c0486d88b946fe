/**
 * Event log benchmark: what does the EventLog port cost over raw JetStream?
 *
 * (a) raw: `js.publish` of an equivalent protobuf Event (~256 B), awaited one
 *     by one, no headers;
 * (b) port: `JetStreamEventLog.append([event])` awaited one by one (msg id,
 *     per-resource sequence check, traceparent) while a live `subscribe`
 *     receives every event; a round ends when the subscriber has the last one.
 *
 * Rounds alternate (a, b, a, b, …) after a warmup so drift hits both alike;
 * the result is the median per-event cost of each and their ratio (target:
 * port ≤ 1.5 × raw). Run: `npx tsx bench/event-log.bench.ts` (NATS at
 * TRELLIS_TEST_NATS_URL or nats://127.0.0.1:4222).
 */
import { pathToFileURL } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type Event, EventSchema } from "@trellis/contracts/core";
import { connectNats, JetStreamEventLog, type LoggedEvent } from "@trellis/eventlog";

/** Options of {@link runEventLogBench}. */
export interface BenchOptions {
  servers?: string;
  /** Measured rounds per variant (default 5). */
  rounds?: number;
  /** Events per round (default 2000). */
  eventsPerRound?: number;
  /** Events per variant before measuring (default 1000). */
  warmup?: number;
}

/** Per-event cost of one variant, in microseconds. */
export interface VariantResult {
  /** Median over rounds of (round time / events). */
  medianUsPerOp: number;
  /** Each round's per-event cost. */
  roundsUsPerOp: number[];
  opsPerSecond: number;
}

/** What {@link runEventLogBench} measured. */
export interface BenchResult {
  messageBytes: number;
  eventsPerRound: number;
  rounds: number;
  raw: VariantResult;
  port: VariantResult;
  /** port / raw median: 1.0 = no overhead. */
  ratio: number;
  /** Overhead of the port over raw, in percent. */
  overheadPercent: number;
}

const TRACE = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };

function benchEvent(i: number, workspaceId: string): Event {
  return create(EventSchema, {
    id: `evt_bench_${workspaceId}_${i}`,
    kind: "task.progress",
    workspaceId,
    sessionId: "ses_bench_0001",
    taskId: "task_bench_0001",
    resource: { object: "task", id: "task_bench_0001" },
    createdAt: { seconds: 1_760_000_000n, nanos: 0 },
    ...TRACE,
    actor: { id: "agent_bench", kind: 2, displayName: "bench agent" },
    payload: {
      kind: { case: "data", value: { note: "ok", step: i, phase: "tool_call" } },
    },
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function variant(roundsUsPerOp: number[]): VariantResult {
  const medianUsPerOp = median(roundsUsPerOp);
  return { medianUsPerOp, roundsUsPerOp, opsPerSecond: 1e6 / medianUsPerOp };
}

/** Run the benchmark against a NATS server; streams it creates are deleted afterwards. */
export async function runEventLogBench(options: BenchOptions = {}): Promise<BenchResult> {
  const servers = options.servers ?? process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222";
  const rounds = options.rounds ?? 5;
  const perRound = options.eventsPerRound ?? 2000;
  const warmup = options.warmup ?? 1000;
  const tag = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const prefix = `bench_${tag}`;
  const rawStream = `BENCH_RAW_${tag}`.toUpperCase();

  const nc = await connectNats({ servers, name: "eventlog-bench" });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  // Same storage settings as the event log's stream, so only the port differs.
  await jsm.streams.add({
    name: rawStream,
    subjects: [`${prefix}_raw.>`],
    storage: "file",
    allow_direct: true,
  });
  const log = await JetStreamEventLog.open({ connection: nc, prefix });

  const rawSubject = `${prefix}_raw.events.ws.ses.task.task_bench_0001`;
  let rawCounter = 0;
  const rawRound = async (n: number): Promise<number> => {
    // Encoding is part of both paths: the port encodes too.
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      await js.publish(rawSubject, toBinary(EventSchema, benchEvent(rawCounter++, "raw")));
    }
    return performance.now() - start;
  };

  let portCounter = 0;
  const workspaceId = "ws_bench";
  const subscriber = log.subscribe({ filter: { workspaceId } })[Symbol.asyncIterator]();
  const portRound = async (n: number): Promise<number> => {
    const first = portCounter;
    const last = `evt_bench_${workspaceId}_${first + n - 1}`;
    const start = performance.now();
    const received = (async () => {
      for (;;) {
        const next: IteratorResult<LoggedEvent> = await subscriber.next();
        if (next.done) throw new Error("subscription ended");
        if (next.value.event.id === last) return;
      }
    })();
    for (let i = 0; i < n; i++) await log.append([benchEvent(portCounter++, workspaceId)]);
    await received;
    return performance.now() - start;
  };

  const messageBytes = toBinary(EventSchema, benchEvent(0, workspaceId)).byteLength;
  try {
    await rawRound(warmup);
    await portRound(warmup);
    const raw: number[] = [];
    const port: number[] = [];
    for (let r = 0; r < rounds; r++) {
      raw.push(((await rawRound(perRound)) * 1000) / perRound);
      port.push(((await portRound(perRound)) * 1000) / perRound);
    }
    const rawResult = variant(raw);
    const portResult = variant(port);
    const ratio = portResult.medianUsPerOp / rawResult.medianUsPerOp;
    return {
      messageBytes,
      eventsPerRound: perRound,
      rounds,
      raw: rawResult,
      port: portResult,
      ratio,
      overheadPercent: (ratio - 1) * 100,
    };
  } finally {
    await subscriber.return?.();
    await log.close();
    await jsm.streams.delete(rawStream).catch(() => false);
    await jsm.streams.delete(log.streamName).catch(() => false);
    await nc.close();
  }
}

export function formatEventLogBench(result: BenchResult): string {
  const f = (n: number) => n.toFixed(1).padStart(7);
  const line = (name: string, v: VariantResult) =>
    `${name.padEnd(44)} ${f(v.medianUsPerOp)} µs/op  ${Math.round(v.opsPerSecond).toString().padStart(6)} ops/s  rounds: ${v.roundsUsPerOp.map((x) => x.toFixed(1)).join(" ")}`;
  return [
    `event-log bench: ${result.rounds} × ${result.eventsPerRound} events of ${result.messageBytes} B (median of rounds)`,
    line("(a) raw JetStream publish, awaited", result.raw),
    line("(b) JetStreamEventLog append + live delivery", result.port),
    `ratio (b)/(a): ${result.ratio.toFixed(2)}  (overhead ${result.overheadPercent.toFixed(0)} %, target ≤ 50 %)`,
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await runEventLogBench();
  console.log(formatEventLogBench(result));
}
