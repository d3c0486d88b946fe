/**
 * What happens to the part of a request body nobody reads. A body refused
 * early (too large, malformed, wrong content type) stays unread; over HTTP/2
 * its stream then stays open with the data buffered in the session until
 * nghttp2's memory limit kills the whole connection — every other call on it
 * too — with ENHANCE_YOUR_CALM, and the call counts as in flight until the
 * client gives up (holding a graceful shutdown for its full grace period).
 *
 * So the rest is read and dropped, and an HTTP/2 client that goes on sending
 * more than a budget past that gets its stream closed with NO_ERROR (RFC 9113
 * §8.1: a server may stop a request it has answered). Closing at once is not an option: a gRPC response's
 * trailers go out after the stream's writable side finishes and would be cut
 * off — but by the time a budget's worth of bytes has arrived, the answer is
 * long gone.
 */
import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { HttpRequest } from "./http-types.js";

const discarding = new WeakSet<HttpRequest>();

/** Read and drop the rest of `req`; over HTTP/2, stop the stream once `budget` more bytes arrived. */
export function discardRequestBody(req: HttpRequest, budget: number): void {
  if (discarding.has(req) || req.complete || req.destroyed) return;
  discarding.add(req);
  // HTTP/1.1 has no way to stop one request but closing the connection, and a
  // client still sending then reads ECONNRESET instead of the answer: there the
  // rest is read and dropped (as Node does on its own), bounded by the
  // server's request timeout.
  if ("stream" in req) {
    const stream = req.stream;
    let dropped = 0;
    req.on("data", (chunk: Buffer | string) => {
      dropped += chunk.length;
      // Only once the answer is wholly out: closing earlier would reset the
      // stream before the client read the refusal.
      if (dropped > budget && !stream.closed && answered(stream))
        stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
  }
  // An error while draining concerns nobody: the call is answered.
  req.on("error", () => undefined);
  req.resume();
}

/** Whether the response on `stream` is completely sent (a gRPC one with its trailers). */
function answered(stream: http2.ServerHttp2Stream): boolean {
  if (!stream.headersSent) return false;
  const type = String(stream.sentHeaders?.["content-type"] ?? "");
  if (type.startsWith("application/grpc")) return stream.sentTrailers !== undefined;
  return stream.writableFinished;
}

/**
 * The request body as Connect reads it, except that stopping early (a
 * refusal) leaves the request readable and drains it, instead of destroying
 * the request and with it any chance to drain (see the module comment).
 */
export async function* requestBody(req: HttpRequest, budget: number): AsyncGenerator<Uint8Array> {
  const chunks = req.iterator({ destroyOnReturn: false });
  let done = false;
  try {
    for (;;) {
      let next: IteratorResult<unknown>;
      try {
        next = await chunks.next();
      } catch (error) {
        throw callerWentAway(error);
      }
      if (next.done) break;
      const chunk = next.value;
      yield typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    }
    done = true;
  } finally {
    if (!done) {
      await chunks.return?.().catch(() => undefined);
      discardRequestBody(req, budget);
    }
  }
}

/**
 * A failed read of the request body: the caller reset its stream or closed
 * its connection before sending all of it (a deadline passed, it gave up).
 * Connect would answer any non-ConnectError as Internal and the service log
 * it as its own fault; it is a cancel.
 */
function callerWentAway(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  return new ConnectError(
    "the caller went away before sending the whole request",
    Code.Canceled,
    undefined,
    undefined,
    error,
  );
}

/**
 * Called when an HTTP/2 response is sent (its stream's writable side
 * finished): a request body nobody started reading is drained; one a plain
 * HTTP handler read part of and destroyed cannot be, and its stream is
 * closed (plain HTTP responses have no trailers to lose).
 */
export function afterResponse(req: http2.Http2ServerRequest, budget: number): void {
  const stream = req.stream;
  if (req.complete || stream.closed || stream.destroyed) return;
  if (!req.destroyed) {
    discardRequestBody(req, budget);
    return;
  }
  if (stream.sentTrailers === undefined) stream.close(http2.constants.NGHTTP2_NO_ERROR);
}
