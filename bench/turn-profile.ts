/**
 * Where an embedded chat turn's CPU goes: `trellis dev` of this checkout run
 * under `node --cpu-prof`, loaded with `ChatService.Send` turns of the
 * zero-latency agent at `TRELLIS_PROFILE_CONCURRENCY` in flight (default 32)
 * for `TRELLIS_PROFILE_MS` (default 15,000) after a warm-up. Only the samples
 * taken inside the loaded window count (V8's profile clock and this process's
 * `hrtime` are both CLOCK_MONOTONIC on Linux). Prints the top self-time
 * functions, self time by area (PGlite, protobuf, Connect, OpenTelemetry, …),
 * and the turns measured, so a change can be profiled before and after.
 *
 *   npx tsx bench/turn-profile.ts            # TRELLIS_PROFILE_TOP=40 for more rows
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { runLoad } from "./lib/load.js";
import { cpuMs, startDev } from "./lib/proc.js";
import { chatTurnOps } from "./turn.bench.js";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const API_KEY = "trellis-profile-key-0123456789abcdef";
const concurrency = Number(process.env.TRELLIS_PROFILE_CONCURRENCY ?? 32);
const windowMs = Number(process.env.TRELLIS_PROFILE_MS ?? 15_000);
const top = Number(process.env.TRELLIS_PROFILE_TOP ?? 30);

/** The area a function belongs to, from its script's path. */
export function area(frame: CallFrame): string {
  const url = frame.url;
  if (url.startsWith("wasm://")) return "PGlite";
  if (!url) {
    if (frame.functionName === "(garbage collector)") return "GC";
    if (frame.functionName === "(program)" || frame.functionName === "(idle)")
      return frame.functionName;
    return "native / builtins";
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) {
    const name = pkg[1] as string;
    if (name === "@electric-sql/pglite") return "PGlite";
    if (name.startsWith("@opentelemetry")) return "OpenTelemetry";
    if (name.startsWith("@connectrpc")) return "Connect";
    if (name.startsWith("@bufbuild")) return "protobuf";
    if (name.startsWith("@trellis/")) return `trellis ${name.slice(9)}`;
    return name;
  }
  const own = /\/(packages|services)\/([^/]+)\//.exec(url);
  if (own) return `trellis ${own[2]}`;
  if (url.startsWith("node:")) return "node core";
  return "other";
}

const profDir = await mkdtemp(join(tmpdir(), "trellis-profile-out-"));
const dev = await startDev({
  apiKey: API_KEY,
  tmpPrefix: "trellis-profile-",
  timeoutMs: 120_000,
  nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profDir}`, "--cpu-prof-interval=500"],
});
const { child } = dev;
let turns = 0;
let cpu = 0;
let from = 0n;
let to = 0n;
try {
  const transport = createGrpcTransport({
    baseUrl: dev.baseUrl,
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${API_KEY}`);
        return next(req);
      },
    ],
  });
  const op = await chatTurnOps(transport);
  await runLoad(op, { concurrency, durationMs: 3000 });
  const before = cpuMs(child.pid as number);
  from = process.hrtime.bigint();
  const result = await runLoad(op, { concurrency, durationMs: windowMs });
  to = process.hrtime.bigint();
  cpu = cpuMs(child.pid as number) - before;
  turns = result.calls;
  console.log(
    `${turns} turns at ${concurrency} in flight, ${result.perSecond.toFixed(0)}/s, p50 ${result.p50Ms.toFixed(1)} ms, server CPU ${(cpu / turns).toFixed(2)} ms/turn (errors ${result.errors})`,
  );
} finally {
  // Writing the profile at exit takes a while on a loaded machine: a longer
  // grace than the default 10 s before SIGKILL (which would lose it).
  await dev.stop(120_000);
}

// The main thread's profile is the first one written (`….0.001.cpuprofile`).
const file = (await readdir(profDir))
  .filter((f) => f.endsWith(".cpuprofile"))
  .sort()
  .find((f) => f.includes(".0.001."));
if (!file) throw new Error(`no profile written to ${profDir}`);
const profile = JSON.parse(await readFile(join(profDir, file), "utf8")) as Profile;
if (process.env.TRELLIS_PROFILE_KEEP) {
  await writeFile(
    join(profDir, "window.json"),
    JSON.stringify({ from: Number(from / 1000n), to: Number(to / 1000n), turns }),
  );
  console.log(`profile kept: ${join(profDir, file)}`);
} else await rm(profDir, { recursive: true, force: true });
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const fromUs = Number(from / 1000n);
const toUs = Number(to / 1000n);
const self = new Map<string, number>();
const areas = new Map<string, number>();
let t = profile.startTime;
let counted = 0;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] ?? 0;
  if (t < fromUs || t > toUs) continue;
  const node = byId.get(profile.samples[i] as number);
  if (!node) continue;
  const frame = node.callFrame;
  if (frame.functionName === "(idle)") continue;
  counted++;
  const where = area(frame);
  const short = frame.url
    .replace(/^.*\/node_modules\//, "")
    .replace(/^file:\/\/.*?\/(packages|services|src)\//, "$1/");
  const key = `${frame.functionName || "(anonymous)"}  ${short}:${frame.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + 1);
  areas.set(where, (areas.get(where) ?? 0) + 1);
}
const pct = (n: number) => `${((n / counted) * 100).toFixed(1).padStart(5)} %`;
console.log(`\n${counted} busy samples in the window; self time by area:`);
for (const [name, n] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 25))
  console.log(`${pct(n)}  ${name}`);
console.log(`\ntop ${top} functions by self time:`);
for (const [name, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${pct(n)}  ${name}`);
