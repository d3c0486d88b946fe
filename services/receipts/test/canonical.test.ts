// Receipt hashing (receipts README, "Canonical JSON form"): the hash is the
// SHA-256 of the RFC 8785 form without chain.receipt_hash and signatures;
// checked here against a computation written independently of the code under test.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  canonicalReceiptTexts,
  computeReceiptHash,
  eventHash,
  hashInput,
  isCanonicalText,
  merkleRoot,
  receiptTexts,
} from "../src/domain/canonical.js";
import type { Sha256 } from "../src/domain/receipt.js";
import { newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { readSpecJson, taskEvents } from "./support.js";

/**
 * An independent RFC 8785 serializer for the test: members sorted by UTF-16
 * code units (explicit comparison, not the default sort), primitives as
 * ECMAScript's JSON.stringify writes them (RFC 8785 §3.2.2).
 */
function jcs(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jcs).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(
    ([, v]) => v !== undefined,
  );
  entries.sort(([a], [b]) => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = a.charCodeAt(i) - b.charCodeAt(i);
      if (d !== 0) return d;
    }
    return a.length - b.length;
  });
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${jcs(v)}`).join(",")}}`;
}

function independentHash(receipt: Record<string, unknown>): string {
  const copy = JSON.parse(JSON.stringify(receipt)) as Record<string, unknown>;
  delete copy.signatures;
  delete (copy.chain as Record<string, unknown>).receipt_hash;
  return `sha256:${createHash("sha256").update(jcs(copy), "utf8").digest("hex")}`;
}

describe("canonical JSON (RFC 8785)", () => {
  it("sorts members by UTF-16 code units and writes numbers as ECMAScript does", () => {
    expect(
      canonicalJson({
        numbers: [1e30, 4.5, 6, 2e-3, 1e-27, -0, 100, 0.1 + 0.2],
        b: { "\u20ac": 1, a: 2, "\ud83d\ude00": 3, "\ufb33": 4 },
        escaping: '\u20ac$\u000f\nA\'B"\\\\"/',
        literals: [null, true, false],
      }),
    ).toBe(
      '{"b":{"a":2,"\u20ac":1,"\ud83d\ude00":3,"\ufb33":4},"escaping":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/","literals":[null,true,false],"numbers":[1e+30,4.5,6,0.002,1e-27,0,100,0.30000000000000004]}',
    );
  });

  it("refuses values JSON cannot carry", () => {
    expect(() => canonicalJson({ x: Number.NaN })).toThrow();
    expect(() => canonicalJson({ x: Number.POSITIVE_INFINITY })).toThrow();
    expect(() => canonicalJson({ x: "\ud800" })).toThrow(/lone surrogate/);
    expect(() => canonicalJson({ "\udc00": 1 })).toThrow(/lone surrogate/);
    expect(() => canonicalJson(["a\udbff"])).toThrow(/lone surrogate/);
    expect(() => canonicalJson(undefined)).toThrow();
    // An escaped backslash followed by "ud800" is text, not a surrogate.
    expect(canonicalJson({ x: "\\ud800" })).toBe('{"x":"\\\\ud800"}');
  });
});

// The RFC 8785 test vectors published with the reference implementation
// (cyberphone/json-canonicalization, testdata/input → testdata/output) and
// the number serialization table of RFC 8785 Appendix B. Inputs are JSON
// text as given there; outputs are the canonical text expected byte for byte.
// `fast`: whether isCanonicalText recognises the output; it declines (and
// the library canonicalizes) when integer-like keys change order on parse.
const RFC_8785_VECTORS: { name: string; input: string; output: string; fast: boolean }[] = [
  {
    name: "values",
    input: `{
  "numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],
  "escaping": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
  "literals": [null, true, false]
}`,
    fast: true,
    output:
      '{"escaping":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/","literals":[null,true,false],"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}',
  },
  {
    name: "structures",
    input: `{
  "1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0},
  "10": { },
  "": "empty",
  "a": { },
  "111": [ { } ],
  "A": { }
}`,
    fast: false,
    output: '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}',
  },
  {
    name: "weird",
    input: `{
  "\\u20ac": "Euro Sign",
  "1": "One",
  "\\u0080": "Control\\u007f",
  "\\ud83d\\ude02": "Smiley",
  "\\u00f6": "Latin Small Letter O With Diaeresis",
  "\\ufb33": "Hebrew Letter Dalet With Dagesh",
  "</script>": "Browser Challenge"
}`,
    fast: true, // its one integer-like key sorts first either way
    output:
      '{"1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude02":"Smiley","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  },
  {
    name: "french",
    input: `{
  "peach": "This sorting order",
  "p\u00e9ch\u00e9": "is wrong according to French",
  "p\u00eache": "but canonicalization MUST",
  "sin":   "ingnore locale"
}`,
    fast: true,
    output:
      '{"peach":"This sorting order","p\u00e9ch\u00e9":"is wrong according to French","p\u00eache":"but canonicalization MUST","sin":"ingnore locale"}',
  },
  {
    name: "unicode",
    input: '{\n  "Unnormalized Unicode":"\\u1e0d\\u0307"\n}',
    fast: true,
    output: '{"Unnormalized Unicode":"\u1e0d\u0307"}',
  },
];

/** RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text. */
const RFC_8785_NUMBERS: [string, string][] = [
  ["0000000000000000", "0"],
  ["8000000000000000", "0"],
  ["0000000000000001", "5e-324"],
  ["8000000000000001", "-5e-324"],
  ["7fefffffffffffff", "1.7976931348623157e+308"],
  ["ffefffffffffffff", "-1.7976931348623157e+308"],
  ["4340000000000000", "9007199254740992"],
  ["c340000000000000", "-9007199254740992"],
  ["4430000000000000", "295147905179352830000"],
  ["44b52d02c7e14af5", "9.999999999999997e+22"],
  ["44b52d02c7e14af6", "1e+23"],
  ["44b52d02c7e14af7", "1.0000000000000001e+23"],
  ["444b1ae4d6e2ef4e", "999999999999999700000"],
  ["444b1ae4d6e2ef4f", "999999999999999900000"],
  ["444b1ae4d6e2ef50", "1e+21"],
  ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
  ["3eb0c6f7a0b5ed8d", "0.000001"],
  ["41b3de4355555553", "333333333.3333332"],
  ["41b3de4355555554", "333333333.33333325"],
  ["41b3de4355555555", "333333333.3333333"],
  ["41b3de4355555556", "333333333.3333334"],
  ["41b3de4355555557", "333333333.33333343"],
  ["becbf647612f3696", "-0.0000033333333333333333"],
  ["43143ff3c1cb0959", "1424953923781206.2"],
];

function fromBits(hex: string): number {
  return new DataView(Uint8Array.from(Buffer.from(hex, "hex")).buffer).getFloat64(0);
}

describe("RFC 8785 conformance (published test vectors)", () => {
  it.each(RFC_8785_VECTORS)("canonicalizes $name", ({ input, output, fast }) => {
    const parsed: unknown = JSON.parse(input);
    expect(canonicalJson(parsed)).toBe(output);
    expect(canonicalJson(JSON.parse(output))).toBe(output);
    // The fast recognition never calls the input canonical, and recognises
    // the output unless integer-like keys get in the way.
    expect(isCanonicalText(input, parsed)).toBe(false);
    expect(isCanonicalText(output, JSON.parse(output))).toBe(fast);
  });

  it("serializes numbers as Appendix B lists", () => {
    for (const [bits, text] of RFC_8785_NUMBERS) {
      expect(canonicalJson(fromBits(bits)), bits).toBe(text);
      expect(canonicalJson([fromBits(bits)]), bits).toBe(`[${text}]`);
    }
    expect(() => canonicalJson(fromBits("7fffffffffffffff"))).toThrow();
    expect(() => canonicalJson(fromBits("7ff0000000000000"))).toThrow();
  });
});

describe("recognising canonical text without re-serializing it", () => {
  const canonical = (text: string) => isCanonicalText(text, JSON.parse(text));

  it("accepts exactly the library's output", () => {
    const value = {
      z: [1, 2.5, "x", null, true, { b: 1, a: [{}] }],
      a: { "\u20ac": 1, "\ud83d\ude00": 2, ab: "\u007f\n" },
      n: -0.000001,
    };
    expect(canonical(canonicalJson(value))).toBe(true);
  });

  it("refuses every way the same value can be written otherwise", () => {
    for (const text of [
      '{"b":1,"a":2}', // member order
      '{"a":1, "b":2}', // whitespace
      '{"a":1.0}', // number form
      '{"a":1E3}',
      '{"a":-0}',
      '{"a":"\\u0041"}', // an escape JSON.stringify would not write
      '{"a":"\\/"}',
      '{"a":1,"a":1}', // duplicate member
      '{"a":1e400}', // overflows to Infinity
      '{"9":1,"10":2}', // V8 lists integer keys first: order changes on parse
      '{"10":1,"9":2}',
      '{"a":"\\ud800"}', // lone surrogate: RFC 8785 rejects it
      '{"a":{"d":1,"c":2}}', // nested order
      '[{"b":1,"a":2}]',
    ]) {
      expect(canonical(text), text).toBe(false);
    }
  });

  it("gives both receipt texts exactly as the member-by-member path does", () => {
    const key = newKey();
    const fixture = readSpecJson("fixtures/valid/task-receipt.json");
    const sealed = receiptOf(
      taskEvents({ taskId: "task_fast", withTool: true, withModel: true, sequenced: true }),
      key,
    );
    for (const doc of [fixture, sealed.document as unknown as Record<string, unknown>]) {
      const text = canonicalJson(doc);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      expect(isCanonicalText(text, parsed)).toBe(true);
      expect(canonicalReceiptTexts(text, parsed)).toEqual(receiptTexts(parsed));
    }
  });
});

describe("receipt hash", () => {
  const key = newKey();

  it("matches an independent JCS + SHA-256 of the receipt without receipt_hash and signatures", () => {
    for (const script of [
      { taskId: "task_plain" },
      { taskId: "task_tools", withTool: true, withModel: true },
      { taskId: "task_failed", final: "FAILED" as const, withTool: true },
    ]) {
      const sealed = receiptOf(taskEvents({ ...script, sequenced: true }), key);
      const doc = sealed.document as unknown as Record<string, unknown>;
      expect(sealed.hash).toBe(independentHash(doc));
      expect(sealed.document.chain.receipt_hash).toBe(sealed.hash);
      expect(computeReceiptHash(doc)).toBe(sealed.hash);
      // The stored text is the canonical form of the whole receipt.
      expect(sealed.text).toBe(jcs(doc));
    }
  });

  it("computes the spec fixture's hash the same way (its own value is a placeholder)", () => {
    const fixture = readSpecJson("fixtures/valid/task-receipt.json");
    expect(computeReceiptHash(fixture)).toBe(independentHash(fixture));
    expect(computeReceiptHash(fixture)).not.toBe(
      (fixture.chain as { receipt_hash: string }).receipt_hash,
    );
  });

  it("ignores receipt_hash and signatures, and nothing else", () => {
    const sealed = receiptOf(taskEvents({ taskId: "task_x", sequenced: true }), key);
    const doc = JSON.parse(sealed.text) as Record<string, unknown>;
    const changed = structuredClone(doc);
    (changed.chain as Record<string, unknown>).receipt_hash = `sha256:${"0".repeat(64)}`;
    changed.signatures = [];
    expect(computeReceiptHash(changed)).toBe(sealed.hash);
    const other = structuredClone(doc);
    (other.chain as Record<string, unknown>).previous_receipt_hash = `sha256:${"1".repeat(64)}`;
    expect(computeReceiptHash(other)).not.toBe(sealed.hash);
  });

  it("builds both canonical texts exactly as the library does for the whole document", () => {
    const fixture = readSpecJson("fixtures/valid/task-receipt.json");
    const sealed = receiptOf(
      taskEvents({ taskId: "task_t", withTool: true, sequenced: true }),
      key,
    );
    for (const doc of [fixture, sealed.document as unknown as Record<string, unknown>]) {
      const texts = receiptTexts(doc);
      expect(texts.fullText).toBe(canonicalJson(doc));
      expect(texts.hashText).toBe(canonicalJson(hashInput(doc)));
    }
  });
});

describe("event hash and Merkle root", () => {
  it("hashes an event's proto3 JSON in canonical form", () => {
    const [event] = taskEvents({ taskId: "task_e", sequenced: true });
    const json = JSON.stringify({
      actor: { id: "user_1", kind: "ACTOR_KIND_USER" },
      createdAt: "2026-11-22T10:00:01Z",
      id: "evt_task_e_1",
      kind: "task.submitted",
      payload: { taskStatusChanged: { status: "TASK_STATUS_SUBMITTED" } },
      resource: { object: "task", id: "task_e" },
      sequence: "1",
      sessionId: "ses_task_e",
      taskId: "task_e",
      workspaceId: "default",
    });
    const expected = `sha256:${createHash("sha256")
      .update(jcs(JSON.parse(json)))
      .digest("hex")}`;
    expect(eventHash(event!)).toBe(expected);
  });

  it("is the RFC 6962 Merkle tree hash over the event hashes", () => {
    const h = (s: string): Sha256 => `sha256:${createHash("sha256").update(s).digest("hex")}`;
    const bytes = (x: Sha256) => Buffer.from(x.slice(7), "hex");
    const leaf = (x: Sha256) =>
      createHash("sha256")
        .update(Buffer.from([0]))
        .update(bytes(x))
        .digest();
    const node = (l: Buffer, r: Buffer) =>
      createHash("sha256")
        .update(Buffer.from([1]))
        .update(l)
        .update(r)
        .digest();
    const [a, b, c] = [h("a"), h("b"), h("c")];
    expect(merkleRoot([])).toBeUndefined();
    expect(merkleRoot([a])).toBe(`sha256:${leaf(a).toString("hex")}`);
    expect(merkleRoot([a, b])).toBe(`sha256:${node(leaf(a), leaf(b)).toString("hex")}`);
    // n = 3 splits at 2: ((a b) c).
    expect(merkleRoot([a, b, c])).toBe(
      `sha256:${node(node(leaf(a), leaf(b)), leaf(c)).toString("hex")}`,
    );
  });
});
