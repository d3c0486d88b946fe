/**
 * Receipt verification (Receipts README, "Verification contract"): parse,
 * optionally validate against the JSON Schema, re-hash, compare with the
 * stored form and hash, check the chain links around the receipt, verify the
 * signatures with the key ids' public keys.
 *
 * The result lists every problem found, each with a stable code
 * ({@link ProblemCode}); `valid` is true only when there is none.
 *
 * Pure: no I/O. What storage knows (the stored text and hash, the
 * neighbours in the chain, the keys) comes in as {@link VerifyContext}.
 */
import type { KeyObject } from "node:crypto";
import {
  canonicalReceiptTexts,
  isCanonicalText,
  isSha256,
  receiptTexts,
  sha256Of,
} from "./canonical.js";
import { isJsonObject, RECEIPT_SCHEMA, SIGNATURE_ALGORITHM } from "./receipt.js";
import { verifyReceiptSignature } from "./signing.js";

/**
 * Stable problem codes:
 *
 * | code | meaning |
 * |---|---|
 * | `document_unparseable` | not JSON, or not a JSON object |
 * | `schema_unsupported` | `schema` is not `receipt-2026-04-25` |
 * | `schema_invalid` | fails the JSON Schema (when one is configured) |
 * | `hash_missing` | `chain.receipt_hash` absent or not `sha256:<64 hex>` |
 * | `hash_mismatch` | the recomputed hash differs from `chain.receipt_hash` |
 * | `stored_hash_mismatch` | the hash recorded at issuance differs from the document's |
 * | `stored_form_altered` | the stored bytes are not the canonical text that was issued |
 * | `chain_previous_mismatch` | `chain.previous_receipt_hash` is not the prior receipt's hash |
 * | `chain_next_mismatch` | the next receipt does not link to this receipt's hash |
 * | `chain_fork` | another receipt of the workspace links to the same predecessor |
 * | `signature_missing` | no signature |
 * | `signature_algorithm_unsupported` | a signature that is not `ed25519` |
 * | `key_unknown` | no public key is known for the signature's key id |
 * | `signature_invalid` | the signature does not verify with the key id's key |
 * | `untrusted_key` | not signed with the requested trust anchor |
 */
export type ProblemCode =
  | "document_unparseable"
  | "schema_unsupported"
  | "schema_invalid"
  | "hash_missing"
  | "hash_mismatch"
  | "stored_hash_mismatch"
  | "stored_form_altered"
  | "chain_previous_mismatch"
  | "chain_next_mismatch"
  | "chain_fork"
  | "signature_missing"
  | "signature_algorithm_unsupported"
  | "key_unknown"
  | "signature_invalid"
  | "untrusted_key";

/** One reason a receipt does not verify. */
export interface Problem {
  code: ProblemCode;
  message: string;
  /** JSON pointer into the document, when the problem is about one field. */
  field?: string;
}

/** A check that ran. */
export type Check = "parse" | "schema" | "hash" | "stored_form" | "chain" | "signature";

/** The outcome of {@link verifyReceipt}. */
export interface Verification {
  valid: boolean;
  problems: Problem[];
  checks: Check[];
  receiptId?: string;
  /** Key id of the (first) signature. */
  keyId?: string;
}

/** The chain around a stored receipt, as storage recorded it. */
export interface ChainContext {
  /**
   * The stored hash of the receipt before it in the chain; `null` when the
   * receipt is the first of its chain. Omit when unknown (not checked).
   */
  previousHash?: string | null;
  /** `chain.previous_receipt_hash` of the receipt after it; omit when there is none. */
  nextPreviousHash?: string | null;
  /** How many receipts of the chain link to the same predecessor (1 = no fork). */
  siblings?: number;
}

/** What the verifier is told besides the document. */
export interface VerifyContext {
  /** Public key for a key id, or undefined when unknown. */
  publicKey(keyId: string): KeyObject | undefined;
  /** The text as stored, when verifying a stored receipt. */
  storedText?: string;
  /** The hash recorded when the receipt was issued. */
  storedHash?: string;
  chain?: ChainContext;
  /** JSON Schema validation; returns error messages (empty when valid). */
  validateSchema?: (document: unknown) => string[];
  /** Require a signature by this key id. */
  trustAnchorKeyId?: string;
}

/** Verify a receipt given as JSON text or as a parsed document. */
export function verifyReceipt(input: string | unknown, context: VerifyContext): Verification {
  const problems: Problem[] = [];
  const checks: Check[] = ["parse"];
  let document: unknown = input;
  if (typeof input === "string") {
    try {
      document = JSON.parse(input);
    } catch (error) {
      problems.push({
        code: "document_unparseable",
        message: `the receipt is not JSON: ${error instanceof Error ? error.message : String(error)}`,
      });
      return { valid: false, problems, checks };
    }
  }
  if (!isJsonObject(document)) {
    problems.push({ code: "document_unparseable", message: "the receipt is not a JSON object" });
    return { valid: false, problems, checks };
  }
  const receiptId = typeof document.receipt_id === "string" ? document.receipt_id : undefined;

  if (document.schema !== RECEIPT_SCHEMA) {
    problems.push({
      code: "schema_unsupported",
      message: `schema is ${JSON.stringify(document.schema)}, expected ${RECEIPT_SCHEMA}`,
      field: "/schema",
    });
  }
  if (context.validateSchema) {
    checks.push("schema");
    for (const message of context.validateSchema(document)) {
      problems.push({ code: "schema_invalid", message });
    }
  }

  // Hash (README steps 2–4).
  checks.push("hash");
  const chain = isJsonObject(document.chain) ? document.chain : {};
  const claimed = chain.receipt_hash;
  let recomputed: string | undefined;
  let canonical: string | undefined;
  try {
    // A stored or exported receipt is normally canonical text already:
    // recognised as such, it needs no member-by-member canonicalization.
    const texts =
      typeof input === "string" && isCanonicalText(input, document)
        ? canonicalReceiptTexts(input, document)
        : receiptTexts(document);
    recomputed = sha256Of(texts.hashText);
    canonical = texts.fullText;
  } catch (error) {
    problems.push({
      code: "document_unparseable",
      message: `the receipt cannot be canonicalized: ${error instanceof Error ? error.message : String(error)}`,
    });
  }
  if (!isSha256(claimed)) {
    problems.push({
      code: "hash_missing",
      message: "chain.receipt_hash is missing or not sha256:<64 hex>",
      field: "/chain/receipt_hash",
    });
  } else if (recomputed !== undefined && recomputed !== claimed) {
    problems.push({
      code: "hash_mismatch",
      message: `the receipt hashes to ${recomputed}, not ${claimed}`,
      field: "/chain/receipt_hash",
    });
  }

  // Stored form: the bytes kept at issuance are the canonical text, and the
  // hash recorded beside them is the document's.
  if (context.storedText !== undefined || context.storedHash !== undefined) {
    checks.push("stored_form");
    if (context.storedText !== undefined) {
      if (canonical !== context.storedText) {
        problems.push({
          code: "stored_form_altered",
          message: "the stored receipt is not the canonical text that was issued",
        });
      }
    }
    if (context.storedHash !== undefined && context.storedHash !== claimed) {
      problems.push({
        code: "stored_hash_mismatch",
        message: `the hash recorded at issuance is ${context.storedHash}, the receipt says ${String(claimed)}`,
        field: "/chain/receipt_hash",
      });
    }
  }

  // Chain links (README step 5).
  if (context.chain) {
    checks.push("chain");
    const { previousHash, nextPreviousHash, siblings } = context.chain;
    const claimedPrevious = chain.previous_receipt_hash ?? null;
    if (previousHash !== undefined && claimedPrevious !== previousHash) {
      problems.push({
        code: "chain_previous_mismatch",
        message:
          previousHash === null
            ? `the receipt is first in its chain but links to ${String(claimedPrevious)}`
            : `chain.previous_receipt_hash is ${String(claimedPrevious)}, the prior receipt's hash is ${previousHash}`,
        field: "/chain/previous_receipt_hash",
      });
    }
    if (nextPreviousHash !== undefined && nextPreviousHash !== claimed) {
      problems.push({
        code: "chain_next_mismatch",
        message: `the next receipt links to ${String(nextPreviousHash)}, not to this receipt's hash`,
        field: "/chain/receipt_hash",
      });
    }
    if (siblings !== undefined && siblings > 1) {
      problems.push({
        code: "chain_fork",
        message: `${siblings} receipts link to the same predecessor`,
        field: "/chain/previous_receipt_hash",
      });
    }
  }

  // Signatures over chain.receipt_hash (README step 7).
  checks.push("signature");
  const signatures = Array.isArray(document.signatures) ? document.signatures : [];
  let keyId: string | undefined;
  if (signatures.length === 0) {
    problems.push({
      code: "signature_missing",
      message: "the receipt has no signature",
      field: "/signatures",
    });
  }
  let anchored = false;
  signatures.forEach((signature, index) => {
    const field = `/signatures/${index}`;
    if (!isJsonObject(signature)) {
      problems.push({ code: "signature_invalid", message: "a signature is not an object", field });
      return;
    }
    const id = typeof signature.key_id === "string" ? signature.key_id : "";
    keyId ??= id;
    if (id === context.trustAnchorKeyId) anchored = true;
    if (String(signature.algorithm).toLowerCase() !== SIGNATURE_ALGORITHM) {
      problems.push({
        code: "signature_algorithm_unsupported",
        message: `signature algorithm ${JSON.stringify(signature.algorithm)} is not supported (ed25519)`,
        field: `${field}/algorithm`,
      });
      return;
    }
    const key = context.publicKey(id);
    if (!key) {
      problems.push({
        code: "key_unknown",
        message: `no public key is known for key id ${JSON.stringify(id)}`,
        field: `${field}/key_id`,
      });
      return;
    }
    const value = typeof signature.signature === "string" ? signature.signature : "";
    // The signature covers the hash the receipt claims; a wrong claim is
    // already hash_mismatch.
    if (!isSha256(claimed) || !verifyReceiptSignature(claimed, value, key)) {
      problems.push({
        code: "signature_invalid",
        message: `the signature does not verify with key ${JSON.stringify(id)}`,
        field: `${field}/signature`,
      });
    }
  });
  if (context.trustAnchorKeyId && !anchored) {
    problems.push({
      code: "untrusted_key",
      message: `the receipt is not signed with the trust anchor ${JSON.stringify(context.trustAnchorKeyId)}`,
      field: "/signatures",
    });
  }

  return {
    valid: problems.length === 0,
    problems,
    checks,
    ...(receiptId ? { receiptId } : {}),
    ...(keyId ? { keyId } : {}),
  };
}
