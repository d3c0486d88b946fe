import * as http from "node:http";
import { loadavg } from "node:os";
import { http1Request } from "./lib/http1.js";
import { median, quantile } from "./lib/load.js";
import { startDev } from "./lib/proc.js";

const ADMIN_KEY = "trl_bench_hostile_0123456789abcdefghijklmnopqrstu";

/** Options of {@link runHostileMetadataBench}. */
export interface HostileMetadataOptions {
  rounds?: number;
  keys?: number;
  probeEveryMs?: number;
}

/** One measured request with the probe's latencies during it. */
export interface HostilePoint {
  what: string;
  status: number;
  requestMs: number;
  probes: number;
  probeP50Ms: number;
  probeP99Ms: number;
  probeMaxMs: number;
}

/** What the benchmark measured. */
export interface HostileMetadataResult {
  keys: number;
  bodyBytes: number;
  points: HostilePoint[];
  loadBefore: number[];
  loadAfter: number[];
}

/** `method path` as the admin (with a JSON `body`); the reply's status, its body dropped. */
async function send(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  body?: string,
): Promise<number> {
  const reply = await http1Request(agent, port, method, path, {
    headers: {
      authorization: `Bearer ${ADMIN_KEY}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body }),
    discardBody: true,
  });
  return reply.status;
}

/** `request` while `GET /v1` is probed every `everyMs`; the probe's latencies during it. */
async function measure(
  what: string,
  port: number,
  everyMs: number,
  request: () => Promise<number>,
): Promise<HostilePoint> {
  const probeAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const latencies: number[] = [];
  let running = true;
  const probe = (async () => {
    while (running) {
      const started = performance.now();
      await send(probeAgent, port, "GET", "/v1");
      latencies.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  // Let the probe settle in first.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const started = performance.now();
  const status = await request();
  const requestMs = performance.now() - started;
  running = false;
  await probe;
  probeAgent.destroy();
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    what,
    status,
    requestMs,
    probes: sorted.length,
    probeP50Ms: quantile(sorted, 0.5),
    probeP99Ms: quantile(sorted, 0.99),
    probeMaxMs: sorted.at(-1) ?? 0,
  };
}

function metadataJson(keys: number): string {
  const parts: string[] = [];
  for (let i = 0; i < keys; i++) parts.push(`"key_${i}":"v${i % 10}"`);
  return `{${parts.join(",")}}`;
}

/** Run the benchmark once. */
export async function runHostileMetadataBench(
  options: HostileMetadataOptions = {},
): Promise<HostileMetadataResult> {
  const rounds = options.rounds ?? 3;
  const keys = options.keys ?? 200_000;
  const everyMs = options.probeEveryMs ?? 10;
  const loadBefore = loadavg();
  const dev = await startDev({
    apiKey: ADMIN_KEY,
    tmpPrefix: "trellis-bench-hostile-",
    timeoutMs: 180_000,
  });
  const { port } = dev;
  const agent = new http.Agent({ keepAlive: true });
  const points: HostilePoint[] = [];
  const body = `{"workspace_id":"default","metadata":${metadataJson(keys)}}`;
  try {
    for (let round = 0; round < rounds; round++) {
      points.push(
        await measure(`POST /v1/sessions, ${keys} metadata keys`, port, everyMs, () =>
          send(agent, port, "POST", "/v1/sessions", body),
        ),
      );
    }
    // The list read over sessions holding the most the limits accept.
    const allowed = `{"workspace_id":"default","metadata":${metadataJson(1000)}}`;
    for (let i = 0; i < 50; i++) {
      const status = await send(agent, port, "POST", "/v1/sessions", allowed);
      if (status !== 201) throw new Error(`creating a 1,000-key session answered ${status}`);
    }
    for (let round = 0; round < rounds; round++) {
      points.push(
        await measure("GET /v1/sessions?limit=50, 1,000 keys each", port, everyMs, () =>
          send(agent, port, "GET", "/v1/sessions?limit=50"),
        ),
      );
    }
  } finally {
    agent.destroy();
    await dev.stop();
  }
  return { keys, bodyBytes: Buffer.byteLength(body), points, loadBefore, loadAfter: loadavg() };
}

/** The result as a table, with the targets checked on the medians. */
export function formatHostileMetadataBench(result: HostileMetadataResult): string {
  const lines = [
    `hostile metadata: ${result.keys} keys (${(result.bodyBytes / 1e6).toFixed(1)} MB), GET /v1 probed alongside`,
    "request                                        status  request ms  probe p50  probe p99  probe max  probes",
  ];
  for (const p of result.points) {
    lines.push(
      `${p.what.padEnd(46)} ${String(p.status).padStart(6)} ${p.requestMs.toFixed(0).padStart(11)} ${p.probeP50Ms
        .toFixed(1)
        .padStart(10)} ${p.probeP99Ms.toFixed(1).padStart(10)} ${p.probeMaxMs
        .toFixed(1)
        .padStart(10)} ${String(p.probes).padStart(7)}`,
    );
  }
  const refusals = result.points.filter((p) => p.what.startsWith("POST"));
  const refusalMs = median(refusals.map((p) => p.requestMs));
  const probeMax = median(refusals.map((p) => p.probeMaxMs));
  const refused = refusals.every((p) => p.status === 400);
  lines.push(
    `target: refused with 400 in < 1000 ms: ${refused && refusalMs < 1000 ? "met" : "MISSED"} (median ${refusalMs.toFixed(0)} ms)`,
    `target: concurrent GET /v1 < 100 ms: ${probeMax < 100 ? "met" : "MISSED"} (median of the rounds' max ${probeMax.toFixed(1)} ms)`,
    `load average before ${result.loadBefore.map((l) => l.toFixed(2)).join(" ")}, after ${result.loadAfter
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  return lines.join("\n");
}
