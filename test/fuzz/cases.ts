/**
 * The fuzz run's request generator: from a seed and a case number, one
 * malformed (or merely hostile) request against the REST surface or an RPC —
 * valid requests first, built from the route table and the protobuf
 * descriptors, then mutated: byte flips, truncation, type swaps, huge and
 * deeply nested payloads, unknown enum names, bad UTF-8, bad framing, bad
 * headers, bad paths.
 */
import {
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromJson,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { envelope, type RawRequest } from "../../packages/runtime/test/wire.js";
import { Rng } from "./prng.js";

/**
 * A vault id the pool's workspace holds: another workspace creating one of
 * the same id must not be told it exists (ids are unique per workspace).
 */
export const TAKEN_VAULT_ID = "vlt_fuzz_taken";

/** Ids of real resources, so that some requests reach deep into handlers. */
export interface Pool {
  workspaceId: string;
  agentId: string;
  sessionId: string;
  taskId: string;
  artifactId: string;
  messageId: string;
  eventId: string;
}

/** A REST route as the fuzzer sees it (the gateway's route table). */
export interface RestRouteInfo {
  method: string;
  path: string;
}

/** An RPC method and where it can be called. */
export interface RpcTarget {
  method: DescMethod;
  /** Base URLs serving it: the gateway and/or the owning service. */
  viaGateway: boolean;
  directUrl: string | undefined;
}

/** Where the generated requests go and with what credentials. */
export interface FuzzSetup {
  gatewayUrl: string;
  apiKey: string;
  protocolVersion: string;
  pool: Pool;
  restRoutes: readonly RestRouteInfo[];
  rpcTargets: readonly RpcTarget[];
  /** The mesh's body limit (oversize cases go just past it). */
  maxBodyBytes: number;
}

export type Surface = "rest" | "rpc" | "raw";
export type WireProtocol =
  | "rest"
  | "connect-json"
  | "connect-proto"
  | "connect-get"
  | "connect-stream-json"
  | "connect-stream-proto"
  | "grpc"
  | "grpc-json"
  | "grpc-web"
  | "raw-http";

/** One generated request. */
export interface FuzzCase {
  index: number;
  surface: Surface;
  protocol: WireProtocol;
  transport: "h1" | "h2" | "socket";
  baseUrl: string;
  request: RawRequest;
  /** Raw bytes for `socket` cases (sent as they are). */
  raw?: string;
  /** What was done to the request, for the report. */
  mutations: string[];
  /** The request set a deadline: DeadlineExceeded is the client's own doing. */
  deadlineSet: boolean;
  /** The path was made up: Unimplemented / 404 is the right answer. */
  unknownPath: boolean;
  /** The RPC (for the report). */
  target: string;
  /**
   * Why this request must not succeed (a hostile shape sent intact, e.g. a
   * webhook to an IPv6 spelling of loopback): a 2xx is a failure.
   */
  mustRefuse?: string;
  /** Statuses that would leak something here (e.g. 409 for another workspace's id). */
  leakStatuses?: readonly number[];
}

// --- values ------------------------------------------------------------------

const hostileStrings = [
  "",
  " ",
  "x",
  "\u0000",
  "a\u0000b",
  "\u202eevil",
  "🦜🦜🦜",
  "\ud800",
  "../../../../etc/passwd",
  "' OR 1=1 --",
  "%00%ff",
  "null",
  "\r\nx-injected: 1",
  "<script>alert(1)</script>",
  "text/plain\r\nSet-Cookie: a=b",
  "text/html",
  "ses_doesnotexist",
  "-1",
  "9".repeat(40),
];

function hostileString(rng: Rng, maxBytes: number): string {
  return rng.weighted<() => string>([
    [10, () => rng.pick(hostileStrings)],
    [4, () => "y".repeat(rng.int(200, 4000))],
    [1, () => "z".repeat(rng.int(20_000, Math.floor(maxBytes / 2)))],
    [
      3,
      () =>
        String.fromCharCode(...Array.from({ length: rng.int(1, 30) }, () => rng.int(1, 0x2fff))),
    ],
  ])();
}

function idFor(name: string, pool: Pool): string | undefined {
  const n = name.toLowerCase();
  if (n.includes("session")) return pool.sessionId;
  if (n.includes("agent") || n.includes("persona")) return pool.agentId;
  if (n.includes("task")) return pool.taskId;
  if (n.includes("artifact")) return pool.artifactId;
  if (n.includes("workspace")) return pool.workspaceId;
  if (n.includes("message")) return pool.messageId;
  if (n.includes("event") || n === "cursor" || n === "after") return pool.eventId;
  return undefined;
}

function randomJson(rng: Rng, depth = 0): JsonValue {
  const kind = rng.int(0, depth > 3 ? 3 : 5);
  switch (kind) {
    case 0:
      return rng.pick(hostileStrings);
    case 1:
      return rng.pick([0, -1, 1.5, 1e300, 2 ** 53 + 1]);
    case 2:
      return rng.chance(0.5);
    case 3:
      return null;
    case 4:
      return Array.from({ length: rng.int(0, 3) }, () => randomJson(rng, depth + 1));
    default: {
      const out: JsonObject = {};
      for (let i = rng.int(0, 3); i > 0; i--)
        out[rng.pick(["a", "b", "", "\u0000", "k"])] = randomJson(rng, depth + 1);
      return out;
    }
  }
}

/** JSON nested `levels` deep: arrays or objects. */
function deepJson(levels: number, objects: boolean): string {
  return objects
    ? `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`
    : `${"[".repeat(levels)}${"]".repeat(levels)}`;
}

// --- messages from descriptors -----------------------------------------------

const wellKnown: Record<string, (rng: Rng) => JsonValue> = {
  "google.protobuf.Struct": (rng) => ({ k: randomJson(rng, 2), n: 1 }),
  "google.protobuf.Value": (rng) => randomJson(rng, 1),
  "google.protobuf.ListValue": (rng) => [randomJson(rng, 2)],
  "google.protobuf.Timestamp": (rng) =>
    rng.pick(["2026-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]),
  "google.protobuf.Duration": (rng) => rng.pick(["0s", "1.5s", "315576000000s"]),
  "google.protobuf.Empty": () => ({}),
  "google.protobuf.FieldMask": () => "a,b.c",
  "google.protobuf.StringValue": (rng) => rng.pick(hostileStrings),
  "google.protobuf.BoolValue": () => true,
  "google.protobuf.Int64Value": () => "9223372036854775807",
  "google.protobuf.Int32Value": () => -1,
  "google.protobuf.DoubleValue": () => "NaN",
};

function scalarJson(scalar: ScalarType, name: string, rng: Rng, setup: FuzzSetup): JsonValue {
  switch (scalar) {
    case ScalarType.STRING: {
      const id = idFor(name, setup.pool);
      if (id !== undefined && rng.chance(0.5)) return id;
      return hostileString(rng, setup.maxBodyBytes);
    }
    case ScalarType.BOOL:
      return rng.chance(0.5);
    case ScalarType.BYTES:
      return Buffer.from(rng.bytes(rng.int(0, 48))).toString("base64");
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return rng.pick([0, 1, -1, 2147483647, -2147483648, rng.int(-1000, 1000)]);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return rng.pick([0, 1, 4294967295, rng.int(0, 1000)]);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return rng.pick(["0", "-1", "1", "9223372036854775807", "-9223372036854775808", "1000"]);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return rng.pick(["0", "1", "18446744073709551615", "200"]);
    case ScalarType.FLOAT:
      return rng.pick([0, -1.5, 3.4e38, "NaN", "-Infinity"]);
    default:
      return rng.pick([0, -1.5, 1e308, "NaN", "Infinity"]);
  }
}

function enumJson(field: DescField & { enum: NonNullable<unknown> }, rng: Rng): JsonValue {
  const values = (field as unknown as { enum: { values: { name: string; number: number }[] } }).enum
    .values;
  if (rng.chance(0.8)) return rng.pick(values).name;
  // Open enums: numbers the schema does not name reach the handler.
  return rng.pick([99, -5, 2147483647]);
}

function singleJson(field: DescField, rng: Rng, setup: FuzzSetup, depth: number): JsonValue {
  if (field.fieldKind === "scalar") return scalarJson(field.scalar, field.name, rng, setup);
  if (field.fieldKind === "enum") return enumJson(field as never, rng);
  if (field.fieldKind === "message") return messageJson(field.message, rng, setup, depth + 1);
  return null;
}

/** A proto3-JSON object for `desc` with type-correct, hostile values. */
export function messageJson(desc: DescMessage, rng: Rng, setup: FuzzSetup, depth = 0): JsonValue {
  const wkt = wellKnown[desc.typeName];
  if (wkt) return wkt(rng);
  if (desc.typeName === "google.protobuf.Any" || depth > 4) return {};
  const out: JsonObject = {};
  const oneofsTaken = new Set<string>();
  for (const field of desc.fields) {
    const looksLikeId = /(^|_)id$/.test(field.name);
    if (!rng.chance(looksLikeId ? 0.8 : 0.5)) continue;
    if (field.oneof) {
      if (oneofsTaken.has(field.oneof.name)) continue;
      oneofsTaken.add(field.oneof.name);
    }
    switch (field.fieldKind) {
      case "list": {
        const n = rng.weighted([
          [6, rng.int(0, 3)],
          [1, rng.int(50, 400)],
        ]);
        const items: JsonValue[] = [];
        for (let i = 0; i < n; i++) {
          if (field.listKind === "scalar")
            items.push(scalarJson(field.scalar, field.name, rng, setup));
          else if (field.listKind === "enum") items.push(enumJson(field as never, rng));
          else items.push(messageJson(field.message, rng, setup, depth + 1));
        }
        out[field.jsonName] = items;
        break;
      }
      case "map": {
        const map: JsonObject = {};
        for (let i = rng.int(0, 3); i > 0; i--) {
          const key =
            field.mapKey === ScalarType.STRING
              ? rng.pick(["", "k", "\u0000", "🦜"])
              : String(rng.int(-5, 5));
          map[key] =
            field.mapKind === "scalar"
              ? scalarJson(field.scalar, field.name, rng, setup)
              : field.mapKind === "enum"
                ? enumJson(field as never, rng)
                : messageJson(field.message, rng, setup, depth + 1);
        }
        out[field.jsonName] = map;
        break;
      }
      default:
        out[field.jsonName] = singleJson(field, rng, setup, depth);
    }
  }
  return out;
}

/** The binary form of `json`, or undefined when protobuf-es will not take it. */
function toBinaryOf(desc: DescMessage, json: JsonValue): Uint8Array | undefined {
  try {
    return toBinary(
      desc,
      fromJson(desc, json, { ignoreUnknownFields: true, recursionLimit: 10_000 }),
    );
  } catch {
    return undefined;
  }
}

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

function swapType(rng: Rng, value: JsonValue | undefined): JsonValue {
  if (typeof value === "string") return rng.pick<JsonValue>([12, true, [value], { v: value }, 1.5]);
  if (typeof value === "number") return rng.pick<JsonValue>(["12", "abc", [value], "1e400", 1.25]);
  if (typeof value === "boolean") return rng.pick<JsonValue>(["true", 1, null]);
  if (Array.isArray(value)) return rng.pick<JsonValue>([{}, "[]", 3]);
  if (value !== null && typeof value === "object") return rng.pick<JsonValue>([[], "{}", 7, true]);
  return rng.pick<JsonValue>([{}, [], "x", 0]);
}

/** Mutate a JSON body (text out); returns the label too. */
function mutateJson(
  rng: Rng,
  json: JsonValue,
  setup: FuzzSetup,
): { text: Uint8Array; label: string } {
  const enc = (v: JsonValue | string) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v));
  const copy = JSON.parse(JSON.stringify(json)) as JsonValue;
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
      const text = JSON.stringify(setAt(copy, place, marker)).replace(JSON.stringify(marker), deep);
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
      const text = JSON.stringify(setAt(copy, place, marker)).replace(
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
      const text = JSON.stringify(setAt(copy, place, marker));
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
      const text = Buffer.from(JSON.stringify(copy));
      return rng.pick([
        { text: truncate(rng, text), label: "json:truncated" },
        { text: flipBytes(rng, text), label: "json:byte-flip" },
        { text: enc(`${JSON.stringify(copy)},`), label: "json:trailing-comma" },
        { text: enc(JSON.stringify(copy).replaceAll('"', "'")), label: "json:single-quotes" },
        {
          text: enc(`${JSON.stringify(copy)}${JSON.stringify(copy)}`),
          label: "json:two-documents",
        },
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
          JSON.stringify(setAt(copy, place, 0)).replace(
            /:0([,}])/,
            `:${rng.pick(["1e400", "-0", "1.5", "0x10", "NaN", "-1", "99999999999999999999999"])}$1`,
          ),
        ),
        label: "json:numbers",
      };
    case "duplicate-keys": {
      const text = JSON.stringify(copy);
      return {
        text: enc(
          text.startsWith("{") && text.length > 2 ? `{"a":1,"a":[],${text.slice(1)}` : text,
        ),
        label: "json:duplicate-keys",
      };
    }
    default:
      return {
        text: concat(new Uint8Array([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(copy))),
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

function mutateBinary(
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
      let inner = new Uint8Array(0);
      const levels = rng.pick([60, 150, 3000]);
      for (let i = 0; i < levels; i++) {
        const list = new Uint8Array([0x0a, ...varint(inner.length), ...inner]);
        inner = new Uint8Array([0x32, ...varint(list.length), ...list]);
      }
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

function frame(
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

// --- requests ------------------------------------------------------------------

function authHeaders(rng: Rng, setup: FuzzSetup, mutations: string[]): Record<string, string> {
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

function rpcHeaderMutation(
  rng: Rng,
  protocol: WireProtocol,
  mutations: string[],
): Record<string, string> {
  if (!rng.chance(0.18)) return {};
  const grpcish = protocol.startsWith("grpc");
  const options: Record<string, string>[] = grpcish
    ? [
        { "grpc-timeout": rng.pick(["abc", "-1m", "99999999999H", "1n", "", "10"]) },
        { "grpc-encoding": rng.pick(["gzip", "zstd", "identity", "br,gzip", "\u0000"]) },
        { "grpc-accept-encoding": "snappy" },
        {
          "content-type": rng.pick([
            "application/grpc+garbage",
            "application/grpc-web-text",
            "application/grpc; charset=latin1",
          ]),
        },
        { "x-request-id": "bad id\u00ff".repeat(5) },
        { traceparent: "00-zzzz-yyyy-01" },
        { "grpc-trace-bin": "!!!" },
      ]
    : [
        { "connect-timeout-ms": rng.pick(["soon", "-5", "1e9", "99999999999", ""]) },
        { "content-encoding": rng.pick(["gzip", "br", "zstd", "deflate, gzip"]) },
        { "connect-content-encoding": rng.pick(["gzip", "lz4"]) },
        { "connect-protocol-version": rng.pick(["2", "0", "one"]) },
        {
          "content-type": rng.pick([
            "text/plain",
            "application/json; charset=latin1",
            "application/x-www-form-urlencoded",
            "",
            "application/connect+json",
            "application/proto; x=y",
          ]),
        },
        { "accept-encoding": "gzip;q=0, br;q=1, *" },
        { "x-request-id": "../../../../" },
      ];
  const chosen = rng.pick(options);
  mutations.push(`hdr:${Object.keys(chosen).join(",")}`);
  return chosen;
}

const unknownPaths = [
  "/trellis.tasks.v1.TaskService/DropAllTables",
  "/trellis.nope.v1.Nothing/Here",
  "/grpc.health.v1.Health/check",
  "/trellis.tasks.v1.TaskService/",
  "//trellis.tasks.v1.TaskService/GetTask",
  "/trellis.tasks.v1.TaskService/GetTask/extra",
  "/%2e%2e/%2e%2e/etc/passwd",
  "/",
];

function rpcCase(rng: Rng, index: number, setup: FuzzSetup): FuzzCase {
  const target = rng.pick(setup.rpcTargets);
  const method = target.method;
  const direct = target.directUrl !== undefined && (!target.viaGateway || rng.chance(0.15));
  const baseUrl = direct ? (target.directUrl as string) : setup.gatewayUrl;
  const streaming = method.methodKind === "server_streaming";
  const protocol = rng.weighted<WireProtocol>(
    streaming
      ? [
          [3, "grpc"],
          [2, "grpc-web"],
          [2, "connect-stream-json"],
          [2, "connect-stream-proto"],
        ]
      : [
          [3, "connect-json"],
          [2, "connect-proto"],
          [3, "grpc"],
          [1, "grpc-json"],
          [2, "grpc-web"],
          [
            method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS ? 1 : 0,
            "connect-get",
          ],
        ],
  );
  const mutations: string[] = [];
  const json = messageJson(method.input, rng, setup);
  const binary = toBinaryOf(method.input, json) ?? new Uint8Array();
  const mutate = rng.chance(0.85);
  const jsonProtocol =
    protocol === "connect-json" ||
    protocol === "grpc-json" ||
    protocol === "connect-stream-json" ||
    protocol === "connect-get";
  let message: Uint8Array;
  if (!mutate) {
    message = jsonProtocol ? Buffer.from(JSON.stringify(json)) : binary;
    mutations.push("valid-shape");
  } else if (jsonProtocol) {
    const m = mutateJson(rng, json, setup);
    message = m.text;
    mutations.push(m.label);
  } else {
    const m = mutateBinary(rng, method.input, binary, setup);
    message = m.bytes;
    mutations.push(m.label);
  }

  // Lists of long strings can add up to megabytes: past twice the limit there
  // is nothing more to learn, so the body is cut there (another truncation).
  if (message.byteLength > setup.maxBodyBytes * 2) {
    message = message.subarray(0, setup.maxBodyBytes * 2);
    mutations.push("cut-at-2x-limit");
  }

  let path = `/${method.parent.typeName}/${method.name}`;
  let unknownPath = false;
  if (rng.chance(0.04)) {
    path = rng.pick(unknownPaths);
    unknownPath = true;
    mutations.push("path:unknown");
  }

  const headers: Record<string, string> = direct ? {} : authHeaders(rng, setup, mutations);
  // Every RPC carries a deadline: a streaming method would otherwise run for as
  // long as its subject does, and Send waits for the turn to settle.
  const timeoutMs = streaming ? 1500 : 8000;
  let body: Uint8Array | undefined;
  let requestMethod = "POST";
  let transport: "h1" | "h2" = "h1";
  switch (protocol) {
    case "connect-json":
    case "connect-proto":
      headers["content-type"] =
        protocol === "connect-json" ? "application/json" : "application/proto";
      headers["connect-protocol-version"] = "1";
      headers["connect-timeout-ms"] = String(timeoutMs);
      body = message;
      break;
    case "connect-get": {
      requestMethod = "GET";
      headers["connect-timeout-ms"] = String(timeoutMs);
      const encoded = Buffer.from(message).toString("base64url");
      path += `?connect=v1&encoding=${rng.pick(["json", "proto", "xml"])}&base64=1&message=${encoded}`;
      break;
    }
    case "connect-stream-json":
    case "connect-stream-proto": {
      headers["content-type"] =
        protocol === "connect-stream-json"
          ? "application/connect+json"
          : "application/connect+proto";
      headers["connect-protocol-version"] = "1";
      headers["connect-timeout-ms"] = String(timeoutMs);
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
      transport = rng.chance(0.5) ? "h2" : "h1";
      break;
    }
    case "grpc":
    case "grpc-json": {
      headers["content-type"] = protocol === "grpc" ? "application/grpc" : "application/grpc+json";
      headers.te = "trailers";
      headers["grpc-timeout"] = `${timeoutMs}m`;
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
      transport = "h2";
      break;
    }
    default: {
      headers["content-type"] = "application/grpc-web+proto";
      headers["x-grpc-web"] = "1";
      headers["grpc-timeout"] = `${timeoutMs}m`;
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
    }
  }
  Object.assign(headers, rpcHeaderMutation(rng, protocol, mutations));
  return {
    index,
    surface: "rpc",
    protocol,
    transport,
    baseUrl,
    request: {
      method: requestMethod,
      path,
      headers,
      ...(body ? { body } : {}),
      timeoutMs: timeoutMs + 10_000,
    },
    mutations,
    deadlineSet: true,
    unknownPath,
    target: `${direct ? "direct " : ""}${method.parent.typeName}/${method.name}`,
  };
}

/**
 * Loopback, private and metadata addresses in the URL spellings an outside
 * review got past the webhook guard, and their relatives (issue 22).
 */
export const privateUrlSpellings = [
  "http://[::127.0.0.1]/hook",
  "http://[::7f00:1]/hook",
  "http://[::ffff:0:7f00:1]/hook",
  "http://[2002:7f00:1::]/hook",
  "http://[::ffff:7f00:1]/hook",
  "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
  "http://[2002:a9fe:a9fe::]/latest/meta-data",
  "http://[fe80::1%25lo]/hook",
  "http://[fd00:ec2::254]/latest/meta-data",
  "http://0x7f.1/hook",
  "http://2130706433/hook",
  "http://[::1]:8080/hook",
];

function restBody(route: RestRouteInfo, pool: Pool, rng?: Rng): JsonValue {
  const message = { role: "user", parts: [{ type: "text", text: "hello", visibility: "public" }] };
  const p = route.path;
  if (p === "/v1/sessions")
    return {
      workspace_id: "default",
      persona_id: pool.agentId,
      metadata: { a: 1 },
      initial_messages: [message],
    };
  if (p.endsWith("/close") || p.endsWith("/cancel")) return { reason: "fuzz" };
  if (p.endsWith("/fork")) return { at_message_count: 1, branch_id: "b1", metadata: {} };
  if (p.endsWith("/truncate")) return { keep_turns: 1 };
  if (p.endsWith("/tasks"))
    return {
      input: message,
      busy_policy: "enqueue",
      metadata: { k: "v" },
      session_id: pool.sessionId,
    };
  if (p === "/v1/tasks/{task_id}/messages") return { kind: "input", message };
  if (p.endsWith("/messages")) return { message };
  if (p === "/v1/workspaces") return { id: "ws_fuzz", name: "fuzz", metadata: {} };
  if (p === "/v1/personas")
    return {
      name: "p",
      backend: "scripted",
      version: "1",
      tools: ["t"],
      definition: { entry: "a", nodes: { a: {} }, edges: [] },
    };
  if (p === "/v1/artifacts")
    return {
      kind: "log",
      mime_type: "text/plain",
      visibility: "public",
      name: "a.log",
      content: "hello",
      session_id: pool.sessionId,
    };
  if (p === "/v1/vaults")
    return {
      id: TAKEN_VAULT_ID,
      // Another workspace each time (the admin key may name any).
      workspace_id: `ws_fuzz_${rng ? rng.int(0, 1_000_000_000) : 0}`,
      provider: "trellis",
      capabilities: ["read"],
    };
  if (p === "/v1/webhooks")
    return {
      url: rng ? rng.pick(privateUrlSpellings) : "http://[::7f00:1]/hook",
      event_types: ["session.closed"],
    };
  if (p.includes("keys")) return { name: "k", scopes: ["sessions:read"] };
  if (p.includes("oauth")) return { name: "c", scopes: ["sessions:read"] };
  return { name: "x" };
}

/** Every byte of the UTF-8 form percent-encoded (a lone surrogate becomes U+FFFD's bytes). */
function percentEncoded(text: string): string {
  return [...Buffer.from(text, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
}

function restParam(rng: Rng, name: string, pool: Pool): string {
  const id = idFor(name, pool);
  if (id !== undefined && rng.chance(0.45)) return id;
  return rng.pick([
    percentEncoded(rng.pick(hostileStrings)) || "%20",
    "%ZZ",
    "%00",
    "%C3%28",
    "%ED%A0%80",
    "a".repeat(rng.int(300, 6000)),
    "..",
    "%2F..%2F",
    "ses_nope",
    "%F0%9F%A6%9C",
    "1e999",
  ]);
}

function restCase(rng: Rng, index: number, setup: FuzzSetup): FuzzCase {
  const mutations: string[] = [];
  const route = rng.pick(setup.restRoutes);
  let unknownPath = false;
  let path = route.path.replace(/\{([a-z_]+)\}/g, (_m, name: string) =>
    restParam(rng, name, setup.pool),
  );
  let method = route.method;
  if (rng.chance(0.05)) {
    method = rng.pick(["PUT", "DELETE", "PATCH", "TRACE", "OPTIONS", "FOO"]);
    mutations.push(`method:${method}`);
  }
  if (rng.chance(0.05)) {
    path = rng.pick([
      "/v1/nope",
      "/v1/sessions/a/b/c/d",
      "/v2/sessions",
      "/v1//sessions",
      "/",
      "/favicon.ico",
      "/v1/sessions/%",
      "/V1/SESSIONS",
    ]);
    unknownPath = true;
    mutations.push("path:unknown");
  }
  if (method === "GET" || rng.chance(0.1)) {
    const params = new URLSearchParams();
    for (const name of [
      "limit",
      "cursor",
      "workspace_id",
      "session_id",
      "task_id",
      "after",
      "kind",
      "since",
      "type",
    ]) {
      if (!rng.chance(0.3)) continue;
      params.append(
        name,
        rng.pick([
          "-1",
          "0",
          "abc",
          "1e3",
          "201",
          "50",
          "%00",
          "",
          "9".repeat(30),
          restParam(rng, name, setup.pool),
        ]),
      );
      if (rng.chance(0.1)) params.append(name, "dup");
    }
    const query = params.toString();
    if (query) {
      path += `?${query}`;
      mutations.push("query");
    }
  }
  const headers: Record<string, string> = authHeaders(rng, setup, mutations);
  if (!rng.chance(0.08)) headers["harn-agents-protocol-version"] = setup.protocolVersion;
  else {
    const v = rng.pick(["", "agents-protocol-1999-01-01", "x".repeat(3000)]);
    if (v !== "") headers["harn-agents-protocol-version"] = v;
    mutations.push("hdr:version");
  }
  let body: Uint8Array | undefined;
  if (method === "POST" || (method !== "GET" && rng.chance(0.3))) {
    const json = restBody(route, setup.pool, rng);
    if (route.method === "POST" && route.path === "/v1/webhooks" && rng.chance(0.5)) {
      // Sent intact: a private target must be refused, whatever its spelling.
      body = Buffer.from(JSON.stringify(json));
      mutations.push("private-url");
    } else if (route.method === "POST" && route.path === "/v1/vaults" && rng.chance(0.5)) {
      // Sent intact: another workspace's id is no conflict (and says nothing).
      body = Buffer.from(JSON.stringify(json));
      mutations.push("foreign-id");
    } else if (rng.chance(0.85)) {
      const m = mutateJson(rng, json, setup);
      body = m.text;
      mutations.push(m.label);
    } else {
      body = Buffer.from(JSON.stringify(json));
      mutations.push("valid-shape");
    }
    headers["content-type"] = rng.weighted([
      [10, "application/json"],
      [1, "text/plain"],
      [1, "application/x-www-form-urlencoded"],
      [1, "application/json; charset=iso-8859-1"],
      [1, "multipart/form-data; boundary=x"],
    ]);
    if (headers["content-type"] !== "application/json") mutations.push("hdr:content-type");
  }
  if (rng.chance(0.1)) {
    const extra = rng.pick<Record<string, string>>([
      { "idempotency-key": rng.pick(["", "k".repeat(300), "ключ", "a\tb", "fuzz-key"]) },
      { origin: rng.pick(["https://evil.example", "null", "http://localhost:5173"]) },
      { origin: "https://evil.example", "access-control-request-method": "POST" },
      { "last-event-id": rng.pick(["garbage", "-1", "9".repeat(40)]) },
      { accept: "text/event-stream" },
      { "x-request-id": "\u00ff\u00fe" },
    ]);
    Object.assign(headers, extra);
    mutations.push(`hdr:${Object.keys(extra).join(",")}`);
  }
  return {
    index,
    surface: "rest",
    protocol: "rest",
    transport: "h1",
    baseUrl: setup.gatewayUrl,
    request: { method, path, headers, ...(body ? { body } : {}), timeoutMs: 20_000 },
    mutations,
    deadlineSet: false,
    unknownPath,
    target: `${route.method} ${route.path}`,
    ...(mutations.includes("private-url") && method === "POST" && !unknownPath
      ? { mustRefuse: "a webhook to a loopback, private or metadata address" }
      : {}),
    ...(mutations.includes("foreign-id") && method === "POST" && !unknownPath
      ? { leakStatuses: [409] }
      : {}),
  };
}

const rawRequests: readonly { label: string; text: (setup: FuzzSetup) => string }[] = [
  { label: "raw:garbage", text: () => "GARBAGE\r\n\r\n" },
  {
    label: "raw:http10-no-host",
    text: () =>
      "POST /grpc.health.v1.Health/Check HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
  },
  {
    label: "raw:huge-header",
    text: () => `GET /v1 HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
  },
  {
    label: "raw:bad-chunked",
    text: () =>
      "POST /v1/sessions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
  },
  {
    label: "raw:content-length-and-chunked",
    text: () =>
      "POST /v1/sessions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
  },
  {
    label: "raw:bad-header-name",
    text: () => "GET /v1 HTTP/1.1\r\nhost: x\r\nbad header: 1\r\n\r\n",
  },
  { label: "raw:absolute-form", text: () => "GET http://[::1 HTTP/1.1\r\nhost: x\r\n\r\n" },
];

/**
 * Header values as bytes a client can put on the wire: Node's HTTP clients
 * refuse characters outside latin1 and control characters (so would any
 * proxy); the UTF-8 bytes of anything else go as latin1.
 */
function sendable(fuzzCase: FuzzCase): FuzzCase {
  const headers = fuzzCase.request.headers ?? {};
  for (const [name, value] of Object.entries(headers)) {
    headers[name] = Buffer.from(value, "utf8")
      .toString("latin1")
      .replace(/[^\t\x20-\x7e\x80-\xff]/g, "");
  }
  return fuzzCase;
}

/** The request of case `index` under `seed`. */
export function generateCase(seed: number, index: number, setup: FuzzSetup): FuzzCase {
  const rng = Rng.forCase(seed, index);
  const surface = rng.weighted<Surface>([
    [40, "rest"],
    [59, "rpc"],
    [1, "raw"],
  ]);
  if (surface === "rest") return sendable(restCase(rng, index, setup));
  if (surface === "rpc") return sendable(rpcCase(rng, index, setup));
  const raw = rng.pick(rawRequests);
  return {
    index,
    surface: "raw",
    protocol: "raw-http",
    transport: "socket",
    baseUrl: setup.gatewayUrl,
    request: { path: "" },
    raw: raw.text(setup),
    mutations: [raw.label],
    deadlineSet: false,
    unknownPath: false,
    target: "http",
  };
}

/** Every method of `services`, for {@link FuzzSetup.rpcTargets}. */
export function methodsOf(services: readonly DescService[]): DescMethod[] {
  return services.flatMap((s) => s.methods);
}
