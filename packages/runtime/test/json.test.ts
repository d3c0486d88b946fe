import { describe, expect, it } from "vitest";
import { canonicalJson, hasLoneSurrogate, isJsonObject, isRecord } from "../src/index.js";

describe("isJsonObject / isRecord", () => {
  it("accept objects only: not arrays, not null, not scalars", () => {
    for (const check of [isJsonObject, isRecord]) {
      expect(check({})).toBe(true);
      expect(check({ a: [1] })).toBe(true);
      expect(check([])).toBe(false);
      expect(check(null)).toBe(false);
      expect(check(undefined)).toBe(false);
      expect(check("{}")).toBe(false);
      expect(check(1)).toBe(false);
    }
  });
});

describe("canonicalJson (RFC 8785)", () => {
  it("sorts members by UTF-16 code units, integer-like keys included, without whitespace", () => {
    // JSON.stringify would list "9" before "10" (integer-like keys first).
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 0, y: 1 }], c: null }, 10: 1, 9: 2 })).toBe(
      '{"10":1,"9":2,"a":{"c":null,"d":[2,{"y":1,"z":0}]},"b":1}',
    );
    expect(canonicalJson({ "\u20ac": 1, "\r": 2, "\ud83d\ude00": 3 })).toBe(
      '{"\\r":2,"€":1,"😀":3}',
    );
  });

  it("writes numbers as ECMAScript does", () => {
    expect(canonicalJson([1.0, 1e21, 1e-7, -0, 0.1 + 0.2])).toBe(
      "[1,1e+21,1e-7,0,0.30000000000000004]",
    );
  });

  it("refuses what JSON cannot carry, and lone surrogates unless told to escape them", () => {
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson({ x: Number.NaN })).toThrow();
    expect(() => canonicalJson({ x: "a\ud800" })).toThrow(/lone surrogate/);
    expect(canonicalJson({ x: "a\ud800" }, { loneSurrogates: "escape" })).toBe('{"x":"a\\ud800"}');
    // An escaped backslash before "ud800" is text, not a surrogate.
    expect(canonicalJson({ x: "\\ud800" })).toBe('{"x":"\\\\ud800"}');
  });

  it("hasLoneSurrogate reads escapes in JSON text", () => {
    expect(hasLoneSurrogate('"\\ud800"')).toBe(true);
    expect(hasLoneSurrogate('"\\\\ud800"')).toBe(false);
    expect(hasLoneSurrogate(JSON.stringify("\ud83d\ude00"))).toBe(false);
  });
});
