/**
 * Checks every request message gets before a handler sees it, for values a
 * parser accepts but no service can keep: a string with U+0000 in it is valid
 * protobuf and valid JSON, and PostgreSQL refuses it in `text` and `jsonb`
 * alike (`invalid byte sequence for encoding "UTF8": 0x00`) — so without this
 * check a NUL in any id or text surfaced as an Internal error from whichever
 * query met it first.
 */
import type { DescMessage, Message } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import type { Interceptor, StreamRequest } from "@connectrpc/connect";
import { TrellisError } from "./errors.js";

function nulIn(text: string): boolean {
  return text.includes("\u0000");
}

function at(path: string, name: string | number): string {
  if (typeof name === "number") return `${path}[${name}]`;
  return path === "" ? name : `${path}.${name}`;
}

/**
 * The path (`input.parts[0].text`, `metadata["k"]`) of the first string in
 * `message` — field, list item, map key or value, Struct key or value — that
 * contains U+0000; undefined when there is none.
 */
export function findNulString(message: ReflectMessage, path = ""): string | undefined {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const here = at(path, field.jsonName);
    switch (field.fieldKind) {
      case "scalar": {
        const value = message.get(field);
        if (field.scalar === ScalarType.STRING && typeof value === "string" && nulIn(value))
          return here;
        break;
      }
      case "message": {
        const found = findNulString(message.get(field), here);
        if (found !== undefined) return found;
        break;
      }
      case "list": {
        if (field.listKind === "enum") break;
        let i = 0;
        for (const item of message.get(field)) {
          if (field.listKind === "message") {
            const found = findNulString(item as ReflectMessage, at(here, i));
            if (found !== undefined) return found;
          } else if (typeof item === "string" && nulIn(item)) {
            return at(here, i);
          }
          i++;
        }
        break;
      }
      case "map": {
        for (const [key, value] of message.get(field)) {
          const entry = `${here}[${JSON.stringify(String(key).replaceAll("\u0000", "\\u0000"))}]`;
          if (typeof key === "string" && nulIn(key)) return entry;
          if (field.mapKind === "message") {
            const found = findNulString(value as ReflectMessage, entry);
            if (found !== undefined) return found;
          } else if (typeof value === "string" && nulIn(value)) {
            return entry;
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

function check(desc: DescMessage, message: Message): void {
  const path = findNulString(reflect(desc, message as never, false));
  if (path === undefined) return;
  throw new TrellisError({
    reason: "invalid_request",
    message: `${path === "" ? "the request" : path} contains a NUL character (U+0000), which no field may hold`,
    ...(path === "" ? {} : { param: path }),
  });
}

async function* checked<T extends Message>(
  desc: DescMessage,
  messages: AsyncIterable<T>,
): AsyncGenerator<T> {
  for await (const message of messages) {
    check(desc, message);
    yield message;
  }
}

/**
 * Server interceptor applying the request checks to the request message (and
 * to each message of a client stream). Place it inside the error interceptor:
 * its refusals are domain errors (`invalid_request`).
 */
export function createRequestChecksInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (!req.stream) {
      check(req.method.input, req.message);
      return next(req);
    }
    const stream = req as StreamRequest;
    return next({ ...stream, message: checked(req.method.input, stream.message) });
  };
}
