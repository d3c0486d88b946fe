/**
 * A/B turn benchmark: this checkout's embedded Trellis against another
 * checkout's (the base: an earlier commit, another branch), both running as
 * `trellis dev` processes at the same time and loaded in alternation — window
 * by window, the order flipping each round — so drift in the machine's load
 * hits both alike. The figure to compare is the server CPU per turn (from
 * /proc, the server process only); latency and throughput are shown too.
 *
 *   git worktree add ../trellis-base <ref> && (cd ../trellis-base && npm ci)
 *   TRELLIS_BENCH_BASE=../trellis-base npm run bench -- turn-ab
 *
 * TRELLIS_BENCH_KIND=chat|task (default chat), TRELLIS_BENCH_WINDOWS
 * (windows per tree and concurrency, default 4), TRELLIS_BENCH_WINDOW_MS
 * (default 3000).
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { median, runLoad } from "./lib/load.js";
import { cpuMs } from "./lib/proc.js";
import { type BenchTarget, embeddedTarget, type TurnKind } from "./turn.bench.js";

/** Options of {@link runTurnAbBench}. */
export interface TurnAbOptions {
  /** Root of the base checkout (with its node_modules installed). */
  base: string;
  kind?: TurnKind;
  windows?: number;
  windowMs?: number;
  warmupMs?: number;
  concurrencies?: readonly number[];
}

/** One tree at one concurrency: per-window figures and their medians. */
export interface TurnAbSide {
  cpuMsPerTurn: number[];
  p50Ms: number[];
  perSecond: number[];
}

/** Base and this tree at one concurrency. */
export interface TurnAbPoint {
  concurrency: number;
  base: TurnAbSide;
  head: TurnAbSide;
}

/** The A/B options from the environment; undefined when no base is named. */
export function turnAbOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): TurnAbOptions | undefined {
  const base = env.TRELLIS_BENCH_BASE;
  if (!base) return undefined;
  const kind = env.TRELLIS_BENCH_KIND ?? "chat";
  if (kind !== "chat" && kind !== "task") {
    throw new Error(`TRELLIS_BENCH_KIND must be chat or task, not ${JSON.stringify(kind)}`);
  }
  const count = (name: string, fallback: number) => {
    const text = env[name];
    if (text === undefined || text === "") return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`${name} must be a positive whole number, not ${JSON.stringify(text)}`);
    }
    return value;
  };
  return {
    base: resolve(base),
    kind,
    windows: count("TRELLIS_BENCH_WINDOWS", 4),
    windowMs: count("TRELLIS_BENCH_WINDOW_MS", 3000),
  };
}

/** Run both trees side by side; targets stay up for the whole run. */
export async function runTurnAbBench(options: TurnAbOptions): Promise<TurnAbPoint[]> {
  if (!existsSync(join(options.base, "src/cli/main.ts"))) {
    throw new Error(`${options.base} is not a Trellis checkout (no src/cli/main.ts)`);
  }
  if (!existsSync(join(options.base, "node_modules"))) {
    throw new Error(`${options.base} has no node_modules: run npm ci there first`);
  }
  const kind = options.kind ?? "chat";
  const windows = options.windows ?? 4;
  const windowMs = options.windowMs ?? 3000;
  const warmupMs = options.warmupMs ?? 1500;
  const targets: BenchTarget[] = [];
  try {
    targets.push(await embeddedTarget(kind, options.base));
    targets.push(await embeddedTarget(kind));
    const points: TurnAbPoint[] = [];
    for (const concurrency of options.concurrencies ?? [1, 32]) {
      for (const target of targets) await runLoad(target.op, { concurrency, durationMs: warmupMs });
      const sides = targets.map((): TurnAbSide => ({ cpuMsPerTurn: [], p50Ms: [], perSecond: [] }));
      for (let window = 0; window < windows; window++) {
        // Flip the order each window: neither tree always runs right after a warm machine.
        const order = window % 2 === 0 ? [0, 1] : [1, 0];
        for (const index of order) {
          const target = targets[index] as BenchTarget;
          const side = sides[index] as TurnAbSide;
          const pid = target.pids()[0] as number;
          const before = cpuMs(pid);
          const result = await runLoad(target.op, { concurrency, durationMs: windowMs });
          side.cpuMsPerTurn.push((cpuMs(pid) - before) / Math.max(1, result.calls));
          side.p50Ms.push(result.p50Ms);
          side.perSecond.push(result.perSecond);
        }
      }
      points.push({
        concurrency,
        base: sides[0] as TurnAbSide,
        head: sides[1] as TurnAbSide,
      });
    }
    return points;
  } finally {
    for (const target of targets) await target.close();
  }
}

/** Medians of each side, the windows behind them, and the change from base. */
export function formatTurnAbBench(points: readonly TurnAbPoint[], title: string): string {
  const lines = [
    `${title} (medians of ${points[0]?.base.cpuMsPerTurn.length ?? 0} alternating windows per tree; change = this tree vs base)`,
    "in-flight  tree   cpu ms/turn (windows)                  p50 ms   turns/s",
  ];
  const change = (head: number, base: number) =>
    `${head >= base ? "+" : ""}${(((head - base) / base) * 100).toFixed(1)} %`;
  for (const point of points) {
    const row = (name: string, side: TurnAbSide) =>
      `${String(point.concurrency).padStart(9)}  ${name.padEnd(5)}  ${median(side.cpuMsPerTurn)
        .toFixed(2)
        .padStart(6)} (${side.cpuMsPerTurn.map((v) => v.toFixed(1)).join(" ")})`.padEnd(63) +
      `${median(side.p50Ms).toFixed(2).padStart(7)}  ${median(side.perSecond).toFixed(0).padStart(8)}`;
    lines.push(row("base", point.base), row("this", point.head));
    lines.push(
      `${"".padStart(9)}  change cpu ${change(median(point.head.cpuMsPerTurn), median(point.base.cpuMsPerTurn))}, p50 ${change(median(point.head.p50Ms), median(point.base.p50Ms))}, turns/s ${change(median(point.head.perSecond), median(point.base.perSecond))}`,
    );
  }
  return lines.join("\n");
}
