import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsx = fileURLToPath(new URL("../node_modules/.bin/tsx", import.meta.url));

describe("bench/turn-footprint.ts", () => {
  it("refuses bad settings by name before starting anything", () => {
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
      const run = spawnSync(tsx, ["bench/turn-footprint.ts"], {
        cwd: root,
        env: { ...process.env, [name]: value },
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(run.status, `${name}=${value}`).not.toBe(0);
      expect(run.stderr).toMatch(says);
      // Refused before a database or a server was started.
      expect(run.stdout).not.toMatch(/chat turns at/);
    }
    // Four processes that each load the bench's imports: slow on a busy machine.
  }, 240_000);
});
