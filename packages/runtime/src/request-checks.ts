/**
 * Checks every request message gets before a handler sees it, for values a
 * parser accepts but no service can keep: a string with U+0000 in it is valid
 * protobuf and valid JSON, and PostgreSQL refuses it in `text` and `jsonb`
 * alike (`invalid byte sequence for encoding "UTF8": 0x00`) — so without this
 * check a NUL in any id or text surfaced as an Internal error from whichever
 * query met it first. And the per-field caps ({@link FieldCaps}): a refusal
 * names the field.
 */
import type { DescMessage, Message } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import {
  type ContextKey,
  createContextKey,
  type Interceptor,
  type StreamRequest,
} from "@connectrpc/connect";
import { type ConfigOf, env, loadConfig } from "./config.js";
import { TrellisError } from "./errors.js";

function nulIn(text: string): boolean {
  return text.includes("\u0000");
}

/**
 * Per-field caps of every RPC request, checked on the decoded message (the
 * structure limits, `proto-scan.ts` / `json-scan.ts`, already bound maps,
 * Struct keys and values before decoding): an id longer than `maxIdLength`,
 * any other string longer than `maxStringLength`, a repeated field with more
 * than `maxListLength` items. `google.protobuf.*` values are left to the
 * structure limits.
 */
export interface FieldCaps {
  /** Longest string field named `id` or `…_id` (UTF-16 code units). */
  maxIdLength: number;
  /** Longest other string field. */
  maxStringLength: number;
  /** Most items of one repeated field. */
  maxListLength: number;
}

export const defaultFieldCaps: Readonly<FieldCaps> = {
  maxIdLength: 512,
  maxStringLength: 4_194_304,
  maxListLength: 100_000,
};

/** Environment variables of the field caps. */
export const fieldCapsSchema = {
  /** Longest id field (`id`, `…_id`) of an RPC request. */
  TRELLIS_MAX_RPC_ID_LENGTH: env.int({ min: 64 }).default(defaultFieldCaps.maxIdLength),
  /** Longest other string field of an RPC request. */
  TRELLIS_MAX_RPC_STRING_LENGTH: env.int({ min: 65_536 }).default(defaultFieldCaps.maxStringLength),
  /** Most items of one repeated field of an RPC request. */
  TRELLIS_MAX_RPC_LIST_LENGTH: env.int({ min: 100 }).default(defaultFieldCaps.maxListLength),
};

/** Read the field caps from an environment. */
export function fieldCapsFromEnv(source: Readonly<Record<string, string | undefined>>): FieldCaps {
  const config: ConfigOf<typeof fieldCapsSchema> = loadConfig(fieldCapsSchema, source);
  return {
    maxIdLength: config.TRELLIS_MAX_RPC_ID_LENGTH,
    maxStringLength: config.TRELLIS_MAX_RPC_STRING_LENGTH,
    maxListLength: config.TRELLIS_MAX_RPC_LIST_LENGTH,
  };
}

function at(path: string, name: string | number): string {
  if (typeof name === "number") return `${path}[${name}]`;
  return path === "" ? name : `${path}.${name}`;
}

/** What is wrong with a request message, and where. */
export interface RequestViolation {
  path: string;
  problem: "nul" | "id_length" | "string_length" | "list_length";
  message: string;
  /** The cap exceeded (not for `nul`). */
  max?: number;
}

function isIdField(name: string): boolean {
  return name === "id" || name.endsWith("_id") || name.endsWith("_ids");
}

function stringProblem(
  text: string,
  path: string,
  id: boolean,
  caps: FieldCaps | undefined,
): RequestViolation | undefined {
  const where = path === "" ? "the request" : path;
  if (caps !== undefined) {
    const max = id ? caps.maxIdLength : caps.maxStringLength;
    if (text.length > max) {
      return {
        path,
        problem: id ? "id_length" : "string_length",
        message: `${where} is longer than ${max} characters`,
        max,
      };
    }
  }
  if (nulIn(text)) {
    return {
      path,
      problem: "nul",
      message: `${where} contains a NUL character (U+0000), which no field may hold`,
    };
  }
  return undefined;
}

/**
 * The first violation in `message` — a string (field, list item, map key or
 * value, Struct key or value) containing U+0000, or, with `caps`, a field
 * past its cap — with its path (`input.parts[0].text`, `metadata["k"]`);
 * undefined when there is none.
 */
export function findRequestViolation(
  message: ReflectMessage,
  caps?: FieldCaps,
  path = "",
): RequestViolation | undefined {
  const wellKnown = message.desc.typeName.startsWith("google.protobuf.");
  const own = wellKnown ? undefined : caps;
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const here = at(path, field.jsonName);
    const id = isIdField(field.name);
    switch (field.fieldKind) {
      case "scalar": {
        const value = message.get(field);
        if (field.scalar === ScalarType.STRING && typeof value === "string") {
          const found = stringProblem(value, here, id, own);
          if (found !== undefined) return found;
        }
        break;
      }
      case "message": {
        const found = findRequestViolation(message.get(field), caps, here);
        if (found !== undefined) return found;
        break;
      }
      case "list": {
        const list = message.get(field);
        if (own !== undefined && list.size > own.maxListLength) {
          return {
            path: here,
            problem: "list_length",
            message: `${here} has more than ${own.maxListLength} items`,
            max: own.maxListLength,
          };
        }
        if (field.listKind === "enum") break;
        let i = 0;
        for (const item of list) {
          if (field.listKind === "message") {
            const found = findRequestViolation(item as ReflectMessage, caps, at(here, i));
            if (found !== undefined) return found;
          } else if (typeof item === "string") {
            const found = stringProblem(item, at(here, i), id, own);
            if (found !== undefined) return found;
          }
          i++;
        }
        break;
      }
      case "map": {
        for (const [key, value] of message.get(field)) {
          const entry = `${here}[${JSON.stringify(String(key).slice(0, 64).replaceAll("\u0000", "\\u0000"))}]`;
          if (typeof key === "string") {
            const found = stringProblem(key, entry, false, own);
            if (found !== undefined) return found;
          }
          if (field.mapKind === "message") {
            const found = findRequestViolation(value as ReflectMessage, caps, entry);
            if (found !== undefined) return found;
          } else if (typeof value === "string") {
            const found = stringProblem(value, entry, false, own);
            if (found !== undefined) return found;
          }
        }
        break;
      }
      default:
        break;
    }
  }
  return undefined;
}

/** The path of the first string holding U+0000 in `message`, or undefined. */
export function findNulString(message: ReflectMessage, path = ""): string | undefined {
  return findRequestViolation(message, undefined, path)?.path;
}

function check(desc: DescMessage, message: Message, caps: FieldCaps | undefined): void {
  const found = findRequestViolation(reflect(desc, message as never, false), caps);
  if (found === undefined) return;
  throw new TrellisError({
    reason: "invalid_request",
    message: found.message,
    ...(found.path === "" ? {} : { param: found.path }),
    ...(found.max === undefined
      ? {}
      : { metadata: { [`limit_${found.problem}`]: String(found.max) } }),
  });
}

async function* checked<T extends Message>(
  desc: DescMessage,
  messages: AsyncIterable<T>,
  caps: FieldCaps | undefined,
): AsyncGenerator<T> {
  for await (const message of messages) {
    check(desc, message, caps);
    yield message;
  }
}

/**
 * Set to true by the interceptor that verified a call's service credential
 * (`createMeshServerInterceptor` in `@trellis/platform`): the call comes from
 * another service of the mesh, which carries what its own edge already
 * checked (a history of more than `maxListLength` messages, a model's long
 * output). The field caps are for callers outside the mesh; such a call gets
 * the NUL check only.
 */
export const meshVerifiedKey: ContextKey<boolean> = createContextKey(false, {
  description: "trellis call carries a verified service credential",
});

/**
 * Server interceptor applying the request checks to the request message (and
 * to each message of a client stream): NUL in any string, and the field caps
 * (`caps`; none given: NUL only) — the caps only at the edge: a call whose
 * service credential was verified ({@link meshVerifiedKey}, set by an
 * interceptor placed before this one) gets the NUL check alone. Place it
 * inside the error interceptor: its refusals are domain errors
 * (`invalid_request`).
 */
export function createRequestChecksInterceptor(caps?: FieldCaps): Interceptor {
  return (next) => async (req) => {
    const own = req.contextValues.get(meshVerifiedKey) ? undefined : caps;
    if (!req.stream) {
      check(req.method.input, req.message, own);
      return next(req);
    }
    const stream = req as StreamRequest;
    return next({ ...stream, message: checked(req.method.input, stream.message, own) });
  };
}
