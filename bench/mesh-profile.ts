/**
 * Where a distributed chat turn's CPU goes, per mesh process: the mesh of
 * `trellis mesh` (on the test PostgreSQL and NATS) with every process under
 * `node --cpu-prof`, loaded with `ChatService.Send` turns of the
 * zero-latency agent at `TRELLIS_PROFILE_CONCURRENCY` in flight (default 32)
 * for `TRELLIS_PROFILE_MS` (default 10,000) after a warm-up. Prints, per
 * process, its CPU per turn, self time by area and its top functions (only
 * samples inside the loaded window; see `turn-profile.ts`, the embedded one).
 *
 *   npx tsx bench/mesh-profile.ts            # TRELLIS_PROFILE_TOP=25 for more rows
 *
 * TRELLIS_PROFILE_KEEP=1 keeps the profiles and writes `window.json` (the
 * loaded window in the profiles' clock, the turns, each process's pid)
 * beside them, for a closer look (e.g. by caller) than the tables here.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import { startMesh } from "../src/mesh.js";
import { runLoad } from "./lib/load.js";
import { cpuMsIfRunning } from "./lib/proc.js";
import { chatTurnOps } from "./turn.bench.js";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Profile {
  nodes: { id: number; callFrame: CallFrame }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const API_KEY = "trellis-profile-key-0123456789abcdef";
const concurrency = Number(process.env.TRELLIS_PROFILE_CONCURRENCY ?? 32);
const windowMs = Number(process.env.TRELLIS_PROFILE_MS ?? 10_000);
const top = Number(process.env.TRELLIS_PROFILE_TOP ?? 12);

function area(frame: CallFrame): string {
  const url = frame.url;
  if (!url) {
    if (frame.functionName === "(garbage collector)") return "GC";
    if (frame.functionName === "(program)") return "(program)";
    return "native / builtins";
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) {
    const name = pkg[1] as string;
    if (name.startsWith("@opentelemetry")) return "OpenTelemetry";
    if (name.startsWith("@connectrpc")) return "Connect";
    if (name.startsWith("@bufbuild")) return "protobuf";
    if (name.startsWith("@nats-io")) return "NATS client";
    if (name === "pg" || name.startsWith("pg-")) return "pg";
    return name;
  }
  const own = /\/(packages|services)\/([^/]+)\//.exec(url);
  if (own) return `trellis ${own[2]}`;
  if (url.startsWith("node:")) return "node core";
  return "other";
}

const profDir = await mkdtemp(join(tmpdir(), "trellis-mesh-profile-"));
const db = await createTestDatabase("trellis_prof");
const prefix = uniqueName("prof");
const mesh = await startMesh({
  databaseUrl: db.url,
  natsUrl: testNatsUrl,
  natsPrefix: prefix,
  env: {
    TRELLIS_API_KEY: API_KEY,
    TRELLIS_LOG_LEVEL: "warn",
  },
  nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profDir}`, "--cpu-prof-interval=500"],
});
const pids = mesh.pids();
let turns = 0;
let from = 0n;
let to = 0n;
const cpu = new Map<string, number>();
try {
  const transport = createGrpcTransport({
    baseUrl: mesh.urls.gateway as string,
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${API_KEY}`);
        return next(req);
      },
    ],
  });
  const op = await chatTurnOps(transport);
  await runLoad(op, { concurrency, durationMs: 3000 });
  const before = new Map(Object.entries(pids).map(([n, pid]) => [n, cpuMsIfRunning(pid) ?? 0]));
  from = process.hrtime.bigint();
  const result = await runLoad(op, { concurrency, durationMs: windowMs });
  to = process.hrtime.bigint();
  for (const [name, pid] of Object.entries(pids))
    cpu.set(name, (cpuMsIfRunning(pid) ?? 0) - (before.get(name) ?? 0));
  turns = result.calls;
  console.log(
    `${turns} turns at ${concurrency} in flight, ${result.perSecond.toFixed(0)}/s, p50 ${result.p50Ms.toFixed(1)} ms (errors ${result.errors})`,
  );
} finally {
  await mesh.stop();
  await db.drop();
  await deleteTestStreams(prefix);
}

const fromUs = Number(from / 1000n);
const toUs = Number(to / 1000n);
const files = (await readdir(profDir)).filter((f) => f.endsWith(".cpuprofile"));
for (const [name, pid] of Object.entries(pids)) {
  // The main thread's profile: CPU.<date>.<time>.<pid>.0.001.cpuprofile
  const file = files.find((f) => f.includes(`.${pid}.0.`));
  const perTurn = ((cpu.get(name) ?? 0) / Math.max(1, turns)).toFixed(2);
  console.log(`\n== ${name}: ${perTurn} ms/turn`);
  if (!file) {
    console.log("   (no profile written)");
    continue;
  }
  const profile = JSON.parse(await readFile(join(profDir, file), "utf8")) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  const areas = new Map<string, number>();
  let t = profile.startTime;
  let counted = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const frame = byId.get(profile.samples[i] as number)?.callFrame;
    if (!frame || frame.functionName === "(idle)") continue;
    counted++;
    const short = frame.url
      .replace(/^.*\/node_modules\//, "")
      .replace(/^file:\/\/.*?\/(packages|services|src)\//, "$1/");
    const key = `${frame.functionName || "(anonymous)"}  ${short}:${frame.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + 1);
    const where = area(frame);
    areas.set(where, (areas.get(where) ?? 0) + 1);
  }
  const pct = (n: number) => `${((n / Math.max(1, counted)) * 100).toFixed(1).padStart(5)} %`;
  console.log(
    `   by area: ${[...areas]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([a, n]) => `${a} ${pct(n).trim()}`)
      .join(", ")}`,
  );
  for (const [key, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`   ${pct(n)}  ${key}`);
}
if (process.env.TRELLIS_PROFILE_KEEP) {
  await writeFile(
    join(profDir, "window.json"),
    JSON.stringify({ from: fromUs, to: toUs, turns, pids }),
  );
  console.log(`\nprofiles kept: ${profDir}`);
} else await rm(profDir, { recursive: true, force: true });
