import { describe, expect, it } from "vitest";
import { heapSettings } from "../bench/heap.bench.js";
import { choiceFromEnv, wholeFromEnv } from "../bench/lib/settings.js";

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
