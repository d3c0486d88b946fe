/**
 * Where an embedded chat turn's CPU goes: `trellis dev` of this checkout run
 * under `node --cpu-prof`, loaded with `ChatService.Send` turns of the
 * zero-latency agent at `TRELLIS_PROFILE_CONCURRENCY` in flight (default 32)
 * for `TRELLIS_PROFILE_MS` (default 15,000) after a warm-up. Only the samples
 * taken inside the loaded window count (V8's profile clock and this process's
 * `hrtime` are both CLOCK_MONOTONIC on Linux). Prints the top self-time
 * functions, self time by area (PGlite, protobuf, Connect, OpenTelemetry, …),
 * the innermost Trellis frame of each sample (`lib/profile.ts`), and the
 * turns measured, so a change can be profiled before and after.
 *
 *   npx tsx bench/turn-profile.ts            # TRELLIS_PROFILE_TOP=40 for more rows
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runLoad } from "./lib/load.js";
import { cpuMs, limitsOutOfReach, startDev } from "./lib/proc.js";
import { type Profile, summarize, topLines } from "./lib/profile.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis-profile-key-0123456789abcdef";
const concurrency = Number(process.env.TRELLIS_PROFILE_CONCURRENCY ?? 32);
const windowMs = Number(process.env.TRELLIS_PROFILE_MS ?? 15_000);
const top = Number(process.env.TRELLIS_PROFILE_TOP ?? 30);

const profDir = await mkdtemp(join(tmpdir(), "trellis-profile-out-"));
const dev = await startDev({
  apiKey: API_KEY,
  tmpPrefix: "trellis-profile-",
  timeoutMs: 120_000,
  env: { ...limitsOutOfReach },
  nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profDir}`, "--cpu-prof-interval=500"],
});
const { child } = dev;
let turns = 0;
let cpu = 0;
let from = 0n;
let to = 0n;
try {
  const transport = bearerTransport(dev.baseUrl, API_KEY);
  const op = await chatTurnOps(transport);
  await runLoad(op, { concurrency, durationMs: 3000 });
  const before = cpuMs(child.pid as number);
  from = process.hrtime.bigint();
  const result = await runLoad(op, { concurrency, durationMs: windowMs });
  to = process.hrtime.bigint();
  cpu = cpuMs(child.pid as number) - before;
  turns = result.calls;
  if (result.errors > 0) console.log("first error:", result.firstError);
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
const summary = summarize(profile, Number(from / 1000n), Number(to / 1000n));
console.log(`\n${summary.busy} busy samples in the window; self time by area:`);
for (const line of topLines(summary.byArea, summary.busy, 25)) console.log(line);
console.log(`\ntop ${top} functions by self time:`);
for (const line of topLines(summary.bySelf, summary.busy, top)) console.log(line);
console.log(`\ntop ${top} by the innermost Trellis frame (libraries below it included):`);
for (const line of topLines(summary.byOwnFrame, summary.busy, top)) console.log(line);
