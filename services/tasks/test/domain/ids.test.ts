import { describe, expect, it } from "vitest";
import { newId } from "../../src/domain/ids.js";

describe("newId", () => {
  it("is <prefix>_<10 time chars><16 random chars> of the base-32 alphabet", () => {
    expect(newId("task")).toMatch(/^task_[0-9a-hjkmnp-tv-z]{26}$/);
  });

  it("stays unique across many pool refills, and sorts by creation time", async () => {
    // 4096-byte pool, 16 bytes per id: 2,000 ids refill it several times.
    const ids = Array.from({ length: 2000 }, () => newId("x"));
    expect(new Set(ids).size).toBe(ids.length);
    const randomParts = ids.map((id) => id.slice(12));
    expect(new Set(randomParts).size).toBe(ids.length);
    await new Promise((r) => setTimeout(r, 5));
    const later = newId("x");
    expect(later.slice(0, 12) > (ids[0] as string).slice(0, 12)).toBe(true);
  });
});
