import { describe, expect, it } from "vitest";
import { scanJsonStructure } from "../src/json-scan.js";
import {
  checkJsonStructure,
  defaultStructureLimits,
  findStructureViolation,
  structureLimitsFromEnv,
} from "../src/structure-limits.js";

const limits = { maxKeys: 3, maxNodes: 20, maxKeyLength: 8, maxDepth: 3 };

/** Values past one of `limits`: the limit and the path the walk and the scan both name. */
const pastLimits: [unknown, string, string][] = [
  [{ a: 1, b: 2, c: 3, d: 4 }, "keys", ""],
  [{ m: { a: 1, b: 2, c: 3, d: 4 } }, "keys", "m"],
  [{ m: Array.from({ length: 25 }, () => 1) }, "nodes", "m"],
  [{ m: { "long key!": 1 } }, "key_length", "m"],
  [{ m: [[[1]]] }, "depth", "m[0][0]"],
];

describe("structure limits", () => {
  it("accepts a value within every limit", () => {
    expect(findStructureViolation({ a: [1, { b: "x" }], c: null }, limits)).toBeUndefined();
  });

  it.each(pastLimits)("finds %j past the %s limit at %j", (value, limit, path) => {
    expect(findStructureViolation(value, limits)).toMatchObject({ limit, path });
  });

  it("bounds strings and the total of a field when given field limits", () => {
    const field = { maxStringLength: 4, maxTotalLength: 10 };
    expect(findStructureViolation({ a: "12345" }, limits, "meta", field)).toMatchObject({
      limit: "string_length",
      path: "meta.a",
    });
    expect(
      findStructureViolation({ a: "1234", b: "1234", c: "1" }, limits, "meta", field),
    ).toMatchObject({
      limit: "total_length",
      path: "meta",
    });
    expect(findStructureViolation({ a: "12345" }, limits, "meta")).toBeUndefined();
  });

  it("throws invalid_request naming the field and the limit", () => {
    expect(() => checkJsonStructure({ a: 1, b: 2, c: 3, d: 4 }, limits, "metadata")).toThrow(
      expect.objectContaining({
        reason: "invalid_request",
        param: "metadata",
        metadata: { limit_keys: "3" },
      }),
    );
  });

  it("stops at the first violation of a huge object", () => {
    const huge: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) huge[`k${i}`] = i;
    expect(findStructureViolation(huge, defaultStructureLimits)).toMatchObject({ limit: "keys" });
  });

  it("reads its variables", () => {
    expect(structureLimitsFromEnv({ TRELLIS_MAX_JSON_KEYS: "50" }, 10)).toMatchObject({
      maxKeys: 50,
      maxDepth: 10,
      maxNodes: defaultStructureLimits.maxNodes,
    });
    expect(() => structureLimitsFromEnv({ TRELLIS_MAX_JSON_KEYS: "1" }, 10)).toThrow(
      /TRELLIS_MAX_JSON_KEYS/,
    );
  });
});

describe("scanJsonStructure (on the bytes, before parsing)", () => {
  const scan = (value: unknown) => scanJsonStructure(Buffer.from(JSON.stringify(value)), limits);

  it("accepts what the parsed walk accepts", () => {
    expect(scan({ a: [1, { b: "x,:{[" }], c: null })).toBeUndefined();
    expect(scan({ 'k\\"ey': ['\\"', true, false, -1.5e3] })).toBeUndefined();
  });

  it.each([
    ...pastLimits,
    [[0, { "odd key": { a: 1, b: 2, c: 3, d: 4 } }], "keys", '[1]."odd key"'],
  ])("finds %j past the %s limit at %j, as the parsed walk does", (value, limit, path) => {
    expect(scan(value)).toMatchObject({ limit, path });
    expect(findStructureViolation(value, limits)).toMatchObject({ limit });
  });

  it("counts a key's characters, not its bytes", () => {
    expect(scan({ m: { éééééééé: 1 } })).toBeUndefined();
  });

  it("stays finite on malformed text", () => {
    for (const text of ['{"a":', '"unterminated', "]]]}}}", '{"a"::::,,,', "\\"]) {
      scanJsonStructure(Buffer.from(text), limits);
    }
  });

  it("refuses 200,000 keys without parsing them", () => {
    const parts: string[] = [];
    for (let i = 0; i < 200_000; i++) parts.push(`"k${i}":${i}`);
    const bytes = Buffer.from(`{"metadata":{${parts.join(",")}}}`);
    expect(scanJsonStructure(bytes, defaultStructureLimits)).toMatchObject({
      limit: "keys",
      path: "metadata",
    });
  });
});
