// Hostile input against one service, over every protocol, with raw bytes: each
// refusal is a 4xx-class code with an ErrorDetail, never Internal, and the
// process keeps serving.
import { once } from "node:events";
import * as http2 from "node:http2";
import * as net from "node:net";
import { create, fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { health } from "@trellis/contracts/grpc";
import {
  DeliverRequestSchema,
  SignalService,
  SubmitTaskRequestSchema,
  TaskService,
} from "@trellis/contracts/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createService, type TrellisService } from "../src/server.js";
import {
  envelope,
  Http2Wire,
  type RawResponse,
  rpcOutcome,
  sendHttp1,
} from "../src/testing/wire.js";
import { captureLogger, testHealthImpl } from "./support.js";

const check = "/grpc.health.v1.Health/Check";
const deliver = "/trellis.tasks.v1.SignalService/Deliver";
const submit = "/trellis.tasks.v1.TaskService/SubmitTask";
const watch = "/trellis.tasks.v1.TaskService/WatchTask";
const reflect = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

const limits = { maxBodyBytes: 4096, maxNestingDepth: 32 };
const garbage = new Uint8Array([0xff, 0xff, 0xff, 0x0f]);
// HealthCheckRequest { service (1): <0xff 0xfe> } — a string field that is not UTF-8.
const badUtf8Binary = new Uint8Array([0x0a, 0x02, 0xff, 0xfe]);
const badUtf8Json = Buffer.concat([
  Buffer.from('{"service":"'),
  Buffer.from([0xff, 0xfe]),
  Buffer.from('"}'),
]);

function nestedJson(levels: number): string {
  return `{"signalId":"s","payload":${"[".repeat(levels)}${"]".repeat(levels)}}`;
}

/** DeliverRequest whose payload Value nests `levels` lists deep, as protobuf binary. */
function nestedBinary(levels: number): Uint8Array {
  const message = fromJson(DeliverRequestSchema, JSON.parse(nestedJson(levels)), {
    recursionLimit: 10_000,
  });
  return toBinary(DeliverRequestSchema, message);
}

type Protocol = "connect" | "grpc" | "grpc-web";

/** A gRPC Deliver call opened on `session`, its answer read and dropped. */
function openDeliverStream(session: http2.ClientHttp2Session): http2.ClientHttp2Stream {
  const stream = session.request({
    ":method": "POST",
    ":path": deliver,
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.on("data", () => undefined);
  return stream;
}

describe("hostile input over every protocol", () => {
  const { logger, lines } = captureLogger("svc", "info");
  let service: TrellisService;
  let url: string;
  let h2: Http2Wire;
  const delivered: unknown[] = [];

  beforeAll(async () => {
    service = createService({
      name: "svc",
      logger,
      limits,
      env: {},
      routes: (router) => {
        router.service(health.Health, testHealthImpl());
        router.service(SignalService, {
          async deliver(req) {
            delivered.push(req.payload);
            return {};
          },
        });
        router.service(TaskService, {
          async submitTask() {
            return {};
          },
          async *watchTask() {
            yield {};
          },
        });
      },
    });
    ({ url } = await service.listen({ host: "127.0.0.1", port: 0 }));
    h2 = new Http2Wire(url);
  });

  afterAll(async () => {
    h2?.close();
    await service?.close({ graceMs: 500 });
  });

  /** Send `body` to `path` framed for `protocol` (Connect over HTTP/1.1, gRPC over h2c). */
  function send(
    protocol: Protocol,
    path: string,
    body: Uint8Array,
    options: { json?: boolean; headers?: Record<string, string>; raw?: boolean } = {},
  ): Promise<RawResponse> {
    const json = options.json ?? false;
    if (protocol === "connect") {
      return sendHttp1(url, {
        path,
        headers: {
          "content-type": json ? "application/json" : "application/proto",
          ...options.headers,
        },
        body,
      });
    }
    const framed = options.raw ? body : envelope(body);
    if (protocol === "grpc") {
      return h2.send({
        path,
        headers: {
          "content-type": json ? "application/grpc+json" : "application/grpc",
          te: "trailers",
          ...options.headers,
        },
        body: framed,
      });
    }
    return sendHttp1(url, {
      path,
      headers: { "content-type": "application/grpc-web+proto", ...options.headers },
      body: framed,
    });
  }

  /** The response is the given error, typed, and (for Connect) not a 5xx. */
  function expectTyped(res: RawResponse, code: Code, reason: string): void {
    const outcome = rpcOutcome(res);
    expect(outcome).toMatchObject({ kind: "error", code });
    if (outcome.kind !== "error") return;
    expect(outcome.detail?.reason).toBe(reason);
    expect(res.status).toBeLessThan(500);
    expect(res.headers["x-request-id"]).toBeTruthy();
  }

  const protocols: Protocol[] = ["connect", "grpc", "grpc-web"];

  it.each(protocols)(
    "refuses a malformed binary message with InvalidArgument over %s",
    async (p) => {
      const res = await send(p, check, garbage);
      expectTyped(res, Code.InvalidArgument, "invalid_request");
      expect(rpcOutcome(res)).toMatchObject({
        message: expect.stringMatching(/not a valid protobuf/),
      });
      if (p === "connect") expect(res.status).toBe(400);
    },
  );

  it.each(protocols)("refuses a string field that is not UTF-8 over %s", async (p) => {
    const res = await send(p, check, badUtf8Binary);
    expectTyped(res, Code.InvalidArgument, "invalid_request");
    expect(rpcOutcome(res)).toMatchObject({ message: "the request is not valid UTF-8" });
  });

  it("refuses JSON text that is not UTF-8 (instead of decoding it to U+FFFD)", async () => {
    const res = await send("connect", check, badUtf8Json, { json: true });
    expectTyped(res, Code.InvalidArgument, "invalid_request");
  });

  it.each([
    ["malformed JSON", "{bad", check],
    ["a field of the wrong type", '{"service": 5}', check],
    ["an unknown enum name", '{"busyPolicy":"BUSY_POLICY_WHENEVER"}', submit],
    ["a JSON array instead of an object", "[1,2]", check],
    ["an unknown field", '{"service":"","servic":"typo"}', check],
  ])("refuses %s over Connect and gRPC+JSON", async (_name, body, path) => {
    const bytes = Buffer.from(body);
    expectTyped(
      await send("connect", path, bytes, { json: true }),
      Code.InvalidArgument,
      "invalid_request",
    );
    expectTyped(
      await send("grpc", path, bytes, { json: true }),
      Code.InvalidArgument,
      "invalid_request",
    );
  });

  it("accepts an unknown enum number in binary (open enum) for the handler to judge", async () => {
    const bytes = toBinary(
      SubmitTaskRequestSchema,
      create(SubmitTaskRequestSchema, { sessionId: "s", busyPolicy: 99 as never }),
    );
    expect(rpcOutcome(await send("grpc", submit, bytes))).toEqual({ kind: "ok" });
  });

  it.each(protocols)(
    "refuses a body above the size limit with ResourceExhausted over %s",
    async (p) => {
      const big = toBinary(
        DeliverRequestSchema,
        create(DeliverRequestSchema, { signalId: "x".repeat(limits.maxBodyBytes + 10) }),
      );
      const res = await send(p, deliver, big);
      expectTyped(res, Code.ResourceExhausted, "payload_too_large");
      expect(rpcOutcome(res)).toMatchObject({
        detail: { metadata: { limit_bytes: String(limits.maxBodyBytes) } },
      });
    },
  );

  it("says 413-class payload_too_large early from Content-Length over Connect", async () => {
    const res = await send("connect", deliver, Buffer.from(`{"signalId":"${"y".repeat(5000)}"}`), {
      json: true,
    });
    expectTyped(res, Code.ResourceExhausted, "payload_too_large");
    expect(res.status).toBe(429); // Connect's HTTP status of ResourceExhausted
  });

  it("stops reading a refused body over HTTP/2: the stream ends, the call is not left in flight", async () => {
    const session = http2.connect(url, { maxSessionMemory: 256 });
    try {
      const closes = Array.from({ length: 5 }, () => {
        const stream = openDeliverStream(session);
        // More than the flow-control window: the client cannot send it all unless read.
        stream.end(envelope(new Uint8Array(300_000)));
        return new Promise<number>((resolve) =>
          stream.on("close", () => resolve(stream.rstCode ?? -1)),
        );
      });
      // Before the fix these streams stayed open (half the request unread)
      // until the session closed; now each is drained or closed with NO_ERROR.
      const codes = await Promise.race([
        Promise.all(closes),
        new Promise<"stuck">((resolve) => setTimeout(() => resolve("stuck"), 5000)),
      ]);
      expect(codes).toEqual(Array(5).fill(http2.constants.NGHTTP2_NO_ERROR));
    } finally {
      session.close();
    }
  });

  it("answers an HTTP/1.1 upload far past the limit with the typed refusal", async () => {
    // A stream (the envelope says how large its message is, so it is refused at once).
    const res = await sendHttp1(url, {
      path: watch,
      headers: { "content-type": "application/connect+proto", "connect-protocol-version": "1" },
      body: envelope(new Uint8Array(2_000_000)),
    });
    expect(res.status).toBe(200);
    expectTyped(res, Code.ResourceExhausted, "payload_too_large");
  });

  it("refuses nesting deeper than the limit in JSON and binary, and accepts it below", async () => {
    const deep = await send("connect", deliver, Buffer.from(nestedJson(40)), { json: true });
    expectTyped(deep, Code.InvalidArgument, "invalid_request");
    expect(rpcOutcome(deep)).toMatchObject({ detail: { metadata: { limit_depth: "32" } } });
    // A hostile depth far past the parser's stack is refused just the same.
    const hostile = await send("connect", deliver, Buffer.from(nestedJson(1900)), { json: true });
    expectTyped(hostile, Code.InvalidArgument, "invalid_request");
    expectTyped(
      await send("grpc", deliver, nestedBinary(40)),
      Code.InvalidArgument,
      "invalid_request",
    );
    // Value → ListValue per level: 10 levels are 20 messages deep, under 32.
    const fine = await send("connect", deliver, Buffer.from(nestedJson(10)), { json: true });
    expect(rpcOutcome(fine)).toEqual({ kind: "ok" });
    const payload = delivered.at(-1) as Value;
    expect(toJson(ValueSchema, payload)).toEqual(JSON.parse(nestedJson(10)).payload);
  });

  it("types a malformed request to a server-streaming method (parsed inside the interceptors)", async () => {
    expectTyped(await send("grpc", watch, garbage), Code.InvalidArgument, "invalid_request");
    const stream = await sendHttp1(url, {
      path: watch,
      headers: { "content-type": "application/connect+proto" },
      body: envelope(garbage),
    });
    expect(stream.status).toBe(200);
    expectTyped(stream, Code.InvalidArgument, "invalid_request");
  });

  it("refuses a unary gRPC call with no message or two", async () => {
    const none = await send("grpc", check, new Uint8Array(), { raw: true });
    expectTyped(none, Code.InvalidArgument, "invalid_request");
    const two = Buffer.concat([envelope(new Uint8Array()), envelope(new Uint8Array())]);
    expectTyped(
      await send("grpc", check, two, { raw: true }),
      Code.InvalidArgument,
      "invalid_request",
    );
    const truncated = envelope(new Uint8Array(10)).subarray(0, 8);
    expectTyped(
      await send("grpc-web", check, truncated, { raw: true }),
      Code.InvalidArgument,
      "invalid_request",
    );
  });

  it("refuses an unknown compression with InvalidArgument, not Unimplemented (501)", async () => {
    const res = await send("connect", check, Buffer.from("{}"), {
      json: true,
      headers: { "content-encoding": "zstd-ish" },
    });
    expectTyped(res, Code.InvalidArgument, "invalid_request");
    expect(rpcOutcome(res)).toMatchObject({ detail: { param: "content-encoding" } });
    const grpc = await send("grpc", check, new Uint8Array(), {
      headers: { "grpc-encoding": "lz9" },
    });
    expectTyped(grpc, Code.InvalidArgument, "invalid_request");
  });

  it("refuses a bad timeout header", async () => {
    const res = await send("connect", check, Buffer.from("{}"), {
      json: true,
      headers: { "connect-timeout-ms": "soon" },
    });
    expectTyped(res, Code.InvalidArgument, "invalid_request");
  });

  it("answers an unknown RPC with Unimplemented in the caller's protocol", async () => {
    const grpc = await send("grpc", "/grpc.health.v1.Health/Nope", new Uint8Array());
    expect(grpc.status).toBe(200);
    expectTyped(grpc, Code.Unimplemented, "method_not_found");
    const web = await send("grpc-web", "/no.Such/Thing", new Uint8Array());
    expectTyped(web, Code.Unimplemented, "method_not_found");
    const connect = await send("connect", "/no.Such/Thing", Buffer.from("{}"), { json: true });
    expect(connect.status).toBe(404);
    expectTyped(connect, Code.Unimplemented, "method_not_found");
  });

  it("answers a wrong content type (415), a wrong method (405) and a bidi stream over HTTP/1.1 (400) with a typed JSON error", async () => {
    const text = await sendHttp1(url, {
      path: check,
      headers: { "content-type": "text/plain" },
      body: Buffer.from("x"),
    });
    expect(text.status).toBe(415);
    expectTyped(text, Code.InvalidArgument, "invalid_request");
    const get = await sendHttp1(url, { method: "GET", path: check });
    expect(get.status).toBe(405);
    expectTyped(get, Code.InvalidArgument, "invalid_request");
    const bidi = await sendHttp1(url, {
      path: reflect,
      headers: { "content-type": "application/connect+json" },
      body: envelope(Buffer.from("{}")),
    });
    expect(bidi.status).toBe(400);
    expectTyped(bidi, Code.InvalidArgument, "invalid_request");
  });

  async function rawExchange(request: string): Promise<string> {
    const socket = net.connect(service.address()!.port, "127.0.0.1");
    await once(socket, "connect");
    socket.end(request);
    const chunks: Buffer[] = [];
    for await (const chunk of socket) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("latin1");
  }

  it("survives HTTP/1.0 without a Host header (Connect used to throw out of the request listener)", async () => {
    const answer = await rawExchange(
      `POST ${check} HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"reason":"invalid_request"');
    const res = await send("connect", check, Buffer.from("{}"), { json: true });
    expect(rpcOutcome(res)).toEqual({ kind: "ok" });
  });

  it("answers a request Node's HTTP parser refuses with a typed JSON error", async () => {
    const answer = await rawExchange("GARBAGE\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"code":"invalid_argument"');
    const huge = await rawExchange(
      `GET / HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(huge).toContain('"reason":"payload_too_large"');
  });

  it("takes a client that resets its stream mid-request as a cancel, not a server error", async () => {
    const session = http2.connect(url);
    try {
      const resets = Array.from({ length: 5 }, () => {
        const stream = openDeliverStream(session);
        stream.on("error", () => undefined);
        // Half an envelope, then the client gives up (as a caller whose deadline passed).
        stream.write(envelope(new Uint8Array(64)).subarray(0, 20));
        const closed = once(stream, "close");
        setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), 50);
        return closed;
      });
      await Promise.all(resets);
      // The server noticed (its read failed) without logging its own fault.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(lines.filter((l) => l.level === "error")).toEqual([]);
      const res = await send("grpc", check, new Uint8Array());
      expect(rpcOutcome(res)).toMatchObject({ kind: "ok" });
    } finally {
      session.close();
    }
  });

  it("logs nothing at error level for any of it: none was the server's fault", () => {
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
  });

  it("serves more than ten concurrent calls without a MaxListeners warning", async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      await Promise.all(
        Array.from({ length: 40 }, () =>
          send(
            "grpc",
            check,
            toBinary(
              health.HealthCheckRequestSchema,
              create(health.HealthCheckRequestSchema, { service: "slow:30" }),
            ),
          ),
        ),
      );
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });
});
