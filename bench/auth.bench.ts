import * as http from "node:http";
import { loadavg } from "node:os";
import { type Http1Reply, http1Request } from "./lib/http1.js";
import { type LoadResult, median, runLoad } from "./lib/load.js";
import { cpuMs, startDev } from "./lib/proc.js";

const ADMIN_KEY = "trl_bench_auth_0123456789abcdefghijklmnopqrstuvw";

/** Options of {@link runAuthBench}. */
export interface AuthBenchOptions {
  rounds?: number;
  windowMs?: number;
  warmupMs?: number;
  concurrencies?: readonly number[];
}

/** One measured point. */
export interface AuthPoint {
  target: string;
  concurrency: number;
  p50Ms: number;
  p99Ms: number;
  perSecond: number;
  cpuMsPerCall: number;
  /** Size of the response body. */
  responseBytes: number;
  errors: number;
  rounds: LoadResult[];
}

/** What the benchmark measured. */
export interface AuthBenchResult {
  points: AuthPoint[];
  tokenTtlSec: number;
  loadBefore: number[];
  loadAfter: number[];
}

/** `method path` with `headers` (and `body`), the reply's status and body. */
function send(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Http1Reply> {
  return http1Request(agent, port, method, path, {
    headers,
    ...(body === undefined ? {} : { body }),
  });
}

async function json(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  body: unknown,
): Promise<Record<string, unknown>> {
  const reply = await send(
    agent,
    port,
    method,
    path,
    { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
    JSON.stringify(body),
  );
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.body}`);
  return JSON.parse(reply.body) as Record<string, unknown>;
}

interface Target {
  name: string;
  path: string;
  headers: Record<string, string>;
}

/** Run the benchmark once. */
export async function runAuthBench(options: AuthBenchOptions = {}): Promise<AuthBenchResult> {
  const rounds = options.rounds ?? 3;
  const windowMs = options.windowMs ?? 2000;
  const warmupMs = options.warmupMs ?? 1000;
  const concurrencies = options.concurrencies ?? [1, 16];
  const loadBefore = loadavg();
  const dev = await startDev({
    apiKey: ADMIN_KEY,
    tmpPrefix: "trellis-bench-auth-",
    // Long enough that the token outlives the run (the default is minutes).
    env: { TRELLIS_OAUTH_TOKEN_TTL: "1h" },
  });
  const { port } = dev;
  const pid = dev.child.pid as number;
  const setupAgent = new http.Agent({ keepAlive: true });
  try {
    const persona = await json(setupAgent, port, "POST", "/v1/personas", {
      name: "auth-bench",
      entry_workflow: "scripted",
      definition: {
        entry: "reply",
        nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
      },
    });
    const session = await json(setupAgent, port, "POST", "/v1/sessions", {
      persona_id: persona.id,
    });
    const sessionPath = `/v1/sessions/${String(session.id)}`;
    const key = await json(setupAgent, port, "POST", "/v1/api-keys", {
      name: "auth-bench-reader",
      scopes: ["sessions:read", "events:read"],
    });
    const client = await json(setupAgent, port, "POST", "/v1/oauth-clients", {
      name: "auth-bench-client",
      scopes: ["sessions:read", "events:read"],
    });
    const basic = Buffer.from(
      `${encodeURIComponent(String(client.client_id))}:${encodeURIComponent(String(client.client_secret))}`,
    ).toString("base64");
    const tokenReply = await send(
      setupAgent,
      port,
      "POST",
      "/oauth/token",
      { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" },
      new URLSearchParams({
        grant_type: "client_credentials",
        scope: "sessions:read events:read",
      }).toString(),
    );
    if (tokenReply.status !== 200) {
      throw new Error(`token endpoint: ${tokenReply.status} ${tokenReply.body}`);
    }
    const token = JSON.parse(tokenReply.body) as { access_token: string; expires_in: number };

    const apiKey = { authorization: `Bearer ${String(key.key)}` };
    const jwt = { authorization: `Bearer ${token.access_token}` };
    const targets: Target[] = [
      { name: "unauthenticated GET /v1", path: "/v1", headers: {} },
      { name: "API key GET /v1/ui/event-types", path: "/v1/ui/event-types", headers: apiKey },
      { name: "JWT GET /v1/ui/event-types", path: "/v1/ui/event-types", headers: jwt },
      { name: "API key GET /v1/sessions/{id}", path: sessionPath, headers: apiKey },
      { name: "JWT GET /v1/sessions/{id}", path: sessionPath, headers: jwt },
    ];
    // Every credential must really be accepted before anything is timed.
    const bodyBytes: number[] = [];
    for (const target of targets) {
      const reply = await send(setupAgent, port, "GET", target.path, target.headers);
      if (reply.status !== 200) throw new Error(`${target.name}: ${reply.status} ${reply.body}`);
      bodyBytes.push(Buffer.byteLength(reply.body));
    }

    const points: AuthPoint[] = [];
    for (const concurrency of concurrencies) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
      const ops = targets.map((target) => async () => {
        const reply = await send(agent, port, "GET", target.path, target.headers);
        if (reply.status !== 200) throw new Error(`${target.name}: ${reply.status}`);
      });
      for (const op of ops) await runLoad(op, { concurrency, durationMs: warmupMs });
      const results: LoadResult[][] = targets.map(() => []);
      const cpu: number[][] = targets.map(() => []);
      for (let round = 0; round < rounds; round++) {
        // Alternate the order so no target always runs on a warmer/cooler machine.
        const order = targets.map((_, i) => (round % 2 === 0 ? i : targets.length - 1 - i));
        for (const i of order) {
          const before = cpuMs(pid);
          const result = await runLoad(ops[i]!, { concurrency, durationMs: windowMs });
          cpu[i]!.push((cpuMs(pid) - before) / Math.max(1, result.calls));
          results[i]!.push(result);
        }
      }
      targets.forEach((target, i) => {
        const rs = results[i]!;
        points.push({
          target: target.name,
          concurrency,
          p50Ms: median(rs.map((r) => r.p50Ms)),
          p99Ms: median(rs.map((r) => r.p99Ms)),
          perSecond: median(rs.map((r) => r.perSecond)),
          cpuMsPerCall: median(cpu[i]!),
          responseBytes: bodyBytes[i] ?? 0,
          errors: rs.reduce((s, r) => s + r.errors, 0),
          rounds: rs,
        });
      });
      agent.destroy();
    }
    return { points, tokenTtlSec: token.expires_in, loadBefore, loadAfter: loadavg() };
  } finally {
    setupAgent.destroy();
    await dev.stop();
  }
}

/** The result as the text `npm run bench` prints (ratios to the unauthenticated call). */
export function formatAuthBench(r: AuthBenchResult): string {
  const base = new Map(
    r.points.filter((p) => p.target.startsWith("unauth")).map((p) => [p.concurrency, p]),
  );
  const x = (v: number | undefined) =>
    v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(2);
  const lines = [
    `authenticated request overhead, embedded (medians of ${r.points[0]?.rounds.length ?? 0} windows; ratios to the unauthenticated call at the same concurrency)`,
    "target                              in-flight  p50 ms  p99 ms  calls/s  cpu ms/call  p50×unauth  p99×unauth  tput×unauth  cpu×unauth  errors",
  ];
  for (const p of r.points) {
    const b = base.get(p.concurrency);
    lines.push(
      [
        p.target.padEnd(35),
        String(p.concurrency).padStart(9),
        p.p50Ms.toFixed(2).padStart(7),
        p.p99Ms.toFixed(2).padStart(7),
        p.perSecond.toFixed(0).padStart(8),
        p.cpuMsPerCall.toFixed(3).padStart(12),
        x(b && p.p50Ms / b.p50Ms).padStart(11),
        x(b && p.p99Ms / b.p99Ms).padStart(11),
        x(b && p.perSecond / b.perSecond).padStart(12),
        x(b && p.cpuMsPerCall / b.cpuMsPerCall).padStart(11),
        String(p.errors).padStart(7),
      ].join(" "),
    );
  }
  lines.push(
    `response bytes     ${r.points
      .filter((p) => p.concurrency === r.points[0]?.concurrency)
      .map((p) => `${p.target}: ${p.responseBytes}`)
      .join(" · ")}`,
    `token TTL          ${r.tokenTtlSec} s`,
    `load average       before ${r.loadBefore.map((l) => l.toFixed(2)).join(" ")} · after ${r.loadAfter
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  return lines.join("\n");
}
