// The fuzz generator's shortcuts (mutations.ts) must not change a single
// generated request: case i of a seed is always the same request, whatever
// made it faster. Each shortcut is checked against what it replaced.
import { fromBinary, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import type { FuzzSetup } from "./fuzz-setup.js";
import { copyJson, jsonPrefix, mutateJson, nestedValues } from "./mutations.js";
import { Rng } from "./prng.js";

const awkward = [
  JSON.parse('{"__proto__": {"a": 1}, "b": [1, null]}') as JsonValue,
  { "2": "two", "1": "one", z: "\u0000\ud800🦜\u202e", "": "é" },
  [1e300, -0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, undefined, true] as unknown as JsonValue,
  { a: undefined, b: { c: [[], {}, ""] } } as unknown as JsonValue,
  "just a string",
  42,
  null,
];

/** A message of the kind that grows large: lists of long strings, nested. */
function bulky(): JsonValue {
  return {
    id: "ses_x",
    items: Array.from({ length: 40 }, (_, i) => ({
      name: `n${i}`,
      count: 0,
      text: "z".repeat(1000 + i * 37),
      tags: ["é", "🦜", "\u0000", ""],
      nested: { role: "ROLE_USER", values: [0, 1, "x".repeat(200)] },
    })),
  };
}

describe("fuzz generator shortcuts", () => {
  it("copyJson gives what a round trip through JSON text gives", () => {
    for (const value of [...awkward, bulky()]) {
      const copy = copyJson(value);
      expect(JSON.stringify(copy)).toBe(JSON.stringify(value));
      expect(copy).toStrictEqual(JSON.parse(JSON.stringify(value)));
    }
  });

  it("jsonPrefix is JSON.stringify, or a prefix of it past the asked length", () => {
    for (const value of [...awkward, bulky()]) {
      const whole = JSON.stringify(value);
      expect(jsonPrefix(value, whole.length)).toBe(whole);
      for (const atLeast of [0, 1, 7, 100, 5000, whole.length - 1]) {
        if (atLeast < 0) continue;
        const prefix = jsonPrefix(value, atLeast);
        expect(whole.startsWith(prefix)).toBe(true);
        expect(prefix.length > atLeast || prefix === whole).toBe(true);
      }
    }
  });

  it("mutateJson with `keep` gives the same first bytes, label and overflow as without", () => {
    const setup = { maxBodyBytes: 256 * 1024 } as FuzzSetup;
    const json = bulky();
    const whole = JSON.stringify(json).length;
    const labels = new Set<string>();
    for (const keep of [10, Math.floor(whole / 2), whole - 20]) {
      for (let seed = 0; seed < 80; seed++) {
        const full = mutateJson(new Rng(seed), json, setup);
        const kept = mutateJson(new Rng(seed), json, setup, keep);
        labels.add(full.label);
        expect(kept.label).toBe(full.label);
        expect(kept.text.byteLength > keep).toBe(full.text.byteLength > keep);
        // Buffer.equals: a deep equality over tens of kilobytes is slow.
        const same = Buffer.from(kept.text.subarray(0, keep)).equals(full.text.subarray(0, keep));
        expect(same, `${full.label}, keep ${keep}, seed ${seed}`).toBe(true);
      }
    }
    // Every kind of JSON mutation was compared.
    expect(labels.size).toBeGreaterThanOrEqual(13);
  });

  it("nestedValues is Value{list_value{values: …}} nested as deep as asked", () => {
    // What it replaced: wrap a copy of the inner bytes per level.
    const varint = (n: number) => {
      const out: number[] = [];
      let v = n;
      while (v > 127) {
        out.push((v & 127) | 128);
        v >>>= 7;
      }
      out.push(v);
      return out;
    };
    for (const levels of [0, 1, 2, 20, 63, 64, 150]) {
      let inner = new Uint8Array(0);
      for (let i = 0; i < levels; i++) {
        const list = new Uint8Array([0x0a, ...varint(inner.length), ...inner]);
        inner = new Uint8Array([0x32, ...varint(list.length), ...list]);
      }
      expect(nestedValues(levels)).toEqual(inner);
    }
    // 40 levels are 80 messages deep: within protobuf-es's limit of 100.
    let value = fromBinary(ValueSchema, nestedValues(40));
    let depth = 0;
    while (value.kind.case === "listValue") {
      depth++;
      value = value.kind.value.values[0] as typeof value;
    }
    expect(depth).toBe(40);
  });
});
