/**
 * Canonical JSON and the hashes of receipts and events.
 *
 * Receipts README, "Canonical JSON form": canonicalize the JSON data model
 * with RFC 8785 (JCS) before hashing or signing; `chain.receipt_hash` is the
 * SHA-256 of the canonical receipt with `chain.receipt_hash` and `signatures`
 * removed, written `sha256:<64 hex>`.
 *
 * Canonicalization is `canonicalJson` of @trellis/runtime (json.ts), the
 * maintained `json-canonicalize` package (RFC 8785:
 * keys sorted by UTF-16 code units, ECMAScript number serialization, no
 * whitespace; checked against the RFC's test vectors in
 * test/canonical.test.ts). It rejects NaN and Infinity; lone surrogates,
 * which RFC 8785 also rejects (I-JSON), are refused here.
 *
 * Text that already is canonical (a stored receipt) is recognised without
 * re-serializing it member by member: see {@link isCanonicalText}.
 *
 * Event hash (Trellis' own definition, used for the per-task Merkle root):
 * SHA-256 of the RFC 8785 canonical form of the event's proto3 JSON mapping
 * (`toJson(EventSchema, event)`: lowerCamelCase names, default values
 * omitted, 64-bit integers as strings). Any client that reads the event over
 * gRPC or Connect can recompute it.
 *
 * Merkle root: RFC 6962 §2.1 Merkle Tree Hash over the task's event hashes in
 * per-task sequence order (leaf = SHA-256(0x00 ‖ event hash bytes), node =
 * SHA-256(0x01 ‖ left ‖ right), split at the largest power of two below n).
 *
 * Pure: no I/O.
 */
import { createHash } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import { canonicalJson, hasLoneSurrogate } from "@trellis/runtime";
import { isJsonObject, type Sha256 } from "./receipt.js";

export { canonicalJson };

const SHA256_PATTERN = /^sha256:[0-9a-f]{64}$/;

/**
 * A member name as RFC 8785 writes it (§3.2.3: a string, serialized as
 * §3.2.2.2 says, which is ECMAScript's JSON.stringify — what the library
 * does for names too), without a library call per name.
 */
function memberName(key: string): string {
  const text = JSON.stringify(key);
  if (hasLoneSurrogate(text)) {
    throw new TypeError(
      "a member name holds a lone surrogate, which RFC 8785 (I-JSON) does not allow",
    );
  }
  return text;
}

/**
 * Whether `text` is exactly the RFC 8785 canonical form of `parsed`
 * (`JSON.parse(text)`), decided without a canonicalizer: RFC 8785 writes
 * every value as ECMAScript's JSON.stringify does and only adds the member
 * order (UTF-16 code units), so the text is canonical when JSON.stringify
 * reproduces it byte for byte and every object's members are already in that
 * order (JSON.stringify keeps the parsed order, except that V8 lists
 * integer-like keys first, which then fails the order check). Whitespace,
 * escapes written differently (`\u0041`, `\/`), numbers written
 * differently (`1.0`, `1E3`), duplicate keys and overflowing numbers all
 * make the bytes differ. Lone surrogates, which JSON.stringify would echo
 * but RFC 8785 rejects, make it false too. False only means "not known
 * canonical": the caller then canonicalizes with the library.
 */
export function isCanonicalText(text: string, parsed: unknown): boolean {
  if (hasLoneSurrogate(text)) return false;
  return membersSorted(parsed) && JSON.stringify(parsed) === text;
}

function membersSorted(value: unknown): boolean {
  if (value === null || typeof value !== "object") return true;
  if (Array.isArray(value)) {
    for (const item of value) if (!membersSorted(item)) return false;
    return true;
  }
  let previous: string | undefined;
  for (const key of Object.keys(value)) {
    // String comparison in ECMAScript is by UTF-16 code units, as RFC 8785 sorts.
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!membersSorted((value as Record<string, unknown>)[key])) return false;
  }
  return true;
}

/** `sha256:<hex>` of UTF-8 text or bytes. */
export function sha256Of(data: string | Uint8Array): Sha256 {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

/** Whether `value` is a well-formed `sha256:<64 hex>`. */
export function isSha256(value: unknown): value is Sha256 {
  return typeof value === "string" && SHA256_PATTERN.test(value);
}

/**
 * The hash input of a receipt: a copy without `chain.receipt_hash` and
 * without `signatures`, everything else untouched.
 */
export function hashInput(receipt: Record<string, unknown>): Record<string, unknown> {
  const { signatures: _signatures, ...rest } = receipt;
  if (isJsonObject(rest.chain)) {
    const { receipt_hash: _hash, ...chain } = rest.chain;
    rest.chain = chain;
  }
  return rest;
}

/** The canonical texts of a receipt. */
export interface ReceiptTexts {
  /** Canonical text of the receipt without `chain.receipt_hash` and `signatures`: what is hashed. */
  hashText: string;
  /** Canonical text of the whole receipt: what is stored. */
  fullText: string;
}

/**
 * Both canonical texts of a receipt from one canonicalization of its
 * members. RFC 8785 §3.2.3 serializes an object as its members sorted by
 * key (UTF-16 code units), each `key:value` canonical; the two texts share
 * every member but `chain` and `signatures`, so each member is
 * canonicalized once (by the library) and joined twice. Equal to
 * `canonicalJson(hashInput(r))` and `canonicalJson(r)` (tested), at about
 * half the cost.
 */
export function receiptTexts(receipt: Record<string, unknown>): ReceiptTexts {
  const members = new CanonicalMembers(receipt);
  return {
    hashText: members.hashText(receipt.chain),
    fullText: members.fullText(receipt.chain, receipt.signatures),
  };
}

/**
 * A receipt's members but `chain` and `signatures`, canonicalized once and
 * kept in canonical order, so the hash input and the stored text can both be
 * produced from them (see {@link receiptTexts}).
 */
export class CanonicalMembers {
  /** `[key, "<key>":<canonical value>]`, sorted by key (UTF-16 code units). */
  readonly #shared: [string, string][] = [];

  constructor(receipt: Record<string, unknown>) {
    for (const key of Object.keys(receipt)) {
      const value = receipt[key];
      // As the library does: undefined and symbol members are left out.
      if (value === undefined || typeof value === "symbol") continue;
      if (key === "chain" || key === "signatures") continue;
      this.#shared.push([key, `${memberName(key)}:${canonicalJson(value)}`]);
    }
    // Default sort compares UTF-16 code units, as RFC 8785 and the library do.
    this.#shared.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Canonical text with `chain` (its `receipt_hash` removed) and no `signatures`. */
  hashText(chain: unknown): string {
    if (chain === undefined || typeof chain === "symbol") return this.#join([]);
    let withoutHash: unknown = chain;
    if (isJsonObject(chain)) {
      const { receipt_hash: _hash, ...rest } = chain;
      withoutHash = rest;
    }
    return this.#join([["chain", `"chain":${canonicalJson(withoutHash)}`]]);
  }

  /** Canonical text with `chain` and `signatures` as given. */
  fullText(chain: unknown, signatures: unknown): string {
    const extra: [string, string][] = [];
    if (chain !== undefined && typeof chain !== "symbol") {
      extra.push(["chain", `"chain":${canonicalJson(chain)}`]);
    }
    if (signatures !== undefined && typeof signatures !== "symbol") {
      extra.push(["signatures", `"signatures":${canonicalJson(signatures)}`]);
    }
    return this.#join(extra);
  }

  /** The shared members and `extra` (sorted, keys not among the shared), merged in order. */
  #join(extra: [string, string][]): string {
    const shared = this.#shared;
    let text = "{";
    let i = 0;
    let j = 0;
    while (i < shared.length || j < extra.length) {
      const a = shared[i];
      const b = extra[j];
      let next: [string, string];
      if (b === undefined || (a !== undefined && a[0] < b[0])) {
        next = a as [string, string];
        i++;
      } else {
        next = b;
        j++;
      }
      if (text.length > 1) text += ",";
      text += next[1];
    }
    return `${text}}`;
  }
}

/**
 * Both canonical texts of a receipt given as text that
 * {@link isCanonicalText} accepted (with its parsed value): the text is the
 * full form, and removing members keeps the rest in canonical order, so the
 * hash input is JSON.stringify of {@link hashInput}. Equal to
 * {@link receiptTexts} of the parsed receipt (tested).
 */
export function canonicalReceiptTexts(
  text: string,
  receipt: Record<string, unknown>,
): ReceiptTexts {
  return { hashText: JSON.stringify(hashInput(receipt)), fullText: text };
}

/** The canonical bytes a receipt's hash is computed over. */
export function receiptHashText(receipt: Record<string, unknown>): string {
  return receiptTexts(receipt).hashText;
}

/** `chain.receipt_hash` of a receipt (whatever it currently says). */
export function computeReceiptHash(receipt: object): Sha256 {
  return sha256Of(receiptHashText(receipt as Record<string, unknown>));
}

/** The canonical text of an event (its proto3 JSON mapping, RFC 8785). */
export function eventCanonicalJson(event: Event): string {
  return canonicalJson(toJson(EventSchema, event));
}

/** The hash of an event (see the module comment). */
export function eventHash(event: Event): Sha256 {
  return sha256Of(eventCanonicalJson(event));
}

function digest(...parts: Uint8Array[]): Buffer {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest();
}

const LEAF = Uint8Array.of(0);
const NODE = Uint8Array.of(1);

function hexBytes(hash: Sha256): Buffer {
  return Buffer.from(hash.slice("sha256:".length), "hex");
}

function treeHash(leaves: readonly Buffer[], from: number, to: number): Buffer {
  const n = to - from;
  if (n === 1) return digest(LEAF, leaves[from] as Buffer);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return digest(NODE, treeHash(leaves, from, from + k), treeHash(leaves, from + k, to));
}

/**
 * RFC 6962 Merkle Tree Hash over `hashes` (in order); undefined for none.
 */
export function merkleRoot(hashes: readonly Sha256[]): Sha256 | undefined {
  if (hashes.length === 0) return undefined;
  const leaves = hashes.map(hexBytes);
  return `sha256:${treeHash(leaves, 0, leaves.length).toString("hex")}`;
}
