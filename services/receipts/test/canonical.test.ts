// Receipt hashing (receipts README, "Canonical JSON form"): the hash is the
// SHA-256 of the RFC 8785 form without chain.receipt_hash and signatures;
// checked here against a computation written independently of the code under test.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  computeReceiptHash,
  eventHash,
  hashInput,
  merkleRoot,
  receiptTexts,
} from "../src/domain/canonical.js";
import type { Sha256 } from "../src/domain/receipt.js";
import { newKey, receiptOf } from "./receipt-helpers.js";
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
    expect(() => canonicalJson({ x: "\ud800" })).toThrow();
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
