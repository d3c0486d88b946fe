/**
 * A raw client for hostile-input tests: sends exactly the bytes and headers it
 * is given (over HTTP/1.1 or h2c), and reads any answer back into one shape —
 * status, headers, body, trailers — plus the RPC error it carries, decoded per
 * protocol (Connect unary JSON body, Connect end-of-stream message, gRPC
 * trailers, gRPC-Web trailer frame). Stock clients refuse to send garbage, so
 * the hardening tests and the fuzz run use this.
 */
import * as http from "node:http";
import * as http2 from "node:http2";
import { gunzipSync } from "node:zlib";
import type { Code } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import {
  endStreamFlag,
  endStreamFromJson,
  errorFromJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import type { ErrorDetail } from "@trellis/contracts/core";
import { errorDetailOf } from "../errors.js";

/** One request, as sent. */
export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Uint8Array;
  /** Give up after this long (default 10 s): the request hung. */
  timeoutMs?: number;
}

/** One response, as received. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  trailers: Record<string, string>;
}

function flatten(
  headers: http.IncomingHttpHeaders | http2.IncomingHttpHeaders,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined || key.startsWith(":")) continue;
    out[key] = Array.isArray(value) ? value.join(", ") : String(value);
  }
  return out;
}

/**
 * Send over HTTP/1.1 (a keep-alive agent per base URL is the caller's choice).
 * An answer that opens an SSE stream resolves at its headers.
 *
 * With keep-alive, a request sent on a reused connection the server was
 * closing as idle at that moment fails with ECONNRESET / "socket hang up"
 * before the server saw it; it is sent again once, as Node's documentation
 * advises (`request.reusedSocket`), on a new connection of its own (the
 * pool's other idle connections may be closing at the same moment: the
 * server times idle ones out together). Any other failure is the answer.
 */
export async function sendHttp1(
  baseUrl: string,
  request: RawRequest,
  agent?: http.Agent,
): Promise<RawResponse> {
  try {
    return await sendHttp1Once(baseUrl, request, agent);
  } catch (error) {
    if (!(error instanceof StaleSocketError)) throw error;
    return sendHttp1Once(baseUrl, request, false);
  }
}

class StaleSocketError extends Error {}

function sendHttp1Once(
  baseUrl: string,
  request: RawRequest,
  agent?: http.Agent | false,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(baseUrl);
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method ?? "POST",
        path: request.path,
        headers: request.headers ?? {},
        ...(agent !== undefined ? { agent } : {}),
        timeout: request.timeoutMs ?? 10_000,
      },
      (res) => {
        if (/^text\/event-stream/i.test(String(res.headers["content-type"] ?? ""))) {
          // An SSE stream stays open by design: its headers are the answer.
          resolve({
            status: res.statusCode ?? 0,
            headers: flatten(res.headers),
            body: Buffer.alloc(0),
            trailers: {},
          });
          req.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: flatten(res.headers),
            body: Buffer.concat(chunks),
            trailers: flatten(res.trailers),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () =>
      req.destroy(new Error(`no answer within ${request.timeoutMs ?? 10_000} ms`)),
    );
    let answered = false;
    req.on("response", () => {
      answered = true;
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      const stale =
        req.reusedSocket &&
        !answered &&
        (error.code === "ECONNRESET" || error.message === "socket hang up");
      reject(stale ? new StaleSocketError(error.message) : error);
    });
    req.end(request.body === undefined ? undefined : Buffer.from(request.body));
  });
}

/** An h2c connection that sends raw requests. */
export class Http2Wire {
  private session: http2.ClientHttp2Session;

  constructor(private readonly baseUrl: string) {
    this.session = this.connect();
  }

  private connect(): http2.ClientHttp2Session {
    // The default 10 MB of session memory is the client's own limit: bodies the
    // server refused early and still being sent count against it.
    const session = http2.connect(this.baseUrl, { maxSessionMemory: 256 });
    // A session the server reset (GOAWAY after a protocol error) is replaced on next use.
    session.on("error", () => undefined);
    return session;
  }

  send(request: RawRequest): Promise<RawResponse> {
    if (this.session.closed || this.session.destroyed) this.session = this.connect();
    return new Promise((resolve, reject) => {
      const stream = this.session.request({
        ":method": request.method ?? "POST",
        ":path": request.path,
        ...(request.headers ?? {}),
      });
      const timeoutMs = request.timeoutMs ?? 10_000;
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      let status = 0;
      let headers: Record<string, string> = {};
      let trailers: Record<string, string> = {};
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        status = Number(h[":status"] ?? 0);
        headers = flatten(h);
      });
      stream.on("trailers", (t) => {
        trailers = flatten(t);
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        clearTimeout(timer);
        resolve({ status, headers, body: Buffer.concat(chunks), trailers });
      });
      stream.on("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      stream.end(request.body === undefined ? undefined : Buffer.from(request.body));
    });
  }

  close(): void {
    this.session.close();
  }
}

/** What an RPC response says. */
export type RpcOutcome =
  | { kind: "ok" }
  | { kind: "error"; code: Code; message: string; detail: ErrorDetail | undefined }
  | { kind: "unreadable"; why: string };

function* envelopes(body: Uint8Array): Generator<{ flags: number; data: Uint8Array }> {
  let offset = 0;
  while (offset + 5 <= body.byteLength) {
    const flags = body[offset] ?? 0;
    const length = new DataView(body.buffer, body.byteOffset + offset + 1, 4).getUint32(0);
    const data = body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    yield { flags, data };
  }
}

function inflate(data: Uint8Array, flags: number, encoding: string | undefined): Uint8Array {
  if ((flags & 1) === 0) return data;
  if (encoding === "gzip") return gunzipSync(data);
  throw new Error(`compressed frame with encoding ${encoding}`);
}

function fromError(error: ConnectError): RpcOutcome {
  return {
    kind: "error",
    code: error.code,
    message: error.rawMessage,
    detail: errorDetailOf(error),
  };
}

/**
 * Decode the RPC outcome of a response by its content type: gRPC and
 * gRPC-Web status in trailers (or headers, trailers-only), Connect streams in
 * the end-of-stream message, anything else as a Connect unary response.
 */
export function rpcOutcome(res: RawResponse): RpcOutcome {
  const type = (res.headers["content-type"] ?? "").toLowerCase();
  try {
    if (/^application\/grpc-web/.test(type)) {
      if (res.headers["grpc-status"] !== undefined) {
        const error = findTrailerError(new Headers(res.headers));
        return error ? fromError(error) : { kind: "ok" };
      }
      for (const frame of envelopes(res.body)) {
        if ((frame.flags & trailerFlag) === trailerFlag) {
          const trailer = trailerParse(
            inflate(frame.data, frame.flags, res.headers["grpc-encoding"]),
          );
          const error = findTrailerError(trailer);
          return error ? fromError(error) : { kind: "ok" };
        }
      }
      return { kind: "unreadable", why: `gRPC-Web response without trailers (HTTP ${res.status})` };
    }
    if (/^application\/grpc/.test(type)) {
      const merged = new Headers({ ...res.headers, ...res.trailers });
      if (merged.get("grpc-status") === null) {
        return {
          kind: "unreadable",
          why: `gRPC response without grpc-status (HTTP ${res.status})`,
        };
      }
      const error = findTrailerError(merged);
      return error ? fromError(error) : { kind: "ok" };
    }
    if (/^application\/connect\+/.test(type) && res.status === 200) {
      for (const frame of envelopes(res.body)) {
        if ((frame.flags & endStreamFlag) === endStreamFlag) {
          const end = endStreamFromJson(
            inflate(frame.data, frame.flags, res.headers["connect-content-encoding"]),
          );
          return end.error ? fromError(end.error) : { kind: "ok" };
        }
      }
      return { kind: "unreadable", why: "Connect stream without an end-of-stream message" };
    }
    if (res.status === 200) return { kind: "ok" };
    if (!/^application\/json/.test(type)) {
      return {
        kind: "unreadable",
        why: `HTTP ${res.status} with content type ${JSON.stringify(type)}`,
      };
    }
    const body =
      res.headers["content-encoding"] === "gzip" ? gunzipSync(res.body) : new Uint8Array(res.body);
    const unreadable = new ConnectError("unreadable", 2);
    try {
      return fromError(errorFromJsonBytes(body, undefined, unreadable));
    } catch {
      return { kind: "unreadable", why: "error body is not a Connect error" };
    }
  } catch (error) {
    return { kind: "unreadable", why: String(error) };
  }
}

/** A protobuf envelope (gRPC, gRPC-Web, Connect streaming framing) around `data`. */
export function envelope(data: Uint8Array, flags = 0): Uint8Array {
  const out = new Uint8Array(5 + data.byteLength);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, data.byteLength);
  out.set(data, 5);
  return out;
}
