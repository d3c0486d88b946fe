/**
 * Bounds on the free-form structures a caller controls (metadata, agent
 * definitions, tool arguments: everything that becomes a
 * `google.protobuf.Struct` / `Value`), checked on the parsed JSON before any
 * protobuf conversion. Converting is what costs: a 3 MB object of 200,000
 * keys is parsed in ~0.1 s but takes seconds to become a Struct, to encode
 * and to decode again — all on the event loop, stalling every other request.
 * The walk here is iterative, touches each value once and stops at the first
 * violation, so a refusal costs about as much as the parse.
 */
import { type ConfigOf, env, loadConfig } from "./config.js";
import { TrellisError } from "./errors.js";

/** Limits of one request's JSON (see {@link checkJsonStructure}). */
export interface StructureLimits {
  /** Most keys one object may have. */
  maxKeys: number;
  /** Most values (objects, arrays, scalars) in the whole document. */
  maxNodes: number;
  /** Longest key, in UTF-16 code units. */
  maxKeyLength: number;
  /** Deepest nesting of objects and arrays (a scalar is 0, `{}` is 1). */
  maxDepth: number;
}

/** Further limits of one free-form field (a metadata object, say). */
export interface FieldLimits {
  /** Longest string value, in UTF-16 code units. */
  maxStringLength: number;
  /** Largest total of its keys' and strings' lengths, a cheap bound on its size. */
  maxTotalLength: number;
}

/** Defaults: far above any real metadata, far below what stalls a process. */
export const defaultStructureLimits: Readonly<StructureLimits & FieldLimits> = {
  maxKeys: 1_000,
  maxNodes: 100_000,
  maxKeyLength: 1_024,
  maxDepth: 46,
  maxStringLength: 262_144,
  maxTotalLength: 1_048_576,
};

/** Environment variables of the structure limits (the depth comes from `TRELLIS_MAX_NESTING_DEPTH`). */
export const structureLimitsSchema = {
  /** Most keys one JSON object (a metadata object, say) may have. */
  TRELLIS_MAX_JSON_KEYS: env.int({ min: 16 }).default(defaultStructureLimits.maxKeys),
  /** Most JSON values in one request. */
  TRELLIS_MAX_JSON_NODES: env.int({ min: 1_000 }).default(defaultStructureLimits.maxNodes),
  /** Longest key of a JSON object. */
  TRELLIS_MAX_JSON_KEY_LENGTH: env.int({ min: 64 }).default(defaultStructureLimits.maxKeyLength),
  /** Longest string inside a free-form field (metadata, definitions, arguments). */
  TRELLIS_MAX_JSON_STRING_LENGTH: env
    .int({ min: 1_024 })
    .default(defaultStructureLimits.maxStringLength),
  /** Largest free-form field, counted as the total length of its keys and strings. */
  TRELLIS_MAX_JSON_FIELD_LENGTH: env
    .int({ min: 1_024 })
    .default(defaultStructureLimits.maxTotalLength),
};

/**
 * Read the structure limits from an environment; `maxDepth` is what the
 * caller passes (REST derives it from `TRELLIS_MAX_NESTING_DEPTH`).
 */
export function structureLimitsFromEnv(
  source: Readonly<Record<string, string | undefined>>,
  maxDepth: number,
): StructureLimits & FieldLimits {
  const config: ConfigOf<typeof structureLimitsSchema> = loadConfig(structureLimitsSchema, source);
  return {
    maxKeys: config.TRELLIS_MAX_JSON_KEYS,
    maxNodes: config.TRELLIS_MAX_JSON_NODES,
    maxKeyLength: config.TRELLIS_MAX_JSON_KEY_LENGTH,
    maxDepth,
    maxStringLength: config.TRELLIS_MAX_JSON_STRING_LENGTH,
    maxTotalLength: config.TRELLIS_MAX_JSON_FIELD_LENGTH,
  };
}

/** What a walk found wrong: which limit, where, and the refusal to throw. */
export interface StructureViolation {
  limit: "keys" | "nodes" | "key_length" | "depth" | "string_length" | "total_length";
  /** Dotted path of the offending value (`metadata.a[3]`); "" for the document. */
  path: string;
  message: string;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function pathOf(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  const safe = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : JSON.stringify(key.slice(0, 64));
  return parent === "" ? safe : `${parent}.${safe}`;
}

function where(path: string): string {
  return path === "" ? "the request body" : path;
}

/** More than `maxNodes` values in the document, or at once in the array at `path`. */
function tooManyNodes(path: string, maxNodes: number): StructureViolation {
  return {
    limit: "nodes",
    path,
    message: `${where(path)} holds more than ${maxNodes} JSON values`,
  };
}

/** The field at `path` (counted whole, keys and strings) is over `maxTotalLength`. */
function tooLarge(path: string, maxTotalLength: number): StructureViolation {
  return {
    limit: "total_length",
    path,
    message: `${where(path)} is larger than ${maxTotalLength} characters of keys and strings`,
  };
}

/**
 * The first way `value` exceeds `limits`, or undefined. `fieldLimits`, when
 * given, also bounds its strings and total size (for one free-form field).
 * Keys are never copied: an object's key count is checked before its keys
 * are read.
 */
export function findStructureViolation(
  value: unknown,
  limits: StructureLimits,
  path = "",
  fieldLimits?: FieldLimits,
): StructureViolation | undefined {
  let nodes = 0;
  let total = 0;
  const stack: { value: Json; depth: number; path: string }[] = [
    { value: value as Json, depth: 0, path },
  ];
  while (stack.length > 0) {
    const current = stack.pop() as { value: Json; depth: number; path: string };
    nodes += 1;
    if (nodes > limits.maxNodes) {
      return tooManyNodes(path, limits.maxNodes);
    }
    const v = current.value;
    if (typeof v === "string") {
      if (fieldLimits) {
        if (v.length > fieldLimits.maxStringLength) {
          return {
            limit: "string_length",
            path: current.path,
            message: `${where(current.path)} is longer than ${fieldLimits.maxStringLength} characters`,
          };
        }
        total += v.length;
        if (total > fieldLimits.maxTotalLength) {
          return tooLarge(path, fieldLimits.maxTotalLength);
        }
      }
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    const depth = current.depth + 1;
    if (depth > limits.maxDepth) {
      return {
        limit: "depth",
        path: current.path,
        message: `${where(current.path)} nests deeper than ${limits.maxDepth} levels of JSON objects and arrays`,
      };
    }
    if (Array.isArray(v)) {
      if (nodes + v.length > limits.maxNodes) {
        return tooManyNodes(current.path, limits.maxNodes);
      }
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] as Json, depth, path: pathOf(current.path, i) });
      }
      continue;
    }
    // for…in counts without building a key array of a hostile size first.
    let count = 0;
    for (const key in v) {
      if (!Object.hasOwn(v, key)) continue;
      count += 1;
      if (count > limits.maxKeys) {
        return {
          limit: "keys",
          path: current.path,
          message: `${where(current.path)} has more than ${limits.maxKeys} keys`,
        };
      }
      if (key.length > limits.maxKeyLength) {
        return {
          limit: "key_length",
          path: current.path,
          message: `${where(current.path)} has a key longer than ${limits.maxKeyLength} characters`,
        };
      }
      if (fieldLimits) {
        total += key.length;
        if (total > fieldLimits.maxTotalLength) {
          return tooLarge(path, fieldLimits.maxTotalLength);
        }
      }
      stack.push({ value: v[key] as Json, depth, path: pathOf(current.path, key) });
    }
  }
  return undefined;
}

/**
 * Throw `invalid_request` (InvalidArgument, REST 400) naming the field when
 * `value` exceeds `limits` (see {@link findStructureViolation}).
 */
export function checkJsonStructure(
  value: unknown,
  limits: StructureLimits,
  path = "",
  fieldLimits?: FieldLimits,
): void {
  const violation = findStructureViolation(value, limits, path, fieldLimits);
  if (violation === undefined) return;
  throw structureError(violation, limits, fieldLimits);
}

/** The typed refusal of a violation. */
export function structureError(
  violation: StructureViolation,
  limits: StructureLimits,
  fieldLimits?: FieldLimits,
): TrellisError {
  const limitValue = {
    keys: limits.maxKeys,
    nodes: limits.maxNodes,
    key_length: limits.maxKeyLength,
    depth: limits.maxDepth,
    string_length: fieldLimits?.maxStringLength ?? 0,
    total_length: fieldLimits?.maxTotalLength ?? 0,
  }[violation.limit];
  return new TrellisError({
    reason: "invalid_request",
    message: violation.message,
    ...(violation.path === "" ? {} : { param: violation.path }),
    metadata: { [`limit_${violation.limit}`]: String(limitValue) },
  });
}
