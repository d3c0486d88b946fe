/**
 * The Node request handler for RPCs: Connect's router and its node adapter
 * functions, plus the one thing Connect has no hook for — the errors it
 * raises before any interceptor runs (see `protocol-errors.ts`).
 *
 * Each RPC's universal handler is wrapped; its response is left alone unless
 * it is an error without an ErrorDetail, which is then rewritten in the
 * response's own protocol:
 *  - Connect unary: the JSON error body (and the HTTP status of its new code);
 *  - Connect streaming: the end-of-stream message;
 *  - gRPC: the trailers (`grpc-status`, `grpc-message`, `grpc-status-details-bin`);
 *  - gRPC-Web: the trailer frame at the end of the body;
 *  - refusals before any protocol applies (wrong content type 415, wrong
 *    method 405, a bidi stream over HTTP/1.1): a Connect JSON error body.
 *
 * Successful responses pass through untouched; only streaming protocols pay
 * one extra async-iterator step per frame.
 *
 * The rewriting uses Connect's protocol helpers (`@connectrpc/connect/protocol-*`),
 * which follow the pinned version (2.1.2); `test/protocol-hardening.test.ts`
 * covers each protocol.
 */
import type { EventEmitter } from "node:events";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ConnectRouterOptions,
  type ContextValues,
  createConnectRouter,
} from "@connectrpc/connect";
import {
  type Compression,
  encodeEnvelope,
  envelopeDecompress,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  createEndStreamSerialization,
  endStreamFlag,
  endStreamFromJson,
  errorFromJsonBytes,
  errorToJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { errorDetailOf, toConnectError } from "./errors.js";
import type { HttpRequest, HttpResponse } from "./http-types.js";
import { scanJsonStructure } from "./json-scan.js";
import type { RequestLimits } from "./limits.js";
import type { Logger } from "./logger.js";
import { requestStructureGuard } from "./proto-scan.js";
import { invalidUtf8, typedRpcError } from "./protocol-errors.js";
import { requestBody } from "./request-body.js";
import { requestIdKey } from "./request-id.js";
import {
  defaultStructureLimits,
  type StructureLimits,
  structureError,
} from "./structure-limits.js";

/** Options of {@link createRpcHandler}. */
export interface RpcHandlerOptions
  extends Omit<ConnectRouterOptions, "readMaxBytes" | "jsonOptions" | "binaryOptions"> {
  routes: (router: ConnectRouter) => void;
  /** Requests whose path is no RPC. */
  fallback: (req: HttpRequest, res: HttpResponse) => void;
  contextValues: (req: HttpRequest) => ContextValues;
  /** The request id of a request (for error messages and logs). */
  requestIdOf: (req: HttpRequest) => string;
  limits: RequestLimits;
  /** Structure limits of JSON requests (defaults when absent). */
  structure?: StructureLimits;
  /** Binary requests left out of the structure scan (`ServiceOptions.trustedRequest`). */
  trustedRequest?: (req: HttpRequest) => boolean;
  logger: Logger;
}

const compressions: Compression[] = [compressionGzip, compressionBrotli];
const compressedFlag = 0b00000001;
/**
 * The most an answer this server compressed may decompress to when it is
 * read back to be rewritten: Connect's own largest message (`writeMaxBytes`'
 * default), which is also the most zlib accepts as an output limit — a larger
 * one (say `Number.MAX_SAFE_INTEGER`) makes zlib throw, and the answer was
 * then never written.
 */
const compressedAnswerMaxBytes = 0xffffffff;

// Response content types (set by Connect's handlers) that say which protocol answered.
const grpcWebType = /^application\/grpc-web(?:-text)?(?:\+|;|$)/i;
const grpcType = /^application\/grpc(?:\+|;|$)/i;
const connectStreamType = /^application\/connect\+/i;

/**
 * JSON text must be UTF-8: refuse other bytes instead of decoding them to
 * U+FFFD. It is also the one hook between the bytes and protobuf's JSON
 * conversion, so the structure limits (keys per object, values, key length)
 * are checked here, on the bytes (`json-scan.ts`), before anything is parsed
 * or a Struct of 200,000 keys is built. Text too short to break any of them
 * is not scanned.
 */
function strictUtf8Decoder(structure: StructureLimits): { decode(input?: Uint8Array): string } {
  const fatal = new TextDecoder("utf-8", { fatal: true });
  const worthScanning = Math.min(
    structure.maxKeys * 4,
    structure.maxNodes * 2,
    structure.maxKeyLength,
  );
  return {
    decode(input) {
      if (input !== undefined && input.byteLength > worthScanning) {
        const violation = scanJsonStructure(input, structure);
        if (violation !== undefined) throw toConnectError(structureError(violation, structure));
      }
      try {
        return fatal.decode(input);
      } catch {
        // A ConnectError passes through Connect's JSON parse unchanged.
        throw invalidUtf8();
      }
    },
  };
}

/** Everything about one call that the rewriting needs. */
interface CallInfo {
  rpc: string;
  requestId: string;
  httpVersion: string;
}

/**
 * Build the RPC request handler: every route of `options.routes` on
 * Connect, gRPC and gRPC-Web, with typed errors for every refusal.
 */
export function createRpcHandler(
  options: RpcHandlerOptions,
): (req: HttpRequest, res: HttpResponse) => void {
  const {
    routes,
    fallback,
    contextValues,
    requestIdOf,
    limits,
    logger,
    structure,
    trustedRequest,
    ...connect
  } = options;
  // Depth stays with Connect's recursion limit (message levels).
  const structureLimits = structure ?? {
    ...defaultStructureLimits,
    maxDepth: limits.maxNestingDepth,
  };
  const jsonOptions = {
    // Strict JSON: an unknown field or enum name is refused, not dropped. With
    // Connect's default (ignore) a misspelt field or enum value silently
    // becomes the default value — `"BUSY_POLICY_REJECTT"` would enqueue.
    ignoreUnknownFields: false,
    recursionLimit: limits.maxNestingDepth,
    textDecoder: strictUtf8Decoder(structureLimits),
  };
  const router = createConnectRouter({
    acceptCompression: compressions,
    ...connect,
    readMaxBytes: limits.maxBodyBytes,
    jsonOptions,
    binaryOptions: { recursionLimit: limits.maxNestingDepth },
  });
  routes(router);
  const endStream = createEndStreamSerialization({});

  const paths = new Map<string, UniversalHandler>();
  for (const handler of router.handlers) paths.set(handler.requestPath, handler);

  /** The typed error for an error without ErrorDetail (see `protocol-errors.ts`). */
  function fail(error: ConnectError, call: CallInfo): ConnectError {
    return typedRpcError(bare(error), {
      rpc: call.rpc,
      requestId: call.requestId,
      logger,
      limits,
    });
  }

  /** A Connect unary error response (JSON body) for `error`, with `status` unless given by its code. */
  function jsonErrorResponse(
    error: ConnectError,
    status: number,
    header: Headers = new Headers(),
  ): UniversalServerResponse {
    const body = errorToJsonBytes(error, {});
    header.set("content-type", "application/json");
    header.set("content-length", String(body.byteLength));
    header.delete("content-encoding");
    return { status, header, body: once(body) };
  }

  async function rewriteUnary(
    res: UniversalServerResponse,
    call: CallInfo,
  ): Promise<UniversalServerResponse> {
    const header = res.header ?? new Headers();
    if (res.body === undefined) return refusal(res, header, call);
    const raw = await collect(res.body);
    let bytes = raw;
    const encoding = header.get("content-encoding");
    if (encoding) {
      const compression = compressions.find((c) => c.name === encoding);
      if (compression) bytes = await compression.decompress(raw, compressedAnswerMaxBytes);
    }
    let original: ConnectError;
    try {
      original = errorFromJsonBytes(bytes, undefined, new ConnectError("", Code.Internal));
    } catch {
      original = new ConnectError(`unreadable error body (HTTP ${res.status})`, Code.Internal);
    }
    if (errorDetailOf(original) !== undefined) return { ...res, body: once(raw) };
    const typedError = fail(original, call);
    return jsonErrorResponse(typedError, codeToHttpStatus(typedError.code), header);
  }

  /** Connect refused the request before choosing a protocol (no body). */
  function refusal(
    res: UniversalServerResponse,
    header: Headers,
    call: CallInfo,
  ): UniversalServerResponse {
    const mistake = requestMistake(res.status, call);
    if (mistake !== undefined) {
      // 505: a bidirectional stream needs HTTP/2; it is the request that is wrong, not the server.
      const status = res.status === 505 ? 400 : res.status;
      return jsonErrorResponse(
        fail(new ConnectError(mistake, Code.InvalidArgument), call),
        status,
        header,
      );
    }
    const error = fail(
      new ConnectError(`request refused (HTTP ${res.status})`, Code.Unknown),
      call,
    );
    return jsonErrorResponse(error, codeToHttpStatus(error.code), header);
  }

  /** What the client got wrong when Connect refused with `status` (415, 405, 505), else undefined. */
  function requestMistake(status: number, call: CallInfo): string | undefined {
    switch (status) {
      case 415:
        return "unsupported content type; use application/json, application/proto, application/connect+json, application/connect+proto, application/grpc or application/grpc-web";
      case 405:
        return "HTTP method not allowed for this RPC; use POST (GET only for side-effect-free unary methods over Connect)";
      case 505:
        return `${call.rpc} is a bidirectional stream: call it over HTTP/2 (got HTTP/${call.httpVersion})`;
      default:
        return undefined;
    }
  }

  /** Rewrite the end-of-stream frame of a Connect stream. */
  function rewriteEndStream(
    body: AsyncIterable<Uint8Array>,
    header: Headers,
    call: CallInfo,
  ): AsyncGenerator<Uint8Array> {
    return rewriteFlaggedFrames(body, endStreamFlag, async (chunk) => {
      const data = await frameData(chunk, header.get("connect-content-encoding"));
      let end: ReturnType<typeof endStreamFromJson>;
      try {
        end = endStreamFromJson(data);
      } catch {
        return undefined;
      }
      if (end.error === undefined || errorDetailOf(end.error) !== undefined) return undefined;
      return encodeEnvelope(
        endStreamFlag,
        endStream.serialize({ metadata: end.metadata, error: fail(end.error, call) }),
      );
    });
  }

  /** Rewrite the trailer frame of a gRPC-Web response. */
  function rewriteGrpcWebTrailer(
    body: AsyncIterable<Uint8Array>,
    header: Headers,
    call: CallInfo,
  ): AsyncGenerator<Uint8Array> {
    return rewriteFlaggedFrames(body, trailerFlag, async (chunk) => {
      const trailer = trailerParse(await frameData(chunk, header.get("grpc-encoding")));
      if (!retypeTrailer(trailer, call)) return undefined;
      return encodeEnvelope(trailerFlag, trailerSerialize(trailer));
    });
  }

  /**
   * Pass a framed body through, giving each whole frame that carries `flag`
   * (a Connect end-of-stream, a gRPC-Web trailer) to `rewrite`: the frame to
   * send instead, or undefined to send it as it is.
   */
  async function* rewriteFlaggedFrames(
    body: AsyncIterable<Uint8Array>,
    flag: number,
    rewrite: (frame: Uint8Array) => Promise<Uint8Array | undefined>,
  ): AsyncGenerator<Uint8Array> {
    for await (const chunk of body) {
      const flags = chunk[0] ?? 0;
      if ((flags & flag) !== flag || chunk.byteLength < 5) {
        yield chunk;
        continue;
      }
      yield (await rewrite(chunk)) ?? chunk;
    }
  }

  /** Rewrite the trailers of a gRPC response once its body is done. */
  async function* rewriteGrpcTrailer(
    body: AsyncIterable<Uint8Array>,
    trailer: Headers,
    call: CallInfo,
  ): AsyncGenerator<Uint8Array> {
    yield* body;
    retypeTrailer(trailer, call);
  }

  /** Replace an untyped error status in gRPC trailers; false when there was nothing to do. */
  function retypeTrailer(trailer: Headers, call: CallInfo): boolean {
    const error = findTrailerError(trailer);
    if (error === undefined || errorDetailOf(error) !== undefined) return false;
    const typedError = fail(error, call);
    trailer.delete("grpc-status");
    trailer.delete("grpc-message");
    trailer.delete("grpc-status-details-bin");
    setTrailerStatus(trailer, typedError);
    return true;
  }

  async function frameData(chunk: Uint8Array, encoding: string | null): Promise<Uint8Array> {
    const envelope = { flags: chunk[0] ?? 0, data: chunk.subarray(5) };
    if ((envelope.flags & compressedFlag) === 0) return envelope.data;
    const compression = compressions.find((c) => c.name === encoding) ?? null;
    return (await envelopeDecompress(envelope, compression, compressedAnswerMaxBytes)).data;
  }

  function harden(
    handler: UniversalHandler,
  ): (req: UniversalServerRequest) => Promise<UniversalServerResponse> {
    const rpc = `${handler.service.typeName}/${handler.method.name}`;
    return async (req) => {
      const call: CallInfo = {
        rpc,
        requestId: req.contextValues?.get(requestIdKey) ?? "",
        httpVersion: req.httpVersion,
      };
      let res: UniversalServerResponse;
      try {
        res = await handler(req);
      } catch (error) {
        logger.error("rpc handler failed outside the protocol", {
          rpc,
          request_id: call.requestId,
          error,
        });
        return jsonErrorResponse(
          fail(new ConnectError("internal error", Code.Internal), call),
          500,
        );
      }
      const header = res.header ?? new Headers();
      const type = header.get("content-type") ?? "";
      if (res.status !== 200) return rewriteUnary(res, call);
      if (res.body === undefined) return res;
      if (grpcWebType.test(type))
        return { ...res, body: rewriteGrpcWebTrailer(res.body, header, call) };
      if (grpcType.test(type)) {
        const trailer = res.trailer ?? new Headers();
        return { ...res, trailer, body: rewriteGrpcTrailer(res.body, trailer, call) };
      }
      if (connectStreamType.test(type))
        return { ...res, body: rewriteEndStream(res.body, header, call) };
      return res;
    };
  }

  const hardened = new Map<
    string,
    (req: UniversalServerRequest) => Promise<UniversalServerResponse>
  >();
  for (const [path, handler] of paths) hardened.set(path, harden(handler));

  return (req, res) => {
    const path = req.url?.split("?", 1)[0] ?? "";
    const handler = hardened.get(path);
    if (handler === undefined) {
      fallback(req, res);
      return;
    }
    let uReq: UniversalServerRequest;
    try {
      const method = paths.get(path)?.method;
      const body = requestBody(req, limits.maxBodyBytes);
      uReq = {
        ...universalRequestFromNodeRequest(req, res, undefined, contextValues(req)),
        // Binary protobuf is checked against the structure limits before it is decoded.
        body:
          method === undefined || trustedRequest?.(req)
            ? body
            : requestStructureGuard(body, {
                desc: method.input,
                contentType: String(req.headers["content-type"] ?? ""),
                encoding: encodingOf(req),
                compressions,
                limits: structureLimits,
                maxDepth: limits.maxNestingDepth,
                maxBytes: limits.maxBodyBytes,
              }),
      };
    } catch {
      // HTTP/1.0 without Host, HTTP/2 without :authority: Connect cannot build a URL.
      const call = { rpc: path, requestId: requestIdOf(req), httpVersion: req.httpVersion };
      const refused = fail(
        new ConnectError(
          "the request names no host (a Host header, or :authority over HTTP/2)",
          Code.InvalidArgument,
        ),
        call,
      );
      universalResponseToNodeResponse(jsonErrorResponse(refused, 400), res).catch(() => undefined);
      return;
    }
    handler(uReq)
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((reason: unknown) => {
        // The client went away while the response was written: nothing to tell it.
        if (ConnectError.from(reason).code === Code.Aborted) return;
        logger.warn("writing an rpc response failed", {
          rpc: path,
          request_id: requestIdOf(req),
          error: reason,
        });
        (res as unknown as EventEmitter & { destroy(): void }).destroy();
      });
  };
}

/** The compression a request's messages say they use, whichever protocol's header names it. */
function encodingOf(req: HttpRequest): string | null {
  for (const name of ["grpc-encoding", "connect-content-encoding", "content-encoding"]) {
    const value = req.headers[name];
    if (typeof value === "string" && value !== "") return value;
  }
  return null;
}

/** The same error without its metadata (the response headers it was read from). */
function bare(error: ConnectError): ConnectError {
  const copy = new ConnectError(error.rawMessage, error.code);
  copy.details.push(...error.details);
  return copy;
}

function once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return {
    async *[Symbol.asyncIterator]() {
      yield bytes;
    },
  };
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.byteLength;
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
