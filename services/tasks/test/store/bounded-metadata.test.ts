import { describe, expect, it } from "vitest";
import { boundedStruct, OMITTED_KEY } from "../../src/store/bounded-metadata.js";

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
