/**
 * The structure limits checked on binary protobuf requests (gRPC, gRPC-Web,
 * Connect with `application/proto`) before protobuf-es decodes them: decoding
 * a `google.protobuf.Struct` of 200,000 entries costs seconds of event loop,
 * as converting its JSON form does. The scan follows the request message's
 * descriptor over the wire bytes without decoding anything but map keys:
 * entries per map field (a Struct's keys, at most `maxKeys`), `Value`s per
 * message (`maxNodes`), map key length (`maxKeyLength`). It stops at the
 * first violation; malformed bytes end the scan quietly (the decoder that
 * runs next refuses them), and so does nesting past `maxDepth` (its
 * recursion limit answers that).
 *
 * `requestStructureGuard` wraps a request body: it cuts the body into the
 * protocol's messages (one whole body, or 5-byte envelopes), decompresses
 * where flagged, scans each, and passes the original bytes on unchanged.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import type { ConnectError } from "@connectrpc/connect";
import { type Compression, envelopeDecompress } from "@connectrpc/connect/protocol";
import { toConnectError } from "./errors.js";
import {
  type StructureLimits,
  type StructureViolation,
  structureError,
} from "./structure-limits.js";

const fieldMaps = new WeakMap<DescMessage, Map<number, DescField>>();

function fieldsOf(desc: DescMessage): Map<number, DescField> {
  let map = fieldMaps.get(desc);
  if (map === undefined) {
    map = new Map(desc.fields.map((f) => [f.number, f]));
    fieldMaps.set(desc, map);
  }
  return map;
}

const STRUCT = "google.protobuf.Struct";
const VALUE = "google.protobuf.Value";
const LIST_VALUE = "google.protobuf.ListValue";
const utf8 = new TextDecoder();

function join(path: string, name: string): string {
  const safe = /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : JSON.stringify(name.slice(0, 64));
  return path === "" ? safe : `${path}.${safe}`;
}

function where(path: string): string {
  return path === "" ? "the request" : path;
}

/** A malformed message: the scan ends and the decoder reports it. */
class Malformed extends Error {}

/** The first way the message `bytes` of type `desc` exceeds `limits`, or undefined. */
export function scanProtoStructure(
  desc: DescMessage,
  bytes: Uint8Array,
  limits: StructureLimits,
  maxDepth: number,
): StructureViolation | undefined {
  let nodes = 0;

  function scan(
    message: DescMessage,
    data: Uint8Array,
    path: string,
    depth: number,
  ): StructureViolation | undefined {
    if (depth > maxDepth) return undefined;
    if (message.typeName === VALUE) {
      nodes += 1;
      if (nodes > limits.maxNodes) {
        return {
          limit: "nodes",
          path,
          message: `${where(path)} holds more than ${limits.maxNodes} values`,
        };
      }
    }
    const reader = new BinaryReader(data);
    const fields = fieldsOf(message);
    const counts = new Map<number, number>();
    while (reader.pos < reader.len) {
      const [number, wireType] = reader.tag();
      const field = fields.get(number);
      if (wireType !== WireType.LengthDelimited || field === undefined) {
        reader.skip(wireType);
        continue;
      }
      const length = reader.uint32();
      const start = reader.pos;
      if (start + length > reader.len) throw new Malformed();
      reader.pos += length;
      const chunk = data.subarray(start, start + length);
      // Struct / Value / ListValue are paths of their own: `metadata.key[2]`.
      const own =
        message.typeName === STRUCT || message.typeName === VALUE ? path : join(path, field.name);
      if (field.fieldKind === "message") {
        const found = scan(field.message, chunk, own, depth + 1);
        if (found) return found;
      } else if (field.fieldKind === "list" && field.listKind === "message") {
        const index = counts.get(number) ?? 0;
        counts.set(number, index + 1);
        const at = message.typeName === LIST_VALUE ? `${path}[${index}]` : `${own}[${index}]`;
        const found = scan(field.message, chunk, at, depth + 1);
        if (found) return found;
      } else if (field.fieldKind === "map") {
        const entries = (counts.get(number) ?? 0) + 1;
        counts.set(number, entries);
        if (entries > limits.maxKeys) {
          return {
            limit: "keys",
            path: own,
            message: `${where(own)} has more than ${limits.maxKeys} keys`,
          };
        }
        const found = scanEntry(field, chunk, own, depth);
        if (found) return found;
      }
    }
    return undefined;
  }

  function scanEntry(
    field: DescField & { fieldKind: "map" },
    entry: Uint8Array,
    path: string,
    depth: number,
  ): StructureViolation | undefined {
    const reader = new BinaryReader(entry);
    let key = "";
    let value: Uint8Array | undefined;
    while (reader.pos < reader.len) {
      const [number, wireType] = reader.tag();
      if (number === 1 && wireType === WireType.LengthDelimited && field.mapKey === 9) {
        const raw = reader.bytes();
        if (raw.length > limits.maxKeyLength) {
          const decoded = utf8.decode(raw);
          if (decoded.length > limits.maxKeyLength) {
            return {
              limit: "key_length",
              path,
              message: `${where(path)} has a key longer than ${limits.maxKeyLength} characters`,
            };
          }
        }
        key = utf8.decode(raw.subarray(0, 64));
      } else if (number === 2 && wireType === WireType.LengthDelimited) {
        value = reader.bytes();
      } else {
        reader.skip(wireType);
      }
    }
    if (value !== undefined && field.mapKind === "message") {
      return scan(field.message, value, key === "" ? path : join(path, key), depth + 1);
    }
    return undefined;
  }

  try {
    return scan(desc, bytes, "", 1);
  } catch {
    // Malformed or truncated: not ours to report.
    return undefined;
  }
}

/** How the request's messages are framed, from its content type; undefined: not binary protobuf. */
function framingOf(contentType: string): "whole" | "enveloped" | undefined {
  const type = contentType.toLowerCase().split(";", 1)[0]?.trim() ?? "";
  if (type === "application/proto" || type === "application/x-protobuf") return "whole";
  if (
    type === "application/grpc" ||
    type === "application/grpc+proto" ||
    type === "application/grpc-web" ||
    type === "application/grpc-web+proto" ||
    type === "application/connect+proto"
  ) {
    return "enveloped";
  }
  return undefined;
}

/** Options of {@link requestStructureGuard}. */
export interface StructureGuardOptions {
  desc: DescMessage;
  contentType: string;
  /** `grpc-encoding` / `connect-content-encoding` / `content-encoding`, whichever applies. */
  encoding: string | null;
  compressions: readonly Compression[];
  limits: StructureLimits;
  maxDepth: number;
  maxBytes: number;
}

function refuse(violation: StructureViolation, limits: StructureLimits): ConnectError {
  return toConnectError(structureError(violation, limits));
}

/**
 * `body`, checked message by message against the structure limits before the
 * decoder sees it; the bytes pass on unchanged. Not binary protobuf (JSON,
 * which its text decoder checks): `body` itself.
 */
export function requestStructureGuard(
  body: AsyncIterable<Uint8Array>,
  options: StructureGuardOptions,
): AsyncIterable<Uint8Array> {
  const framing = framingOf(options.contentType);
  if (framing === undefined) return body;
  const compression = options.compressions.find((c) => c.name === options.encoding) ?? null;
  const check = async (message: Uint8Array, compressed: boolean) => {
    let data = message;
    if (compressed) {
      if (compression === null) return; // the protocol layer refuses the encoding
      try {
        data = (
          await envelopeDecompress({ flags: 1, data: message }, compression, options.maxBytes)
        ).data;
      } catch {
        return; // too large or corrupt: the protocol layer says so
      }
    }
    const violation = scanProtoStructure(options.desc, data, options.limits, options.maxDepth);
    if (violation !== undefined) throw refuse(violation, options.limits);
  };
  if (framing === "whole") {
    return {
      async *[Symbol.asyncIterator]() {
        const chunks: Uint8Array[] = [];
        let size = 0;
        for await (const chunk of body) {
          chunks.push(chunk);
          size += chunk.byteLength;
          // Past the limit: pass it on as it is; the protocol layer refuses the size.
          if (size > options.maxBytes) {
            yield* chunks;
            chunks.length = 0;
            for await (const rest of body) yield rest;
            return;
          }
        }
        const whole = Buffer.concat(chunks);
        await check(whole, options.encoding !== null && options.encoding !== "identity");
        yield whole;
      },
    };
  }
  return {
    async *[Symbol.asyncIterator]() {
      // Whole envelopes are passed on once checked (the decoder needs them
      // whole anyway); a violating message is never handed to it.
      let pending: Uint8Array = new Uint8Array(0);
      const iterator = body[Symbol.asyncIterator]();
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done) break;
          pending = pending.length === 0 ? next.value : Buffer.concat([pending, next.value]);
          let checked = 0;
          while (pending.length - checked >= 5) {
            const flags = pending[checked] as number;
            const length =
              (((pending[checked + 1] as number) << 24) >>> 0) +
              ((pending[checked + 2] as number) << 16) +
              ((pending[checked + 3] as number) << 8) +
              (pending[checked + 4] as number);
            if (length > options.maxBytes) {
              // The protocol layer refuses the size: hand everything on unchecked.
              yield pending;
              for (;;) {
                const rest = await iterator.next();
                if (rest.done) return;
                yield rest.value;
              }
            }
            if (pending.length - checked < 5 + length) break;
            if ((flags & 0x80) === 0) {
              await check(pending.subarray(checked + 5, checked + 5 + length), (flags & 1) === 1);
            }
            checked += 5 + length;
          }
          if (checked > 0) {
            yield pending.subarray(0, checked);
            pending = pending.subarray(checked);
          }
        }
        // An incomplete envelope: the protocol layer reports it.
        if (pending.length > 0) yield pending;
      } finally {
        // Stopped early (a refusal, or the protocol layer stopped reading): the
        // body's own iterator drains the rest (request-body.ts).
        await iterator.return?.();
      }
    },
  };
}
