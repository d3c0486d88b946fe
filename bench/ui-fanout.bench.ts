/**
 * UI stream fan-out benchmark: one session's UI event stream
 * (`GET /v1/ui/sessions/{id}/events/stream`, SSE) read by many subscribers
 * at once against embedded Trellis (`trellis dev` in its own process; in
 * embedded mode the gateway and the other services share that process).
 *
 * The load generator (this process) opens `subscribers` SSE connections to
 * the session, then appends `messages` user messages to it
 * (`POST /v1/sessions/{id}/messages`), one every `intervalMs`; each message's
 * text carries the generator's send time, and every subscriber notes when
 * its `message` envelope arrives. Reported: delivery latency (POST sent →
 * envelope parsed, per subscriber and message) p50 / p90 / p99 / max, lost
 * deliveries, the server's CPU during the send phase, and the gateway's
 * memory per subscriber: (V8 heap in use with the subscribers − before) /
 * count, each read after two full GCs in the server (`--expose-gc`, asked
 * over IPC; see ./lib/fanout-server.ts), plus the process RSS for reference.
 * Generator and server share the machine's cores, so latency includes the
 * generator parsing 1,000 streams.
 */

import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { freePort } from "@trellis/testkit";
import { gcMemory, startGcDev } from "./lib/gc-dev.js";
import { HARN_VERSION, harnRest } from "./lib/harn-rest.js";
import { cpuMs, rssBytes, stopChild } from "./lib/proc.js";

const API_KEY = "trl_bench_fanout_0123456789abcdefghijklmnopqrstuv";

/** Options of {@link runUiFanoutBench}. */
export interface UiFanoutOptions {
  subscribers?: number;
  messages?: number;
  intervalMs?: number;
}

/** What the benchmark measured. */
export interface UiFanoutResult {
  subscribers: number;
  messages: number;
  delivered: number;
  expected: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  connectMs: number;
  rssBeforeMb: number;
  rssWithSubscribersMb: number;
  rssAfterMessagesMb: number;
  /** V8 heap in use after full GCs. */
  heapBeforeMb: number;
  heapWithSubscribersMb: number;
  heapAfterMessagesMb: number;
  heapKbPerSubscriber: number;
  /** RSS delta per subscriber (noisy: PGlite's WASM memory and GC timing move RSS by 100s of MB). */
  rssKbPerSubscriber: number;
  serverCpuMsPerMessage: number;
  loadBefore: number[];
  loadAfter: number[];
}

const quantile = (sorted: number[], q: number) =>
  sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One SSE subscriber: records when each `ping <n> <t>` message envelope arrives. */
function subscribe(
  agent: http.Agent,
  port: number,
  sessionId: string,
  onPing: (n: number, sentAt: number) => void,
): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      {
        agent,
        host: "127.0.0.1",
        port,
        path: `/v1/ui/sessions/${sessionId}/events/stream`,
        headers: {
          authorization: `Bearer ${API_KEY}`,
          accept: "text/event-stream",
          "harn-agents-protocol-version": HARN_VERSION,
        },
      },
      (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`subscriber got ${res.statusCode}`));
          return;
        }
        res.setEncoding("utf8");
        let buffer = "";
        let opened = false;
        res.on("data", (chunk: string) => {
          const now = performance.now();
          buffer += chunk;
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!opened && frame.includes("event: session\n")) {
              opened = true;
              resolve(req);
            }
            const ping = /"text":"ping (\d+) ([\d.]+)"/.exec(frame);
            if (ping) onPing(Number(ping[1]), now - Number(ping[2]));
            end = buffer.indexOf("\n\n");
          }
        });
      },
    );
    req.on("error", reject);
  });
}

/** Run the fan-out benchmark once. */
export async function runUiFanoutBench(options: UiFanoutOptions = {}): Promise<UiFanoutResult> {
  const subscribers = options.subscribers ?? 1000;
  const messages = options.messages ?? 40;
  const intervalMs = options.intervalMs ?? 250;
  const loadBefore = loadavg();
  const dataDir = await mkdtemp(join(tmpdir(), "trellis-bench-fanout-"));
  const port = await freePort();
  const child = await startGcDev({ port, dataDir, apiKey: API_KEY });
  const pid = child.pid as number;
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const open: http.ClientRequest[] = [];
  try {
    const harn = harnRest(port, API_KEY);
    const sessionId = await harn.newSession(await harn.okPersona("fanout"));
    const append = (text: string) => harn.appendUserText(sessionId, text);

    // Warm up the path with one subscriber, then take the baseline memory.
    const received: number[][] = Array.from({ length: messages }, () => []);
    const warm = await subscribe(agent, port, sessionId, () => {});
    await append("warm-up");
    await sleep(500);
    warm.destroy();
    await sleep(1000);
    const before = await gcMemory(child);
    const rssBefore = rssBytes(pid);

    const connectStart = performance.now();
    const batch = 100;
    for (let i = 0; i < subscribers; i += batch) {
      const opened = await Promise.all(
        Array.from({ length: Math.min(batch, subscribers - i) }, () =>
          subscribe(agent, port, sessionId, (n, latency) => {
            if (n < messages) received[n]!.push(latency);
          }),
        ),
      );
      open.push(...opened);
    }
    const connectMs = performance.now() - connectStart;
    await sleep(2000);
    const withSubscribers = await gcMemory(child);
    const rssWithSubscribers = rssBytes(pid);

    const cpuBefore = cpuMs(pid);
    for (let n = 0; n < messages; n++) {
      await append(`ping ${n} ${performance.now().toFixed(3)}`);
      await sleep(intervalMs);
    }
    // Let the last deliveries land.
    const deadline = performance.now() + 10_000;
    while (received.some((r) => r.length < subscribers) && performance.now() < deadline) {
      await sleep(100);
    }
    const serverCpu = cpuMs(pid) - cpuBefore;
    const rssAfterMessages = rssBytes(pid);
    const afterMessages = await gcMemory(child);
    const all = received.flat().sort((a, b) => a - b);
    const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
    return {
      subscribers,
      messages,
      delivered: all.length,
      expected: subscribers * messages,
      p50Ms: quantile(all, 0.5),
      p90Ms: quantile(all, 0.9),
      p99Ms: quantile(all, 0.99),
      maxMs: all.at(-1) ?? Number.NaN,
      connectMs,
      rssBeforeMb: mb(rssBefore),
      rssWithSubscribersMb: mb(rssWithSubscribers),
      rssAfterMessagesMb: mb(rssAfterMessages),
      heapBeforeMb: mb(before.heapUsed),
      heapWithSubscribersMb: mb(withSubscribers.heapUsed),
      heapAfterMessagesMb: mb(afterMessages.heapUsed),
      heapKbPerSubscriber: Number(
        ((withSubscribers.heapUsed - before.heapUsed) / subscribers / 1024).toFixed(1),
      ),
      rssKbPerSubscriber: Number(
        ((rssWithSubscribers - rssBefore) / subscribers / 1024).toFixed(1),
      ),
      serverCpuMsPerMessage: Number((serverCpu / messages).toFixed(1)),
      loadBefore,
      loadAfter: loadavg(),
    };
  } finally {
    for (const req of open) req.destroy();
    agent.destroy();
    await stopChild(child);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The result as the text `npm run bench` prints. */
export function formatUiFanoutBench(r: UiFanoutResult): string {
  const ms = (v: number) => v.toFixed(1);
  return [
    `UI stream fan-out: 1 session → ${r.subscribers} SSE subscribers, embedded (${r.messages} messages)`,
    `  delivery latency   p50 ${ms(r.p50Ms)} ms · p90 ${ms(r.p90Ms)} ms · p99 ${ms(r.p99Ms)} ms · max ${ms(r.maxMs)} ms (target p99 ≤ 50 ms)`,
    `  delivered          ${r.delivered} / ${r.expected}`,
    `  connect            ${ms(r.connectMs)} ms for all subscribers`,
    `  gateway heap       ${r.heapBeforeMb} MB → ${r.heapWithSubscribersMb} MB with subscribers (${r.heapKbPerSubscriber} KB each, after full GC), ${r.heapAfterMessagesMb} MB after the messages`,
    `  process RSS        ${r.rssBeforeMb} MB → ${r.rssWithSubscribersMb} MB (${r.rssKbPerSubscriber} KB each; noisy), ${r.rssAfterMessagesMb} MB after the messages`,
    `  server CPU         ${r.serverCpuMsPerMessage} ms per message fanned out`,
    `  load average       before ${r.loadBefore.map((l) => l.toFixed(2)).join(" ")} · after ${r.loadAfter.map((l) => l.toFixed(2)).join(" ")}`,
  ].join("\n");
}
