// The A/B turn benchmark's settings come from the environment: bad values are
// refused by name before anything starts, and a base that is not a usable
// checkout is refused before a process is spawned.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runTurnAbBench, turnAbOptionsFromEnv } from "../bench/turn-ab.bench.js";

describe("turn A/B bench settings", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("is off without a base and reads its defaults", () => {
    expect(turnAbOptionsFromEnv({})).toBeUndefined();
    expect(turnAbOptionsFromEnv({ TRELLIS_BENCH_BASE: "/tmp/base" })).toEqual({
      base: "/tmp/base",
      kind: "chat",
      windows: 4,
      windowMs: 3000,
    });
  });

  it("refuses bad values, naming the variable", () => {
    const base = { TRELLIS_BENCH_BASE: "/tmp/base" };
    expect(() => turnAbOptionsFromEnv({ ...base, TRELLIS_BENCH_KIND: "stream" })).toThrow(
      /TRELLIS_BENCH_KIND must be chat or task/,
    );
    for (const bad of ["0", "-2", "1.5", "many"]) {
      expect(() => turnAbOptionsFromEnv({ ...base, TRELLIS_BENCH_WINDOWS: bad })).toThrow(
        /TRELLIS_BENCH_WINDOWS must be a positive whole number/,
      );
    }
    expect(() => turnAbOptionsFromEnv({ ...base, TRELLIS_BENCH_WINDOW_MS: "3s" })).toThrow(
      /TRELLIS_BENCH_WINDOW_MS/,
    );
  });

  it("refuses a base that is not a Trellis checkout with its packages installed", async () => {
    const empty = await mkdtemp(join(tmpdir(), "trellis-ab-"));
    dirs.push(empty);
    await expect(runTurnAbBench({ base: empty })).rejects.toThrow(/not a Trellis checkout/);
  });
});
