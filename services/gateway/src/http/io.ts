/**
 * Reading requests and writing responses of the REST surface, on either HTTP
 * version (Node's http and http2-compat objects share what is used here).
 */
import { validateHeaderName, validateHeaderValue } from "node:http";
import type { JsonValue } from "@bufbuild/protobuf";
import type { HttpRequest, HttpResponse } from "@trellis/runtime";
import {
  defaultStructureLimits,
  type StructureLimits,
  scanJsonStructure,
  structureError,
  TrellisError,
} from "@trellis/runtime";
import type { HarnErrorResponse } from "../domain/errors.js";

/** A complete response of a REST route. */
export interface RestResponse {
  status: number;
  /** JSON text, or bytes (artifact content). */
  body: string | Uint8Array;
  headers: Record<string, string>;
}

/** Content type of JSON responses. */
export const jsonContentType = "application/json; charset=utf-8";

/** A JSON response. */
export function jsonResponse(
  status: number,
  body: JsonValue,
  headers: Record<string, string> = {},
): RestResponse {
  return {
    status,
    body: JSON.stringify(body),
    headers: { "content-type": jsonContentType, ...headers },
  };
}

/** The response of an error envelope. */
export function errorResponse(error: HarnErrorResponse): RestResponse {
  return jsonResponse(error.status, error.body as unknown as JsonValue, error.headers ?? {});
}

/**
 * Write a response (unless the connection is gone or headers were sent). A
 * header Node refuses (a CR/LF in a value, say) turns the whole response into
 * a 500 envelope before anything is set, so the status logged afterwards
 * (`res.statusCode`) is the status actually sent.
 */
export function send(res: HttpResponse, response: RestResponse): void {
  if (res.headersSent || res.destroyed) return;
  let headers = response.headers;
  let status = response.status;
  let payload = response.body;
  try {
    for (const [name, value] of Object.entries(headers)) {
      validateHeaderName(name);
      validateHeaderValue(name, value);
    }
  } catch {
    status = 500;
    payload = JSON.stringify({
      error: {
        code: "internal_error",
        message: "the response could not be encoded",
        type: "server_error",
        request_id: String(res.getHeader("x-request-id") ?? ""),
      },
    });
    headers = { "content-type": jsonContentType };
  }
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  const body = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  res.setHeader("content-length", String(body.byteLength));
  res.end(body);
}

/**
 * Read the whole body, refusing more than `limit` bytes with 413
 * `payload_too_large` (early, from Content-Length, when it is declared).
 */
export async function readBody(req: HttpRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer | string>) {
    const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buf.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

function tooLarge(limit: number): TrellisError {
  return new TrellisError({
    reason: "payload_too_large",
    message: `the request body exceeds the limit of ${limit} bytes`,
    metadata: { limit_bytes: String(limit) },
  });
}

/** Limits of {@link readJsonBody}. */
export interface JsonBodyLimits {
  /** Largest body in bytes (413 `payload_too_large` above). */
  maxBytes: number;
  /** Deepest nesting of objects and arrays (400 `invalid_request` below it). */
  maxDepth: number;
  /** Keys per object, values per body, key length (400 naming the field); defaults when absent. */
  structure?: Omit<StructureLimits, "maxDepth">;
}

// JSON media types: application/json and the structured-syntax suffix +json.
const jsonMediaType = /^application\/(?:[\w.+-]+\+)?json$/;

/**
 * Read and parse the JSON body of a write: bounded in size, then checked for
 * its media type (absent or JSON; a charset other than UTF-8 is refused),
 * UTF-8, syntax and nesting depth. Empty → undefined.
 */
export async function readJsonBody(
  req: HttpRequest,
  limits: JsonBodyLimits,
): Promise<JsonValue | undefined> {
  const body = await readBody(req, limits.maxBytes);
  if (body.byteLength === 0) return undefined;
  checkJsonContentType(req.headers["content-type"]);
  return parseJsonBody(body, {
    ...defaultStructureLimits,
    ...limits.structure,
    maxDepth: limits.maxDepth,
  });
}

function checkJsonContentType(raw: string | string[] | undefined): void {
  if (raw === undefined) return;
  const value = Array.isArray(raw) ? (raw[0] ?? "") : raw;
  const [type = "", ...params] = value.split(";").map((part) => part.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith("charset="))?.slice("charset=".length);
  const utf8 = charset === undefined || ["utf-8", "utf8", '"utf-8"'].includes(charset);
  if (jsonMediaType.test(type) && utf8) return;
  throw new TrellisError({
    reason: "invalid_request",
    message: `the request body must be application/json (UTF-8), got ${JSON.stringify(value.slice(0, 100))}`,
    param: "content-type",
  });
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parse a JSON body; empty → undefined; not UTF-8, malformed, nested deeper
 * than `maxDepth` or past the other structure limits (keys per object, values
 * per body, key length: `@trellis/runtime` structure-limits) → 400
 * `invalid_request` naming the field. A number is the depth, with the
 * default structure limits.
 */
export function parseJsonBody(
  body: Buffer,
  limits: StructureLimits | number = 64,
): JsonValue | undefined {
  const structure =
    typeof limits === "number" ? { ...defaultStructureLimits, maxDepth: limits } : limits;
  // On the bytes, before anything is decoded, parsed or converted (a Struct
  // of 200,000 keys stalled the process for seconds; even parsing it costs).
  const violation = scanJsonStructure(body, structure);
  if (violation !== undefined) throw structureError(violation, structure);
  let text: string;
  try {
    text = strictUtf8.decode(body);
  } catch {
    throw new TrellisError({
      reason: "invalid_request",
      message: "the request body is not valid UTF-8",
    });
  }
  if (text.trim() === "") return undefined;
  let value: JsonValue;
  try {
    value = JSON.parse(text) as JsonValue;
  } catch {
    // The parser's message quotes the body; never echo what the client sent.
    throw new TrellisError({
      reason: "invalid_request",
      message: "the request body is not valid JSON",
    });
  }
  const shape = inspectJson(value, structure.maxDepth);
  if (shape.nul) {
    // PostgreSQL stores no NUL in text or jsonb: refuse it here, for every route.
    throw new TrellisError({
      reason: "invalid_request",
      message: "the request body contains a NUL character (U+0000), which no field may hold",
    });
  }
  return value;
}

/**
 * Nesting depth of a parsed JSON value (a scalar is 0, `{}` and `[]` are 1)
 * and whether any string or key holds U+0000; walked without recursion, and
 * abandoned once deeper than `stopAfter`.
 */
export function inspectJson(
  value: JsonValue,
  stopAfter = Number.POSITIVE_INFINITY,
): { depth: number; nul: boolean } {
  let max = 0;
  let nul = false;
  const stack: { value: JsonValue; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: JsonValue; depth: number };
    if (typeof current === "string") {
      if (current.includes("\u0000")) nul = true;
      continue;
    }
    if (current === null || typeof current !== "object") continue;
    const here = depth + 1;
    if (here > max) {
      max = here;
      if (max > stopAfter) return { depth: max, nul };
    }
    if (Array.isArray(current)) {
      for (const child of current) stack.push({ value: child, depth: here });
    } else {
      for (const [key, child] of Object.entries(current)) {
        if (key.includes("\u0000")) nul = true;
        stack.push({ value: child, depth: here });
      }
    }
  }
  return { depth: max, nul };
}
