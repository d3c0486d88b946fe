import { describe, expect, it } from "vitest";
import { boundedStruct, jsonWeight, OMITTED_KEY } from "../../src/store/bounded-metadata.js";
import { readPage } from "../../src/store/paging.js";

describe("bounded metadata on reads", () => {
  it("passes values within the limits through untouched", () => {
    const value = { a: 1, b: ["x"] };
    expect(boundedStruct(value)).toBe(value);
  });

  it("replaces a value stored before the limits with a marker that says why", () => {
    const huge: Record<string, string> = {};
    for (let i = 0; i < 200_000; i++) huge[`k${i}`] = "v";
    const out = boundedStruct(huge) as Record<string, string>;
    expect(Object.keys(out)).toEqual([OMITTED_KEY]);
    expect(out[OMITTED_KEY]).toMatch(/more than 1000 keys/);
  });
});

describe("list pages bounded by their metadata", () => {
  it("weighs a value by its JSON values", () => {
    expect(jsonWeight({ a: [1, 2], b: { c: null } })).toBe(6);
    expect(jsonWeight("x")).toBe(1);
  });

  it("ends a page early, with a next token, when its rows weigh more than the budget", async () => {
    const rows = Array.from({ length: 10 }, (_, i) => ({ seq: BigInt(i + 1), weight: 400 }));
    const page = await readPage(
      { pageSize: 5, pageToken: "" },
      async (window) => rows.slice(0, window.limit),
      (r) => r.seq,
      (r) => r.seq,
      { weigh: (r) => r.weight, max: 1000 },
    );
    expect(page.items).toEqual([1n, 2n]);
    expect(page.nextPageToken).not.toBe("");
    const next = await readPage(
      { pageSize: 5, pageToken: page.nextPageToken },
      async (window) => rows.filter((r) => r.seq > (window.after ?? 0n)).slice(0, window.limit),
      (r) => r.seq,
      (r) => r.seq,
      { weigh: (r) => r.weight, max: 1000 },
    );
    expect(next.items).toEqual([3n, 4n]);
  });

  it("always returns at least one row", async () => {
    const page = await readPage(
      { pageSize: 5, pageToken: "" },
      async () => [{ seq: 1n }, { seq: 2n }],
      (r) => r.seq,
      (r) => r.seq,
      { weigh: () => 1_000_000, max: 10 },
    );
    expect(page.items).toEqual([1n]);
  });
});
