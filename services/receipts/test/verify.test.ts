// Verification: changing any byte of a stored receipt, reordering the chain
// or signing with another key makes it invalid, with a stable reason; key
// rotation keeps old receipts verifiable.
import type { KeyObject } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { SealedReceipt } from "../src/domain/build.js";
import { computeReceiptHash } from "../src/domain/canonical.js";
import type { Sha256 } from "../src/domain/receipt.js";
import { parsePublicKey, publicKeyPem, signReceiptHash } from "../src/domain/signing.js";
import { type ChainContext, verifyReceipt } from "../src/domain/verify.js";
import { newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { receiptSchemaValidator, taskEvents } from "./support.js";

const keyA = newKey("key_a");
const keyB = newKey("key_b");
const keys = new Map<string, KeyObject>([
  [keyA.keyId, keyA.publicKey],
  [keyB.keyId, keyB.publicKey],
]);
const publicKey = (id: string) => keys.get(id);

/** A chain of three receipts of one workspace. */
function chain(): SealedReceipt[] {
  const out: SealedReceipt[] = [];
  let previous: Sha256 | null = null;
  for (const taskId of ["task_1", "task_2", "task_3"]) {
    const sealed = receiptOf(
      taskEvents({ taskId, withTool: true, sequenced: true }),
      keyA,
      previous,
    );
    out.push(sealed);
    previous = sealed.hash;
  }
  return out;
}

/** What storage would say about receipt `i` of `receipts`, in the order given. */
function contextOf(receipts: SealedReceipt[], i: number): ChainContext {
  const next = receipts[i + 1];
  return {
    previousHash: i === 0 ? null : (receipts[i - 1] as SealedReceipt).hash,
    ...(next ? { nextPreviousHash: next.document.chain.previous_receipt_hash } : {}),
    siblings: 1,
  };
}

function codes(result: { problems: { code: string }[] }): string[] {
  return result.problems.map((p) => p.code);
}

describe("verifyReceipt", () => {
  const receipts = chain();

  it("accepts an untouched chain, every check run", () => {
    receipts.forEach((r, i) => {
      const result = verifyReceipt(r.text, {
        publicKey,
        storedText: r.text,
        storedHash: r.hash,
        chain: contextOf(receipts, i),
        validateSchema: receiptSchemaValidator(),
      });
      expect(result.problems).toEqual([]);
      expect(result.valid).toBe(true);
      expect(result.checks).toEqual([
        "parse",
        "schema",
        "hash",
        "stored_form",
        "chain",
        "signature",
      ]);
      expect(result.keyId).toBe("key_a");
    });
  });

  it("rejects a change of any single byte of a stored receipt", () => {
    const r = receipts[1] as SealedReceipt;
    const context = {
      publicKey,
      storedText: r.text,
      storedHash: r.hash,
      chain: contextOf(receipts, 1),
    };
    const bytes = Buffer.from(r.text, "utf8");
    const seen = new Set<string>();
    for (let i = 0; i < bytes.length; i++) {
      const tampered = Buffer.from(bytes);
      // Another printable character; keep it ASCII so the text stays UTF-8.
      tampered[i] = bytes[i] === 0x41 ? 0x42 : 0x41;
      const result = verifyReceipt(tampered.toString("utf8"), context);
      expect(result.valid, `byte ${i} changed`).toBe(false);
      for (const code of codes(result)) seen.add(code);
    }
    expect(seen).toContain("hash_mismatch");
    expect(seen).toContain("document_unparseable");
  });

  it("rejects a stored receipt re-hashed and re-signed by someone without the key", () => {
    const r = receipts[1] as SealedReceipt;
    const doc = JSON.parse(r.text);
    doc.cost.total = 1000;
    doc.chain.receipt_hash = computeReceiptHash(doc);
    const result = verifyReceipt(doc, {
      publicKey,
      storedHash: r.hash,
      chain: contextOf(receipts, 1),
    });
    expect(codes(result)).toEqual(
      expect.arrayContaining(["stored_hash_mismatch", "chain_next_mismatch", "signature_invalid"]),
    );
  });

  it("rejects a reordered chain", () => {
    const reordered = [receipts[0], receipts[2], receipts[1]] as SealedReceipt[];
    const results = reordered.map((r, i) =>
      verifyReceipt(r.text, { publicKey, storedText: r.text, chain: contextOf(reordered, i) }),
    );
    expect(results[0]?.valid).toBe(false);
    expect(codes(results[0]!)).toEqual(["chain_next_mismatch"]);
    expect(codes(results[1]!)).toEqual(["chain_previous_mismatch", "chain_next_mismatch"]);
    expect(codes(results[2]!)).toEqual(["chain_previous_mismatch"]);
  });

  it("rejects a fork", () => {
    const r = receipts[1] as SealedReceipt;
    const result = verifyReceipt(r.text, {
      publicKey,
      chain: { ...contextOf(receipts, 1), siblings: 2 },
    });
    expect(codes(result)).toEqual(["chain_fork"]);
  });

  it("rejects a receipt signed with another key", () => {
    const r = receipts[0] as SealedReceipt;
    const doc = JSON.parse(r.text);
    // Signed by key B but claiming key A.
    doc.signatures[0].signature = signReceiptHash(r.hash, keyB);
    expect(codes(verifyReceipt(doc, { publicKey }))).toEqual(["signature_invalid"]);
    // Signed by a key nobody knows, under its own id.
    const stranger = newKey("key_stranger");
    doc.signatures[0] = {
      ...doc.signatures[0],
      key_id: stranger.keyId,
      signature: signReceiptHash(r.hash, stranger),
    };
    expect(codes(verifyReceipt(doc, { publicKey }))).toEqual(["key_unknown"]);
    // No signature at all.
    doc.signatures = [];
    expect(codes(verifyReceipt(doc, { publicKey }))).toEqual(["signature_missing"]);
  });

  it("requires the trust anchor when one is given", () => {
    const r = receipts[0] as SealedReceipt;
    expect(verifyReceipt(r.text, { publicKey, trustAnchorKeyId: "key_a" }).valid).toBe(true);
    expect(codes(verifyReceipt(r.text, { publicKey, trustAnchorKeyId: "key_b" }))).toEqual([
      "untrusted_key",
    ]);
  });

  it("reports a schema marker it does not support and a missing hash", () => {
    const doc = JSON.parse((receipts[0] as SealedReceipt).text);
    doc.schema = "receipt-1999-01-01";
    delete doc.chain.receipt_hash;
    expect(codes(verifyReceipt(doc, { publicKey }))).toEqual([
      "schema_unsupported",
      "hash_missing",
      "signature_invalid",
    ]);
  });

  it("keeps receipts of a rotated-out key verifiable", () => {
    const old = receiptOf(taskEvents({ taskId: "task_old", sequenced: true }), keyA);
    const fresh = receiptOf(taskEvents({ taskId: "task_new", sequenced: true }), keyB, old.hash);
    // After rotation only the public half of key A is kept (e.g. from
    // TRELLIS_RECEIPT_OLD_PUBLIC_KEYS as PEM or JWK).
    const jwk = JSON.stringify({ ...keyA.publicKey.export({ format: "jwk" }), kid: "key_a" });
    const ring = new Map<string, KeyObject>([
      ["key_a", parsePublicKey(jwk)],
      ["key_b", parsePublicKey(publicKeyPem(keyB.publicKey))],
    ]);
    expect(verifyReceipt(old.text, { publicKey: (id) => ring.get(id) }).valid).toBe(true);
    expect(
      verifyReceipt(fresh.text, {
        publicKey: (id) => ring.get(id),
        chain: { previousHash: old.hash },
      }).valid,
    ).toBe(true);
    // Without the old public key, old receipts cannot be checked.
    ring.delete("key_a");
    expect(codes(verifyReceipt(old.text, { publicKey: (id) => ring.get(id) }))).toEqual([
      "key_unknown",
    ]);
  });
});
