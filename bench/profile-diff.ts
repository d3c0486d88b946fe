/**
 * Two CPU profiles of turns compared function by function, in ms of
 * main-thread CPU per turn: by area, by the innermost Trellis frame and by
 * self time (`lib/profile.ts`), largest difference first. For a profile
 * before and after a change, or the same build at 1 and at 32 in flight
 * (docs/benchmarks.md, session 29: the same per-turn functions cost 3–6×
 * more at 1 — the same work done slower, not more work).
 *
 * Each profile needs the `window.json` that `TRELLIS_PROFILE_KEEP=1` writes
 * beside it (`turn-profile.ts`; `mesh-profile.ts` for a mesh process's):
 *
 *   TRELLIS_PROFILE_CONCURRENCY=1 TRELLIS_PROFILE_KEEP=1 npx tsx bench/turn-profile.ts
 *   TRELLIS_PROFILE_CONCURRENCY=32 TRELLIS_PROFILE_KEEP=1 npx tsx bench/turn-profile.ts
 *   npx tsx bench/profile-diff.ts <profile kept at 1> <profile kept at 32> [rows, default 20]
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Profile, summarize } from "./lib/profile.js";

interface PerTurn {
  busy: number;
  byArea: Map<string, number>;
  byOwnFrame: Map<string, number>;
  bySelf: Map<string, number>;
}

/** A kept profile's busy samples as ms of CPU per turn of its window. */
function perTurn(file: string): PerTurn {
  const window = JSON.parse(readFileSync(join(dirname(file), "window.json"), "utf8")) as {
    from: number;
    to: number;
    turns: number;
  };
  if (!(window.turns > 0)) throw new Error(`${file}: its window.json counts no turns`);
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  // The mean sample interval inside the window (idle samples included).
  let t = profile.startTime;
  let samples = 0;
  for (const delta of profile.timeDeltas) {
    t += delta;
    if (t >= window.from && t <= window.to) samples++;
  }
  const msPerSample = (window.to - window.from) / 1000 / Math.max(1, samples);
  const summary = summarize(profile, window.from, window.to);
  const scale = (tally: Map<string, number>) =>
    new Map([...tally].map(([name, n]) => [name, (n * msPerSample) / window.turns]));
  return {
    busy: (summary.busy * msPerSample) / window.turns,
    byArea: scale(summary.byArea),
    byOwnFrame: scale(summary.byOwnFrame),
    bySelf: scale(summary.bySelf),
  };
}

const [fileA, fileB, rowsArg] = process.argv.slice(2);
if (!fileA || !fileB) {
  console.error("usage: npx tsx bench/profile-diff.ts <profile A> <profile B> [rows]");
  process.exit(2);
}
const rows = Number(rowsArg ?? 20);
const a = perTurn(fileA);
const b = perTurn(fileB);
console.log(`main-thread CPU busy, ms/turn: A ${a.busy.toFixed(2)}, B ${b.busy.toFixed(2)}`);
const tables = [
  ["by area", "byArea"],
  ["by the innermost Trellis frame", "byOwnFrame"],
  ["by self time", "bySelf"],
] as const;
for (const [title, key] of tables) {
  const names = new Set([...a[key].keys(), ...b[key].keys()]);
  const lines = [...names]
    .map((name) => ({ name, x: a[key].get(name) ?? 0, y: b[key].get(name) ?? 0 }))
    .sort((p, q) => Math.abs(q.x - q.y) - Math.abs(p.x - p.y))
    .slice(0, rows);
  console.log(`\n${title}: ms/turn  A       B    A − B   A / B`);
  for (const { name, x, y } of lines) {
    const ratio = y > 0 ? `${(x / y).toFixed(1)}×` : "–";
    console.log(
      `${x.toFixed(3).padStart(8)} ${y.toFixed(3).padStart(7)} ${(x - y).toFixed(3).padStart(7)} ${ratio.padStart(6)}  ${name}`,
    );
  }
}
