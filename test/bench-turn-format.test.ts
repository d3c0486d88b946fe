// The turn bench's table: ratios to the raw call at the same concurrency, and
// for a target of several processes (the mesh) a line of CPU per process,
// largest first.
import { describe, expect, it } from "vitest";
import { formatTurnBench, type TurnPoint } from "../bench/turn.bench.js";

function point(target: string, cpuMsPerTurn: number, extra: Partial<TurnPoint> = {}): TurnPoint {
  return {
    target,
    concurrency: 32,
    p50Ms: 10,
    p99Ms: 20,
    perSecond: 100,
    cpuMsPerTurn,
    errors: 0,
    rounds: [],
    ...extra,
  };
}

describe("the turn bench's table", () => {
  it("adds each process's CPU per turn under a target that has several, largest first", () => {
    const text = formatTurnBench([
      point("raw Connect unary", 0.4, { perSecond: 1000, p50Ms: 2 }),
      point("Trellis chat turn, distributed", 20, {
        dbCpuMsPerTurn: 4.5,
        processCpuMsPerTurn: { chat: 4.25, tasks: 7.5, gateway: 5 },
      }),
    ]);
    const lines = text.split("\n");
    const row = lines.findIndex((l) => l.startsWith("Trellis chat turn, distributed"));
    expect(row).toBeGreaterThan(0);
    expect(lines[row]).toContain("0.10"); // turns/s against the raw call's
    expect(lines[row]).toContain("4.500");
    expect(lines[row + 1]?.trim()).toBe(
      "cpu ms/turn by process: tasks 7.50, gateway 5.00, chat 4.25",
    );
    // A single-process target has no such line.
    expect(lines.filter((l) => l.includes("by process"))).toHaveLength(1);
  });
});
