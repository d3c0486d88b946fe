/**
 * Hostile metadata (issue 22, finding 1): against embedded Trellis (`trellis
 * dev` in its own process), `POST /v1/sessions` with a 200,000-key `metadata`
 * object (~3 MB, well under the 16 MiB body limit) while a second client
 * sends `GET /v1` (public discovery) every 10 ms. Before the structure limits
 * the POST held the event loop ~23 s and every GET waited with it.
 *
 * Reported per round: the POST's status and time to its answer, and the
 * probe's p50 / p99 / max latency while the POST was in flight; then the same
 * for `GET /v1/sessions?limit=50` over 50 sessions holding the most metadata
 * the limits accept (1,000 keys each). The targets of the issue: the refusal
 * under 1 s, the concurrent `GET /v1` under 100 ms.
 */
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { median } from "./lib/load.js";
import { freePort, repoRoot, startNode, stopChild } from "./lib/proc.js";

const ADMIN_KEY = "trl_bench_hostile_0123456789abcdefghijklmnopqrstu";
const VERSION = "agents-protocol-2026-04-25";

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

function send(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  body?: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: {
          authorization: `Bearer ${ADMIN_KEY}`,
          "harn-agents-protocol-version": VERSION,
          ...(body === undefined
            ? {}
            : {
                "content-type": "application/json",
                "content-length": String(Buffer.byteLength(body)),
              }),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
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
  const dataDir = await mkdtemp(join(tmpdir(), "trellis-bench-hostile-"));
  const port = await freePort();
  const child = await startNode(
    join(repoRoot, "src/cli/main.ts"),
    ["dev"],
    {
      TRELLIS_PORT: String(port),
      TRELLIS_DATA_DIR: dataDir,
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_LOG_LEVEL: "warn",
    },
    /listening on/,
    180_000,
  );
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
    await stopChild(child);
    await rm(dataDir, { recursive: true, force: true });
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
