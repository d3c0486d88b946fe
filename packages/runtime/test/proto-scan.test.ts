import { fromJson, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { scanProtoStructure } from "../src/proto-scan.js";

const limits = { maxKeys: 3, maxNodes: 20, maxKeyLength: 8, maxDepth: 100 };
function structBytes(json: JsonValue): Uint8Array {
  return toBinary(ValueSchema, fromJson(ValueSchema, json));
}

describe("scanProtoStructure (binary, before decoding)", () => {
  it("accepts a Struct within the limits", () => {
    expect(
      scanProtoStructure(ValueSchema, structBytes({ a: 1, b: [1, "x"] }), limits, 100),
    ).toBeUndefined();
  });

  it.each([
    [{ a: 1, b: 2, c: 3, d: 4 }, "keys", ""],
    [{ m: { a: 1, b: 2, c: 3, d: 4 } }, "keys", "m"],
    [{ m: Array.from({ length: 25 }, () => 1) }, "nodes", "m[18]"],
    [{ m: { "long key!": 1 } }, "key_length", "m"],
  ])("finds %j past the %s limit at %j", (json, limit, path) => {
    expect(scanProtoStructure(ValueSchema, structBytes(json), limits, 100)).toMatchObject({
      limit,
      path,
    });
  });

  it("ends quietly on malformed bytes", () => {
    expect(
      scanProtoStructure(ValueSchema, new Uint8Array([0x2a, 0xff, 0xff, 0x01]), limits, 100),
    ).toBeUndefined();
  });
});
