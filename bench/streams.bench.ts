/**
 * Open streams benchmark: many concurrent event streams held open on the
 * gateway of embedded Trellis (`trellis dev` in its own process, with
 * `--expose-gc` and IPC; see ./lib/fanout-server.ts), half of them Harn SSE
 * (`GET /v1/sessions/{id}/events/stream`) and half WebSocket sessions
 * (`GET /v1/sessions/{id}/ws`), spread evenly over `sessions` sessions.
 *
 * The load generator (this process) opens the SSE streams, then the
 * WebSockets, `batch` at a time; an SSE stream counts as open when its
 * `: stream open` comment arrives, a WebSocket when its `replay_complete`
 * frame does. The server's memory (V8 heap after two full GCs, and process
 * RSS) is read before, after the SSE half and after the WebSocket half, so
 * memory per stream is reported for each kind. Then `messages` user messages
 * are appended to every session (`POST /v1/sessions/{id}/messages`); each
 * message's text carries its send time, and every stream records when the
 * event carrying it arrives. Reported: time to open, memory per stream,
 * delivery latency p50 / p99 / max, and deliveries lost (every stream must
 * receive every message of its session).
 *
 * Both processes need one descriptor per connection: the bench checks the
 * soft limit (`ulimit -n`) and refuses to start when `streams` cannot fit.
 */
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { freePort } from "@trellis/testkit";
import WebSocket from "ws";
import { gcMemory, startGcDev } from "./lib/gc-dev.js";
import { HARN_VERSION, harnRest } from "./lib/harn-rest.js";
import { quantile } from "./lib/load.js";
import { cpuMs, rssBytes, stopChild } from "./lib/proc.js";

const API_KEY = "trl_bench_streams_0123456789abcdefghijklmnopqrst";

/** Options of {@link runStreamsBench}. */
export interface StreamsBenchOptions {
  /** Total streams (half SSE, half WebSocket); default 10,000. */
  streams?: number;
  /** Sessions the streams are spread over; default 20. */
  sessions?: number;
  /** Messages appended to every session once all streams are open; default 3. */
  messages?: number;
  /** Pause between rounds of messages (one message to every session per round); default 3000 ms. */
  intervalMs?: number;
  /** Streams opened concurrently; default 200. */
  batch?: number;
}

/** Memory of the server at one point. */
export interface MemoryPoint {
  heapMb: number;
  rssMb: number;
}

/** What the benchmark measured. */
export interface StreamsBenchResult {
  requested: number;
  sse: number;
  ws: number;
  /** Streams open at once at the peak. */
  opened: number;
  /** Why fewer than requested were opened, if so. */
  shortfall?: string;
  sessions: number;
  messages: number;
  openSseMs: number;
  openWsMs: number;
  memory: { before: MemoryPoint; withSse: MemoryPoint; withAll: MemoryPoint; after: MemoryPoint };
  heapKbPerSse: number;
  heapKbPerWs: number;
  rssKbPerSse: number;
  rssKbPerWs: number;
  delivered: number;
  expected: number;
  /** Streams that missed at least one message. */
  streamsMissing: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  serverCpuMsPerDelivery: number;
  fdLimit: { soft: number; hard: number };
  loadBefore: number[];
  loadAfter: number[];
}

async function serverMemory(child: ChildProcess): Promise<MemoryPoint> {
  const usage = await gcMemory(child);
  return { heapMb: mb(usage.heapUsed), rssMb: mb(rssBytes(child.pid as number)) };
}

const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The soft and hard descriptor limits of this process (children inherit them). */
function fdLimits(): { soft: number; hard: number } {
  const limits = readFileSync("/proc/self/limits", "utf8");
  const line = /Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(limits);
  const n = (v: string | undefined) => (v === "unlimited" ? Number.POSITIVE_INFINITY : Number(v));
  return { soft: n(line?.[1]), hard: n(line?.[2]) };
}

/** An open stream, whichever kind. */
interface OpenStream {
  close(): void;
}

/** Per-stream record of the pings received (`received[n]` = latency of message n). */
type OnPing = (n: number, latencyMs: number) => void;

// The message text is JSON-escaped inside the event, digits and dots survive.
const pingPattern = /ping (\d+) ([\d.]+)/g;

function scanPings(text: string, now: number, onPing: OnPing): void {
  for (const match of text.matchAll(pingPattern)) {
    onPing(Number(match[1]), now - Number(match[2]));
  }
}

function openSse(
  agent: http.Agent,
  port: number,
  sessionId: string,
  onPing: OnPing,
): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      {
        agent,
        host: "127.0.0.1",
        port,
        path: `/v1/sessions/${sessionId}/events/stream`,
        headers: {
          authorization: `Bearer ${API_KEY}`,
          accept: "text/event-stream",
          "harn-agents-protocol-version": HARN_VERSION,
        },
      },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`SSE stream answered ${res.statusCode}`));
          res.resume();
          return;
        }
        res.setEncoding("utf8");
        let buffer = "";
        let opened = false;
        res.on("data", (chunk: string) => {
          const now = performance.now();
          buffer += chunk;
          const end = buffer.lastIndexOf("\n\n");
          if (end < 0) return;
          const frames = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!opened && frames.includes(": stream open")) {
            opened = true;
            resolve({ close: () => req.destroy() });
          }
          scanPings(frames, now, onPing);
        });
      },
    );
    req.on("error", reject);
  });
}

function openWs(port: number, sessionId: string, onPing: OnPing): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/sessions/${sessionId}/ws`, {
      headers: { authorization: `Bearer ${API_KEY}`, "harn-agents-protocol-version": HARN_VERSION },
    });
    let ready = false;
    ws.on("message", (data) => {
      const now = performance.now();
      const text = String(data);
      if (!ready && text.includes('"type":"replay_complete"')) {
        ready = true;
        resolve({ close: () => ws.terminate() });
      }
      scanPings(text, now, onPing);
    });
    ws.on("unexpected-response", (_req, res) =>
      reject(new Error(`WebSocket refused: ${res.statusCode}`)),
    );
    ws.on("error", reject);
  });
}

/** Run the benchmark once. */
export async function runStreamsBench(
  options: StreamsBenchOptions = {},
): Promise<StreamsBenchResult> {
  const requested = options.streams ?? 10_000;
  const sessionCount = options.sessions ?? 20;
  const messages = options.messages ?? 3;
  const intervalMs = options.intervalMs ?? 3000;
  const batch = options.batch ?? 200;
  const fdLimit = fdLimits();
  // Each process holds one descriptor per stream plus its own (PGlite, NATS-free
  // embedded mode, tsx, …); keep a margin of 500.
  if (requested + 500 > fdLimit.soft) {
    throw new Error(
      `${requested} streams need a descriptor limit above ${requested + 500} (soft ${fdLimit.soft}, hard ${fdLimit.hard}): raise it with ulimit -n`,
    );
  }
  const loadBefore = loadavg();
  const dataDir = await mkdtemp(join(tmpdir(), "trellis-bench-streams-"));
  const port = await freePort();
  const child = await startGcDev({ port, dataDir, apiKey: API_KEY });
  const pid = child.pid as number;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const open: OpenStream[] = [];
  try {
    const harn = harnRest(port, API_KEY);
    const personaId = await harn.okPersona("streams");
    const sessions: string[] = [];
    for (let i = 0; i < sessionCount; i++) sessions.push(await harn.newSession(personaId));
    const append = harn.appendUserText;

    // Warm both paths with one stream each, then take the baseline.
    const warm = [
      await openSse(agent, port, sessions[0]!, () => {}),
      await openWs(port, sessions[0]!, () => {}),
    ];
    await append(sessions[0]!, "warm-up");
    await sleep(500);
    for (const stream of warm) stream.close();
    await sleep(1000);
    const before = await serverMemory(child);

    const sseCount = Math.floor(requested / 2);
    const wsCount = requested - sseCount;
    // latencies[stream][message]; NaN = not received.
    const latencies: number[][] = [];
    const sessionOf: number[] = [];
    let shortfall: string | undefined;

    const openKind = async (kind: "sse" | "ws", count: number): Promise<number> => {
      const start = performance.now();
      for (let i = 0; i < count && shortfall === undefined; i += batch) {
        const settled = await Promise.allSettled(
          Array.from({ length: Math.min(batch, count - i) }, () => {
            const index = latencies.length;
            const session = index % sessionCount;
            const row = Array.from({ length: messages }, () => Number.NaN);
            latencies.push(row);
            sessionOf.push(session);
            const onPing: OnPing = (n, latency) => {
              if (n < messages && Number.isNaN(row[n])) row[n] = latency;
            };
            const sessionId = sessions[session]!;
            return kind === "sse"
              ? openSse(agent, port, sessionId, onPing)
              : openWs(port, sessionId, onPing);
          }),
        );
        for (const result of settled) {
          if (result.status === "fulfilled") open.push(result.value);
          else shortfall ??= `${kind} stream ${open.length + 1} failed: ${String(result.reason)}`;
        }
      }
      return performance.now() - start;
    };

    const openSseMs = await openKind("sse", sseCount);
    const sseOpened = open.length;
    await sleep(2000);
    const withSse = await serverMemory(child);
    const openWsMs = shortfall === undefined ? await openKind("ws", wsCount) : 0;
    const wsOpened = open.length - sseOpened;
    await sleep(2000);
    const withAll = await serverMemory(child);

    // Streams whose open failed never count as receivers.
    const live = open.length;
    const cpuBefore = cpuMs(pid);
    for (let n = 0; n < messages; n++) {
      await Promise.all(
        sessions.map((id) => append(id, `ping ${n} ${performance.now().toFixed(3)}`)),
      );
      await sleep(intervalMs);
    }
    const receivers = latencies
      .slice(0, sseOpened)
      .concat(latencies.slice(sseCount, sseCount + wsOpened));
    const deadline = performance.now() + 30_000;
    while (
      receivers.some((row) => row.some((v) => Number.isNaN(v))) &&
      performance.now() < deadline
    ) {
      await sleep(200);
    }
    const serverCpu = cpuMs(pid) - cpuBefore;
    const after = await serverMemory(child);
    const all = receivers
      .flat()
      .filter((v) => !Number.isNaN(v))
      .sort((a, b) => a - b);
    const perKb = (a: number, b: number, n: number) =>
      n === 0 ? Number.NaN : Number((((b - a) * 1024) / n).toFixed(1));
    return {
      requested,
      sse: sseOpened,
      ws: wsOpened,
      opened: live,
      ...(shortfall === undefined ? {} : { shortfall }),
      sessions: sessionCount,
      messages,
      openSseMs,
      openWsMs,
      memory: { before, withSse, withAll, after },
      heapKbPerSse: perKb(before.heapMb, withSse.heapMb, sseOpened),
      heapKbPerWs: perKb(withSse.heapMb, withAll.heapMb, wsOpened),
      rssKbPerSse: perKb(before.rssMb, withSse.rssMb, sseOpened),
      rssKbPerWs: perKb(withSse.rssMb, withAll.rssMb, wsOpened),
      delivered: all.length,
      expected: receivers.length * messages,
      streamsMissing: receivers.filter((row) => row.some((v) => Number.isNaN(v))).length,
      p50Ms: quantile(all, 0.5),
      p90Ms: quantile(all, 0.9),
      p99Ms: quantile(all, 0.99),
      maxMs: all.at(-1) ?? Number.NaN,
      serverCpuMsPerDelivery: Number((serverCpu / Math.max(1, all.length)).toFixed(3)),
      fdLimit,
      loadBefore,
      loadAfter: loadavg(),
    };
  } finally {
    for (const stream of open) stream.close();
    agent.destroy();
    await stopChild(child);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The result as the text `npm run bench` prints. */
export function formatStreamsBench(r: StreamsBenchResult): string {
  const ms = (v: number) => v.toFixed(1);
  const m = r.memory;
  return [
    `open streams: ${r.opened} / ${r.requested} concurrent (${r.sse} SSE + ${r.ws} WebSocket) over ${r.sessions} sessions, embedded; ${r.messages} messages per session`,
    ...(r.shortfall ? [`  stopped early      ${r.shortfall}`] : []),
    `  time to open       SSE ${ms(r.openSseMs / 1000)} s · WebSocket ${ms(r.openWsMs / 1000)} s`,
    `  gateway heap       ${m.before.heapMb} MB → ${m.withSse.heapMb} MB with SSE (${r.heapKbPerSse} KB each) → ${m.withAll.heapMb} MB with WebSockets too (${r.heapKbPerWs} KB each); ${m.after.heapMb} MB after the messages (after full GCs)`,
    `  process RSS        ${m.before.rssMb} MB → ${m.withSse.rssMb} MB (${r.rssKbPerSse} KB per SSE) → ${m.withAll.rssMb} MB (${r.rssKbPerWs} KB per WebSocket); ${m.after.rssMb} MB after`,
    `  delivered          ${r.delivered} / ${r.expected} (${r.streamsMissing} streams missed something)`,
    `  delivery latency   p50 ${ms(r.p50Ms)} ms · p90 ${ms(r.p90Ms)} ms · p99 ${ms(r.p99Ms)} ms · max ${ms(r.maxMs)} ms`,
    `  server CPU         ${r.serverCpuMsPerDelivery} ms per delivery`,
    `  fd limit           soft ${r.fdLimit.soft} · hard ${r.fdLimit.hard}`,
    `  load average       before ${r.loadBefore.map((l) => l.toFixed(2)).join(" ")} · after ${r.loadAfter.map((l) => l.toFixed(2)).join(" ")}`,
  ].join("\n");
}
