/**
 * Reading V8 CPU profiles (`node --cpu-prof`) for the profile benches
 * (`turn-profile.ts`: embedded, `mesh-profile.ts`: each mesh process):
 * the samples inside a loaded window, by area (PGlite, protobuf, Connect,
 * …), by function (self time), and by the first Trellis frame on the
 * sample's stack (what our own code spends, libraries below it included).
 *
 * The window is in the profile's clock: V8's profile clock and a process's
 * `process.hrtime` are both CLOCK_MONOTONIC on Linux, so a window taken with
 * `hrtime` in the loading process applies to the profiled process too.
 */

/** A function in a profile. */
export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

/** The parts of a `.cpuprofile` read here. */
export interface Profile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

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
    if (name.startsWith("@nats-io")) return "NATS client";
    if (name === "pg" || name.startsWith("pg-")) return "pg";
    if (name.startsWith("@trellis/")) return `trellis ${name.slice(9)}`;
    return name;
  }
  const own = /\/(packages|services)\/([^/]+)\//.exec(url);
  if (own) return `trellis ${own[2]}`;
  if (url.startsWith("node:")) return "node core";
  return "other";
}

/** `name  path:line`, with the path shortened to the package or service. */
export function frameName(frame: CallFrame): string {
  const short = frame.url
    .replace(/^.*\/node_modules\//, "")
    .replace(/^file:\/\/.*?\/(packages|services|src)\//, "$1/");
  return `${frame.functionName || "(anonymous)"}  ${short}:${frame.lineNumber + 1}`;
}

/** Whether a frame is Trellis's own code (not a library, not Node). */
function ownCode(frame: CallFrame): boolean {
  return /\/(packages|services|src)\//.test(frame.url) && !frame.url.includes("node_modules");
}

/** Busy samples of a window, counted three ways (see the module header). */
export interface ProfileSummary {
  /** Samples in the window that were not idle. */
  busy: number;
  byArea: Map<string, number>;
  bySelf: Map<string, number>;
  /** By the innermost Trellis frame on the stack ("(no Trellis frame)": callbacks of Node or a library). */
  byOwnFrame: Map<string, number>;
}

/** Counts the busy samples between `fromUs` and `toUs` (profile clock, µs). */
export function summarize(profile: Profile, fromUs: number, toUs: number): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const summary: ProfileSummary = {
    busy: 0,
    byArea: new Map(),
    bySelf: new Map(),
    byOwnFrame: new Map(),
  };
  const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const node = byId.get(profile.samples[i] as number);
    if (!node || node.callFrame.functionName === "(idle)") continue;
    summary.busy++;
    add(summary.byArea, area(node.callFrame));
    add(summary.bySelf, frameName(node.callFrame));
    let up: typeof node | undefined = node;
    while (up && !ownCode(up.callFrame)) up = byId.get(parent.get(up.id) ?? -1);
    add(summary.byOwnFrame, up ? frameName(up.callFrame) : "(no Trellis frame)");
  }
  return summary;
}

/** `n` of `busy` samples as a percentage, e.g. `12.3 %`. */
export function percent(n: number, busy: number): string {
  return `${((n / Math.max(1, busy)) * 100).toFixed(1)} %`;
}

/** The `count` largest entries of a tally, largest first. */
export function largest(tally: ReadonlyMap<string, number>, count: number): [string, number][] {
  return [...tally].sort((a, b) => b[1] - a[1]).slice(0, count);
}

/** The `count` largest entries of a tally, as `  12.3 %  name` lines. */
export function topLines(
  tally: ReadonlyMap<string, number>,
  busy: number,
  count: number,
  indent = "",
): string[] {
  return [...tally]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(
      ([name, n]) =>
        `${indent}${((n / Math.max(1, busy)) * 100).toFixed(1).padStart(5)} %  ${name}`,
    );
}
