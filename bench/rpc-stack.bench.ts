/**
 * What one RPC hop costs the server: a trivial unary call served by a bare
 * Connect handler (the floor), by `createService` (the Trellis runtime's
 * interceptors and request handling), and by an internal service that also
 * verifies the mesh signature (`rpc-stack-server.ts`). Server CPU per call
 * from /proc at 1 and at 32 calls in flight, in `rounds` rounds that visit
 * the servers in turn (order reversed every round) so drift in the machine's
 * load weighs on each alike; figures are the medians of the rounds.
 *
 * It answers two questions about a turn's CPU: how much of a hop is the
 * runtime's own (the ratio to raw), and how much more a call costs at 1 in
 * flight than at 32 on this machine when nothing but HTTP/2 and Connect run
 * (each server's own @1 / @32 ratio) — the floor under a turn's.
 *
 *   npm run bench -- rpc-stack      # TRELLIS_BENCH_ROUNDS (default 3), TRELLIS_BENCH_WINDOW_MS (default 3000)
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService } from "@trellis/contracts/tasks";
import { createMeshClientInterceptor, MeshCredentials } from "@trellis/platform";
import { freePort } from "@trellis/testkit";
import { median, runLoad } from "./lib/load.js";
import { cpuMs, repoRoot, startNode, stopChild } from "./lib/proc.js";

const MODES = ["raw", "runtime", "internal"] as const;
type Mode = (typeof MODES)[number];
const CONCURRENCIES = [1, 32] as const;

/** Options of {@link runRpcStackBench}. */
export interface RpcStackOptions {
  rounds?: number;
  windowMs?: number;
}

/** Medians of one server at one concurrency. */
export interface RpcStackPoint {
  mode: Mode;
  concurrency: number;
  cpuUsPerCall: number;
  callsPerSecond: number;
}

/** Server CPU per call of the three servers at 1 and 32 in flight. */
export async function runRpcStackBench(options: RpcStackOptions = {}): Promise<RpcStackPoint[]> {
  const rounds = options.rounds ?? 3;
  const windowMs = options.windowMs ?? 3000;
  if (!Number.isInteger(rounds) || rounds < 1) {
    throw new Error(
      `rpc-stack: rounds (TRELLIS_BENCH_ROUNDS) must be a whole number ≥ 1, not ${rounds}`,
    );
  }
  if (!Number.isInteger(windowMs) || windowMs < 100) {
    throw new Error(
      `rpc-stack: the window (TRELLIS_BENCH_WINDOW_MS) must be a whole number of ms ≥ 100, not ${windowMs}`,
    );
  }
  const secret = randomBytes(32).toString("hex");
  const credentials = new MeshCredentials(secret);
  const servers = new Map<
    Mode,
    { pid: number; call: () => Promise<void>; stop: () => Promise<void> }
  >();
  try {
    for (const mode of MODES) {
      const port = await freePort();
      const child = await startNode(
        join(repoRoot, "bench/rpc-stack-server.ts"),
        [mode, String(port)],
        { TRELLIS_MESH_SECRET: secret, TRELLIS_LOG_LEVEL: "warn" },
        /ready/,
      );
      const interceptors: Interceptor[] =
        mode === "internal" ? [createMeshClientInterceptor(credentials, "bench")] : [];
      const client = createClient(
        SessionService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}`, interceptors }),
      );
      servers.set(mode, {
        pid: child.pid as number,
        call: async () => {
          await client.getSession({ sessionId: "ses_bench" });
        },
        stop: () => stopChild(child),
      });
    }
    const samples = new Map<string, { cpu: number[]; rate: number[] }>();
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [...MODES] : [...MODES].reverse();
      for (const concurrency of CONCURRENCIES) {
        for (const mode of order) {
          const server = servers.get(mode);
          if (!server) continue;
          await runLoad(server.call, { concurrency, durationMs: Math.min(1000, windowMs) });
          const before = cpuMs(server.pid);
          const result = await runLoad(server.call, { concurrency, durationMs: windowMs });
          const cpu = cpuMs(server.pid) - before;
          if (result.errors > 0) throw new Error(`${mode}: ${result.errors} calls failed`);
          const key = `${mode}@${concurrency}`;
          const entry = samples.get(key) ?? { cpu: [], rate: [] };
          entry.cpu.push((cpu * 1000) / Math.max(1, result.calls));
          entry.rate.push(result.perSecond);
          samples.set(key, entry);
        }
      }
    }
    return MODES.flatMap((mode) =>
      CONCURRENCIES.map((concurrency) => {
        const entry = samples.get(`${mode}@${concurrency}`) ?? { cpu: [], rate: [] };
        return {
          mode,
          concurrency,
          cpuUsPerCall: median(entry.cpu),
          callsPerSecond: median(entry.rate),
        };
      }),
    );
  } finally {
    for (const server of servers.values()) await server.stop();
  }
}

/** The table `npm run bench -- rpc-stack` prints. */
export function formatRpcStackBench(points: readonly RpcStackPoint[]): string {
  const at = (mode: Mode, concurrency: number) =>
    points.find((p) => p.mode === mode && p.concurrency === concurrency);
  const lines = [
    "server CPU per call (µs, medians of the rounds), a trivial unary RPC over h2c",
    "",
    "server      @1 µs   @32 µs   @1/@32   @32 vs raw   calls/s @32",
  ];
  for (const mode of MODES) {
    const one = at(mode, 1);
    const many = at(mode, 32);
    const raw = at("raw", 32);
    if (!one || !many || !raw) continue;
    lines.push(
      `${mode.padEnd(10)} ${one.cpuUsPerCall.toFixed(0).padStart(6)} ${many.cpuUsPerCall
        .toFixed(0)
        .padStart(8)} ${(one.cpuUsPerCall / many.cpuUsPerCall).toFixed(2).padStart(8)} ${(
        many.cpuUsPerCall / raw.cpuUsPerCall
      )
        .toFixed(2)
        .padStart(11)}× ${many.callsPerSecond.toFixed(0).padStart(12)}`,
    );
  }
  return lines.join("\n");
}
