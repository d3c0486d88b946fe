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
import { runLoad } from "./lib/load.js";
import { defaultMeshTogether, parseTogether, startBenchMesh } from "./lib/mesh.js";
import { cpuMsIfRunning, limitsOutOfReach } from "./lib/proc.js";
import { largest, type Profile, percent, summarize, topLines } from "./lib/profile.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis-profile-key-0123456789abcdef";
const concurrency = Number(process.env.TRELLIS_PROFILE_CONCURRENCY ?? 32);
const windowMs = Number(process.env.TRELLIS_PROFILE_MS ?? 10_000);
const top = Number(process.env.TRELLIS_PROFILE_TOP ?? 12);

const profDir = await mkdtemp(join(tmpdir(), "trellis-mesh-profile-"));
const { mesh, stop } = await startBenchMesh("prof", {
  env: {
    TRELLIS_API_KEY: API_KEY,
    TRELLIS_LOG_LEVEL: "warn",
    ...limitsOutOfReach,
  },
  // As `trellis mesh` runs it, or as TRELLIS_BENCH_TOGETHER says (`none`: apart).
  together: parseTogether(process.env.TRELLIS_BENCH_TOGETHER || defaultMeshTogether),
  nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profDir}`, "--cpu-prof-interval=500"],
});
const pids = mesh.pids();
let turns = 0;
let from = 0n;
let to = 0n;
const cpu = new Map<string, number>();
try {
  const transport = bearerTransport(mesh.urls.gateway as string, API_KEY);
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
  await stop();
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
  const summary = summarize(profile, fromUs, toUs);
  const areas = largest(summary.byArea, 8).map(([a, n]) => `${a} ${percent(n, summary.busy)}`);
  console.log(`   by area: ${areas.join(", ")}`);
  for (const line of topLines(summary.bySelf, summary.busy, top, "   ")) console.log(line);
  console.log("   by the innermost Trellis frame:");
  for (const line of topLines(summary.byOwnFrame, summary.busy, top, "   ")) console.log(line);
}
if (process.env.TRELLIS_PROFILE_KEEP) {
  await writeFile(
    join(profDir, "window.json"),
    JSON.stringify({ from: fromUs, to: toUs, turns, pids }),
  );
  console.log(`\nprofiles kept: ${profDir}`);
} else await rm(profDir, { recursive: true, force: true });
