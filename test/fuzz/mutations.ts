/**
 * How the fuzz generator spoils a valid request: JSON and binary
 * mutations, bad framing, bad auth headers.
 */
import { type DescMessage, type JsonValue, ScalarType } from "@bufbuild/protobuf";
import { envelope } from "@trellis/runtime/testing";
import type { FuzzSetup } from "./fuzz-setup.js";
import type { Rng } from "./prng.js";
import { deepJson, randomJson } from "./values.js";

// --- mutations ---------------------------------------------------------------

function flipBytes(rng: Rng, bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes);
  if (out.length === 0) return rng.bytes(rng.int(1, 8));
  for (let n = rng.int(1, 4); n > 0; n--) out[rng.int(0, out.length - 1)] = rng.int(0, 255);
  return out;
}

function truncate(rng: Rng, bytes: Uint8Array): Uint8Array {
  return bytes.subarray(0, bytes.length === 0 ? 0 : rng.int(0, bytes.length - 1));
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts.map((p) => Buffer.from(p))));
}

/** Every object and array slot of `value`, as paths of keys. */
function slots(
  value: JsonValue,
  path: (string | number)[] = [],
  out: (string | number)[][] = [],
): (string | number)[][] {
  if (value === null || typeof value !== "object" || out.length > 200) return out;
  const entries: [string | number, JsonValue][] = Array.isArray(value)
    ? value.map((v, i) => [i, v] as [number, JsonValue])
    : Object.entries(value);
  for (const [key, child] of entries) {
    out.push([...path, key]);
    slots(child, [...path, key], out);
  }
  return out;
}

function setAt(root: JsonValue, path: (string | number)[], value: JsonValue): JsonValue {
  if (path.length === 0) return value;
  let node = root as Record<string | number, JsonValue>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, JsonValue>;
  node[path.at(-1) as string | number] = value;
  return root;
}

/**
 * What `JSON.parse(JSON.stringify(value))` gives, without serialising the
 * strings: objects and arrays are new, strings shared (they cannot change).
 * A body of lists of long strings runs to tens of megabytes before it is cut
 * at twice the body limit, and the round trip through text took seconds of
 * the test process's event loop.
 */
export function copyJson(value: unknown): JsonValue {
  if (typeof value === "number") return Number.isFinite(value) ? value + 0 : null;
  if (typeof value !== "object" || value === null) return value as JsonValue;
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : copyJson(v)));
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, copyJson(v)]),
  );
}

function swapType(rng: Rng, value: JsonValue | undefined): JsonValue {
  if (typeof value === "string") return rng.pick<JsonValue>([12, true, [value], { v: value }, 1.5]);
  if (typeof value === "number") return rng.pick<JsonValue>(["12", "abc", [value], "1e400", 1.25]);
  if (typeof value === "boolean") return rng.pick<JsonValue>(["true", 1, null]);
  if (Array.isArray(value)) return rng.pick<JsonValue>([{}, "[]", 3]);
  if (value !== null && typeof value === "object") return rng.pick<JsonValue>([[], "{}", 7, true]);
  return rng.pick<JsonValue>([{}, [], "x", 0]);
}

/**
 * `JSON.stringify(value)`, or a prefix of it longer than `atLeast`
 * characters when the whole is longer than that: for a body the caller cuts
 * anyway. Whole tokens only, so the prefix ends with a complete string,
 * number or punctuation mark.
 */
export function jsonPrefix(value: JsonValue, atLeast: number): string {
  const parts: string[] = [];
  let length = 0;
  // false once past `atLeast`: nothing more is written.
  const put = (text: string): boolean => {
    parts.push(text);
    length += text.length;
    return length <= atLeast;
  };
  const write = (v: JsonValue | undefined): boolean => {
    if (Array.isArray(v)) {
      if (!put("[")) return false;
      for (let i = 0; i < v.length; i++) {
        if (i > 0 && !put(",")) return false;
        if (!write(v[i] ?? null)) return false;
      }
      return put("]");
    }
    if (v !== null && typeof v === "object") {
      if (!put("{")) return false;
      let first = true;
      for (const [key, child] of Object.entries(v)) {
        if (child === undefined) continue;
        if (!first && !put(",")) return false;
        first = false;
        if (!put(`${JSON.stringify(key)}:`) || !write(child)) return false;
      }
      return put("}");
    }
    return put(JSON.stringify(v ?? null));
  };
  write(value);
  return parts.join("");
}

/**
 * Mutate a JSON body (text out); returns the label too. With `keep`, the
 * caller keeps only the first `keep` bytes of the text (it cuts what is
 * longer), and the text may be made only a little past that: a generated
 * message of lists of long strings can run to tens of megabytes, and
 * serialising all of it took seconds of the test process's event loop.
 * Those first `keep` bytes, and whether the text is longer, are the same
 * either way.
 */
export function mutateJson(
  rng: Rng,
  json: JsonValue,
  setup: FuzzSetup,
  keep?: number,
): { text: Uint8Array; label: string } {
  // The mutations below look at most a few characters ahead of a position
  // (`:0,`), and a character is at least one byte: 16 characters past `keep`
  // leave every byte up to `keep` as the whole text has it.
  const stringify = (v: JsonValue) =>
    keep === undefined ? JSON.stringify(v) : jsonPrefix(v, keep + 16);
  const enc = (v: JsonValue | string) => Buffer.from(typeof v === "string" ? v : stringify(v));
  const copy = copyJson(json);
  const places = slots(copy);
  const place = places.length > 0 ? rng.pick(places) : [];
  const get = (p: (string | number)[]) =>
    p.reduce<JsonValue | undefined>(
      (n, k) => (n as Record<string | number, JsonValue> | undefined)?.[k],
      copy,
    );
  const kind = rng.weighted<string>([
    [5, "type-swap"],
    [3, "unknown-enum"],
    [2, "unknown-field"],
    [3, "deep"],
    [2, "wide"],
    [2, "huge"],
    [3, "bad-utf8"],
    [3, "syntax"],
    [2, "not-object"],
    [2, "nul"],
    [2, "numbers"],
    [1, "duplicate-keys"],
    [1, "bom"],
  ]);
  switch (kind) {
    case "type-swap":
      return { text: enc(setAt(copy, place, swapType(rng, get(place)))), label: "json:type-swap" };
    case "unknown-enum": {
      const enumish = places.filter(
        (p) =>
          /^[A-Z][A-Z0-9_]+$/.test(String(get(p))) ||
          /role|kind|status|policy|visibility|type|backend|tier/.test(String(p.at(-1))),
      );
      const target = enumish.length > 0 ? rng.pick(enumish) : place;
      return {
        text: enc(
          setAt(
            copy,
            target,
            rng.pick(["NOT_A_REAL_VALUE", "robot", "", "ROLE_USER ", "busy_policy_enqueue"]),
          ),
        ),
        label: "json:unknown-enum",
      };
    }
    case "unknown-field": {
      const obj = copy !== null && typeof copy === "object" && !Array.isArray(copy) ? copy : {};
      obj[rng.pick(["zzz_unknown", "__proto__", "constructor", "sessionid"])] = randomJson(rng);
      return { text: enc(obj), label: "json:unknown-field" };
    }
    case "deep": {
      const levels = rng.pick([40, 80, 200, 2000, 20_000]);
      const deep = deepJson(levels, rng.chance(0.5));
      const marker = "\u0001DEEP\u0001";
      const text = stringify(setAt(copy, place, marker)).replace(JSON.stringify(marker), deep);
      return { text: enc(text), label: `json:deep-${levels}` };
    }
    case "wide": {
      // An object of many keys (issue 22: 200,000 metadata keys froze the process).
      const keys = Math.min(
        rng.pick([1_001, 20_000, 200_000]),
        Math.floor(setup.maxBodyBytes / 16),
      );
      const parts: string[] = [];
      for (let i = 0; i < keys; i++) parts.push(`"k${i}":${i % 7 === 0 ? '"v"' : i}`);
      const marker = "\u0001WIDE\u0001";
      const text = stringify(setAt(copy, place, marker)).replace(
        JSON.stringify(marker),
        `{${parts.join(",")}}`,
      );
      return { text: enc(text), label: `json:wide-${keys}` };
    }
    case "huge": {
      const over = rng.chance(0.5);
      const size = over
        ? setup.maxBodyBytes + rng.int(1, 4096)
        : Math.floor(setup.maxBodyBytes * 0.8);
      return {
        text: enc(setAt(copy, place, "h".repeat(size))),
        label: over ? "json:oversize" : "json:huge-string",
      };
    }
    case "bad-utf8": {
      const marker = "\u0001BAD\u0001";
      const text = stringify(setAt(copy, place, marker));
      const [before, after] = text.split(JSON.stringify(marker));
      const bad = rng.pick([
        [0xff, 0xfe],
        [0xc3, 0x28],
        [0xed, 0xa0, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0xc0, 0xaf],
      ]);
      return {
        text: concat(
          Buffer.from(`${before ?? ""}"`),
          new Uint8Array(bad),
          Buffer.from(`"${after ?? ""}`),
        ),
        label: "json:bad-utf8",
      };
    }
    case "syntax": {
      // The whole text: where to truncate or flip is drawn over all of it.
      const whole = JSON.stringify(copy);
      const text = Buffer.from(whole);
      return rng.pick([
        { text: truncate(rng, text), label: "json:truncated" },
        { text: flipBytes(rng, text), label: "json:byte-flip" },
        { text: enc(`${whole},`), label: "json:trailing-comma" },
        { text: enc(whole.replaceAll('"', "'")), label: "json:single-quotes" },
        { text: enc(`${whole}${whole}`), label: "json:two-documents" },
      ]);
    }
    case "not-object":
      return {
        text: enc(rng.pick(["[]", "123", '"str"', "null", "true", "[{}]"])),
        label: "json:not-object",
      };
    case "nul":
      return { text: enc(setAt(copy, place, "\u0000\u0000")), label: "json:nul" };
    case "numbers":
      return {
        text: enc(
          stringify(setAt(copy, place, 0)).replace(
            /:0([,}])/,
            `:${rng.pick(["1e400", "-0", "1.5", "0x10", "NaN", "-1", "99999999999999999999999"])}$1`,
          ),
        ),
        label: "json:numbers",
      };
    case "duplicate-keys": {
      const text = stringify(copy);
      return {
        text: enc(
          text.startsWith("{") && text.length > 2 ? `{"a":1,"a":[],${text.slice(1)}` : text,
        ),
        label: "json:duplicate-keys",
      };
    }
    default:
      return {
        text: concat(new Uint8Array([0xef, 0xbb, 0xbf]), Buffer.from(stringify(copy))),
        label: "json:bom",
      };
  }
}

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n >>> 0;
  while (v > 127) {
    out.push((v & 127) | 128);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

/**
 * `levels` of Value{list_value: ListValue{values: [Value{…}]}} around an empty
 * Value, as protobuf bytes (field 6 `list_value` of Value, field 1 `values` of
 * ListValue). Every level is only its two tags and lengths, so the lengths
 * are worked out from the inside out and the tags written from the outside
 * in: linear in `levels` (wrapping a copy per level was quadratic, seconds of
 * the test process's event loop at 3000 levels).
 */
export function nestedValues(levels: number): Uint8Array {
  // lengths[i]: the byte length of the Value nested i levels deep (0 innermost).
  const lengths = [0];
  for (let i = 1; i <= levels; i++) {
    const inner = lengths[i - 1] as number;
    const list = 1 + varint(inner).length + inner;
    lengths.push(1 + varint(list).length + list);
  }
  const out = new Uint8Array(lengths[levels] as number);
  let at = 0;
  const put = (bytes: number[]) => {
    out.set(bytes, at);
    at += bytes.length;
  };
  for (let i = levels; i >= 1; i--) {
    const inner = lengths[i - 1] as number;
    const list = 1 + varint(inner).length + inner;
    put([0x32, ...varint(list)]);
    put([0x0a, ...varint(inner)]);
  }
  return out;
}

export function mutateBinary(
  rng: Rng,
  desc: DescMessage,
  bytes: Uint8Array,
  setup: FuzzSetup,
): { bytes: Uint8Array; label: string } {
  const stringField = desc.fields.find(
    (f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING,
  );
  const kind = rng.weighted<string>([
    [5, "byte-flip"],
    [3, "truncate"],
    [2, "garbage"],
    [2, "append-garbage"],
    [3, "bad-utf8"],
    [2, "deep"],
    [1, "wire-type"],
    [1, "varint"],
    [1, "length"],
    [1, "oversize"],
    [1, "group"],
  ]);
  switch (kind) {
    case "byte-flip":
      return { bytes: flipBytes(rng, bytes), label: "bin:byte-flip" };
    case "truncate":
      return { bytes: truncate(rng, bytes), label: "bin:truncate" };
    case "garbage":
      return { bytes: rng.bytes(rng.int(1, 64)), label: "bin:garbage" };
    case "append-garbage":
      return { bytes: concat(bytes, rng.bytes(rng.int(1, 16))), label: "bin:append-garbage" };
    case "bad-utf8": {
      const no = stringField?.number ?? 1;
      const bad = [0xff, 0xfe, 0xc3, 0x28];
      return {
        bytes: concat(bytes, new Uint8Array([...varint((no << 3) | 2), bad.length, ...bad])),
        label: "bin:bad-utf8",
      };
    }
    case "deep": {
      // A google.protobuf.Value field (or any field number 2) nested deep: Value{list_value{values: Value{…}}}.
      const levels = rng.pick([60, 150, 3000]);
      const inner = nestedValues(levels);
      const valueField = desc.fields.find(
        (f) => f.fieldKind === "message" && f.message.typeName === "google.protobuf.Value",
      );
      const no = valueField?.number ?? rng.int(1, 9);
      return {
        bytes: concat(
          bytes,
          new Uint8Array([...varint((no << 3) | 2), ...varint(inner.length)]),
          inner,
        ),
        label: `bin:deep-${levels}`,
      };
    }
    case "wire-type":
      return { bytes: concat(bytes, new Uint8Array([0x0f, 0x01])), label: "bin:wire-type-7" };
    case "varint":
      return {
        bytes: concat(bytes, new Uint8Array([0x08, ...Array(11).fill(0xff)])),
        label: "bin:overlong-varint",
      };
    case "length":
      return {
        bytes: concat(bytes, new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x07, 0x01])),
        label: "bin:length-past-end",
      };
    case "oversize": {
      const no = stringField?.number ?? 1;
      const big = Buffer.alloc(setup.maxBodyBytes + 100, 0x61);
      return {
        bytes: concat(
          bytes,
          new Uint8Array([...varint((no << 3) | 2), ...varint(big.length)]),
          big,
        ),
        label: "bin:oversize",
      };
    }
    default:
      // A start-group tag that never ends.
      return {
        bytes: concat(bytes, new Uint8Array([0x0b, 0x10, 0x01])),
        label: "bin:unterminated-group",
      };
  }
}

export function frame(
  rng: Rng,
  message: Uint8Array,
  mutate: boolean,
  endFlag: number | undefined,
): { body: Uint8Array; label?: string } {
  const framed = concat(
    envelope(message),
    endFlag === undefined ? new Uint8Array() : envelope(Buffer.from("{}"), endFlag),
  );
  if (!mutate) return { body: framed };
  const kind = rng.int(0, 6);
  switch (kind) {
    case 0: {
      const out = new Uint8Array(envelope(message));
      new DataView(out.buffer).setUint32(1, message.length + rng.int(1, 1000));
      return { body: out, label: "env:length-long" };
    }
    case 1: {
      const out = new Uint8Array(envelope(message));
      new DataView(out.buffer).setUint32(1, Math.max(0, message.length - rng.int(1, 3)));
      return { body: out, label: "env:length-short" };
    }
    case 2:
      return { body: envelope(message, 1), label: "env:compressed-flag" };
    case 3:
      return { body: envelope(message, rng.pick([0x80, 0x02, 0x7f])), label: "env:odd-flags" };
    case 4:
      return { body: message, label: "env:none" };
    case 5:
      return { body: concat(envelope(message), envelope(message)), label: "env:two-messages" };
    default:
      return { body: new Uint8Array(), label: "env:empty" };
  }
}

export function authHeaders(
  rng: Rng,
  setup: FuzzSetup,
  mutations: string[],
): Record<string, string> {
  if (!rng.chance(0.1)) return { authorization: `Bearer ${setup.apiKey}` };
  const bad = rng.pick<Record<string, string>>([
    {},
    { authorization: "Bearer" },
    { authorization: "Basic dXNlcjpwYXNz" },
    { authorization: `Bearer ${"k".repeat(6000)}` },
    { authorization: "Bearer trk_nope_0123456789" },
    { authorization: `bearer ${setup.apiKey}` },
    {
      authorization: `Bearer ${setup.apiKey}`,
      "x-trellis-actor": "root",
      "x-trellis-workspace": "other",
      "x-trellis-scopes": "*",
    },
  ]);
  mutations.push("hdr:auth");
  return bad;
}
