import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { footprintSettings } from "../bench/lib/footprint-settings.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsx = fileURLToPath(new URL("../node_modules/.bin/tsx", import.meta.url));

describe("bench/turn-footprint.ts settings", () => {
  it("has defaults, and reads each setting", () => {
    expect(footprintSettings({})).toEqual({
      warmup: 40,
      turns: 400,
      concurrency: 8,
      mode: "embedded",
    });
    expect(
      footprintSettings({
        TRELLIS_FOOTPRINT_WARMUP: "5",
        TRELLIS_FOOTPRINT_TURNS: "60",
        TRELLIS_FOOTPRINT_CONCURRENCY: "2",
        TRELLIS_FOOTPRINT_MODE: "distributed",
      }),
    ).toEqual({ warmup: 5, turns: 60, concurrency: 2, mode: "distributed" });
  });

  it("refuses each bad setting by name", () => {
    for (const [name, value, says] of [
      ["TRELLIS_FOOTPRINT_TURNS", "0", /TRELLIS_FOOTPRINT_TURNS must be a whole number >= 1/],
      ["TRELLIS_FOOTPRINT_WARMUP", "1.5", /TRELLIS_FOOTPRINT_WARMUP must be a whole number >= 1/],
      ["TRELLIS_FOOTPRINT_CONCURRENCY", "lots", /TRELLIS_FOOTPRINT_CONCURRENCY must be/],
      [
        "TRELLIS_FOOTPRINT_MODE",
        "cluster",
        /TRELLIS_FOOTPRINT_MODE must be embedded or distributed/,
      ],
    ] as const) {
      expect(() => footprintSettings({ [name]: value }), `${name}=${value}`).toThrow(says);
    }
  });

  it("the bench refuses a bad setting before starting anything", () => {
    const run = spawnSync(tsx, ["bench/turn-footprint.ts"], {
      cwd: root,
      env: { ...process.env, TRELLIS_FOOTPRINT_TURNS: "0" },
      encoding: "utf8",
      timeout: 90_000,
    });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/TRELLIS_FOOTPRINT_TURNS must be a whole number >= 1/);
    // Refused before a database or a server was started.
    expect(run.stdout).not.toMatch(/chat turns at/);
    // One process that loads the bench's imports: slow on a busy machine.
  }, 120_000);
});
