/**
 * The structure limits checked on JSON text before it is parsed. Parsing a
 * 3 MB object of 200,000 keys costs more than refusing it should (building
 * the object, then enumerating its keys); this scanner walks the UTF-8 bytes
 * once, without building anything, and counts what the limits bound: keys
 * per object (a `:` outside strings per member), values, key length and
 * nesting depth. It stops at the first violation. It is no validator: on
 * malformed text its counts are meaningless but finite, and the parser that
 * runs next reports the syntax error.
 */
import type { StructureLimits, StructureViolation } from "./structure-limits.js";

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

interface Level {
  object: boolean;
  /** Members (objects) so far. */
  members: number;
  /** Index of the current element (arrays). */
  index: number;
  /** Byte range of the current key (objects). */
  keyStart: number;
  keyEnd: number;
}

const utf8 = new TextDecoder();

function isScalarStart(c: number): boolean {
  // digits, '-', and the first letters of true / false / null
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x74 || c === 0x66 || c === 0x6e;
}

function pathOf(bytes: Uint8Array, stack: readonly Level[], depth: number): string {
  let path = "";
  for (let d = 0; d < depth; d++) {
    const level = stack[d] as Level;
    if (level.object) {
      if (level.keyEnd <= level.keyStart) break;
      const key = utf8.decode(bytes.subarray(level.keyStart, level.keyEnd));
      const safe = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : JSON.stringify(key.slice(0, 64));
      path = path === "" ? safe : `${path}.${safe}`;
    } else {
      path = `${path}[${level.index}]`;
    }
  }
  return path;
}

function where(path: string): string {
  return path === "" ? "the request body" : path;
}

/** The first way the JSON text in `bytes` exceeds `limits`, or undefined. */
export function scanJsonStructure(
  bytes: Uint8Array,
  limits: StructureLimits,
): StructureViolation | undefined {
  const stack: Level[] = [];
  let depth = 0;
  let nodes = 0;
  let expectKey = false;
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const c = bytes[i] as number;
    if (c === QUOTE) {
      let j = i + 1;
      while (j < n && bytes[j] !== QUOTE) j += bytes[j] === BACKSLASH ? 2 : 1;
      const top = depth > 0 ? (stack[depth - 1] as Level) : undefined;
      if (top?.object && expectKey) {
        // A key: bytes bound its length from above; decode only when they might exceed it.
        if (j - i - 1 > limits.maxKeyLength) {
          const key = JSON.parse(utf8.decode(bytes.subarray(i, Math.min(j + 1, n)))) as unknown;
          if (typeof key !== "string" || key.length > limits.maxKeyLength) {
            const path = pathOf(bytes, stack, depth - 1);
            return {
              limit: "key_length",
              path,
              message: `${where(path)} has a key longer than ${limits.maxKeyLength} characters`,
            };
          }
        }
        top.keyStart = i + 1;
        top.keyEnd = j;
        expectKey = false;
      } else {
        nodes += 1;
      }
      i = j + 1;
      continue;
    }
    switch (c) {
      case OPEN_OBJECT:
      case OPEN_ARRAY: {
        nodes += 1;
        depth += 1;
        if (depth > limits.maxDepth) {
          const path = pathOf(bytes, stack, depth - 1);
          return {
            limit: "depth",
            path,
            message: `${where(path)} nests deeper than ${limits.maxDepth} levels of JSON objects and arrays`,
          };
        }
        const level = stack[depth - 1];
        const object = c === OPEN_OBJECT;
        if (level === undefined) {
          stack.push({ object, members: 0, index: 0, keyStart: 0, keyEnd: 0 });
        } else {
          level.object = object;
          level.members = 0;
          level.index = 0;
          level.keyStart = 0;
          level.keyEnd = 0;
        }
        expectKey = object;
        break;
      }
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        if (depth > 0) depth -= 1;
        expectKey = false;
        break;
      case COMMA: {
        const top = depth > 0 ? (stack[depth - 1] as Level) : undefined;
        if (top?.object) expectKey = true;
        else if (top) top.index += 1;
        break;
      }
      case COLON: {
        const top = depth > 0 ? (stack[depth - 1] as Level) : undefined;
        if (top?.object) {
          top.members += 1;
          if (top.members > limits.maxKeys) {
            const path = pathOf(bytes, stack, depth - 1);
            return {
              limit: "keys",
              path,
              message: `${where(path)} has more than ${limits.maxKeys} keys`,
            };
          }
        }
        break;
      }
      default:
        if (isScalarStart(c)) {
          nodes += 1;
          // Skip the rest of the token.
          while (
            i + 1 < n &&
            !(
              bytes[i + 1] === COMMA ||
              bytes[i + 1] === CLOSE_ARRAY ||
              bytes[i + 1] === CLOSE_OBJECT ||
              (bytes[i + 1] as number) <= 0x20
            )
          ) {
            i += 1;
          }
        }
    }
    if (nodes > limits.maxNodes) {
      const path = pathOf(bytes, stack, Math.max(0, depth - 1));
      return {
        limit: "nodes",
        path,
        message: `${where(path)} holds more than ${limits.maxNodes} JSON values`,
      };
    }
    i += 1;
  }
  return undefined;
}
