/**
 * Reading requests and writing responses of the REST surface, on either HTTP
 * version (Node's http and http2-compat objects share what is used here).
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { HttpRequest, HttpResponse } from "@trellis/runtime";
import { TrellisError } from "@trellis/runtime";
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

/** Write a response (unless the connection is gone or headers were sent). */
export function send(res: HttpResponse, response: RestResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  const body =
    typeof response.body === "string" ? Buffer.from(response.body, "utf8") : response.body;
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

/** Parse a JSON body; empty → undefined; malformed → 400 `invalid_request`. */
export function parseJsonBody(body: Buffer): JsonValue | undefined {
  const text = body.toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    // The parser's message quotes the body; never echo what the client sent.
    throw new TrellisError({
      reason: "invalid_request",
      message: "the request body is not valid JSON",
    });
  }
}
