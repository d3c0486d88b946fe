import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { heapSettings } from "../bench/heap.bench.js";
import { choiceFromEnv, wholeFromEnv } from "../bench/lib/settings.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsx = fileURLToPath(new URL("../node_modules/.bin/tsx", import.meta.url));

describe("benchmark settings", () => {
  it("takes the defaults when a setting is unset or empty", () => {
    expect(heapSettings({})).toEqual({ mode: "embedded", turns: 100_000, concurrency: 32 });
    expect(heapSettings({ TRELLIS_HEAP_MODE: "", TRELLIS_HEAP_TURNS: "" })).toMatchObject({
      mode: "embedded",
      turns: 100_000,
    });
    expect(
      heapSettings({
        TRELLIS_HEAP_MODE: "distributed",
        TRELLIS_HEAP_TURNS: "2000",
        TRELLIS_HEAP_CONCURRENCY: "8",
      }),
    ).toEqual({ mode: "distributed", turns: 2000, concurrency: 8 });
  });

  it("refuses nonsense by name, saying what it wants", () => {
    for (const [name, value, says] of [
      [
        "TRELLIS_HEAP_MODE",
        "cluster",
        /TRELLIS_HEAP_MODE must be embedded or distributed, got "cluster"/,
      ],
      ["TRELLIS_HEAP_TURNS", "0", /TRELLIS_HEAP_TURNS must be a whole number >= 1, got "0"/],
      ["TRELLIS_HEAP_TURNS", "1e3.5", /TRELLIS_HEAP_TURNS must be a whole number >= 1/],
      ["TRELLIS_HEAP_CONCURRENCY", "lots", /TRELLIS_HEAP_CONCURRENCY must be a whole number >= 1/],
      ["TRELLIS_HEAP_CONCURRENCY", "-4", /TRELLIS_HEAP_CONCURRENCY must be a whole number >= 1/],
    ] as const) {
      expect(() => heapSettings({ [name]: value }), `${name}=${value}`).toThrow(says);
    }
  });

  it("reads whole numbers and choices from any environment", () => {
    expect(wholeFromEnv({ N: "7" }, "N", 1)).toBe(7);
    expect(() => wholeFromEnv({ N: "2.5" }, "N", 1)).toThrow(/N must be a whole number >= 1/);
    expect(choiceFromEnv({ C: "b" }, "C", ["a", "b"])).toBe("b");
    expect(() => choiceFromEnv({ C: "B" }, "C", ["a", "b"])).toThrow(/C must be a or b, got "B"/);
  });
});

describe("bench/heap-diff.ts", () => {
  it("refuses missing, unreadable and non-snapshot files in one line, exit 2", async () => {
    const dir = await mkdtemp(join(tmpdir(), "trellis-heap-diff-"));
    try {
      const notJson = join(dir, "a.heapsnapshot");
      const notSnapshot = join(dir, "b.heapsnapshot");
      await writeFile(notJson, "{half");
      await writeFile(notSnapshot, JSON.stringify({ nodes: [] }));
      for (const [args, says] of [
        [[], /^heap-diff: usage: /],
        [[join(dir, "none"), notJson], /^heap-diff: cannot read .*none: ENOENT/],
        [[notJson, notJson], /^heap-diff: .*a\.heapsnapshot is not JSON/],
        [[notSnapshot, notSnapshot], /^heap-diff: .*b\.heapsnapshot is not a V8 heap snapshot/],
      ] as const) {
        const run = spawnSync(tsx, ["bench/heap-diff.ts", ...args], {
          cwd: root,
          encoding: "utf8",
          timeout: 60_000,
        });
        expect(run.status, args.join(" ")).toBe(2);
        expect(run.stderr).toMatch(says);
        expect(run.stderr).not.toMatch(/\n\s+at /);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
