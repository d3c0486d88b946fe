/**
 * Valid-looking and hostile values for the fuzz generator: strings, JSON,
 * scalars and whole messages built from protobuf descriptors.
 */
import {
  type DescField,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";
import type { FuzzSetup, Pool } from "./fuzz-setup.js";
import type { Rng } from "./prng.js";

// --- values ------------------------------------------------------------------

export const hostileStrings = [
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

export function idFor(name: string, pool: Pool): string | undefined {
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

export function randomJson(rng: Rng, depth = 0): JsonValue {
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
export function deepJson(levels: number, objects: boolean): string {
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
export function toBinaryOf(desc: DescMessage, json: JsonValue): Uint8Array | undefined {
  try {
    return toBinary(
      desc,
      fromJson(desc, json, { ignoreUnknownFields: true, recursionLimit: 10_000 }),
    );
  } catch {
    return undefined;
  }
}
