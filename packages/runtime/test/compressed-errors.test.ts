// An error answer large enough for Connect to compress (over 1 KiB, the client
// accepting gzip) is still answered: the adapter that types errors without an
// ErrorDetail reads the compressed body back. It once asked zlib for an output
// limit it refuses, so the answer was never written and the caller hung.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import { describe, expect, it } from "vitest";
import { serveDuringSuite } from "./support.js";

const long = "x".repeat(4000);

describe("error answers Connect compresses", () => {
  const served = serveDuringSuite(
    {
      env: {},
      routes: (router) => {
        router.service(health.Health, {
          // No ErrorDetail: the adapter rewrites the answer into a typed one.
          async check() {
            throw new ConnectError(`not here: ${long}`, Code.NotFound);
          },
          async *watch() {
            yield* [];
            throw new ConnectError(`not here: ${long}`, Code.NotFound);
          },
        });
      },
    },
    { level: "info" },
  );

  /** The call's error, or a failure when no answer comes within 5 s. */
  async function errorOf(call: (signal: AbortSignal) => Promise<unknown>): Promise<ConnectError> {
    const signal = AbortSignal.timeout(5000);
    try {
      await call(signal);
    } catch (error) {
      return ConnectError.from(error);
    }
    throw new Error("the call succeeded");
  }

  const transports = {
    "Connect, binary, HTTP/2": () =>
      createConnectTransport({ baseUrl: served.url, httpVersion: "2", useBinaryFormat: true }),
    "Connect, JSON, HTTP/1.1": () =>
      createConnectTransport({ baseUrl: served.url, httpVersion: "1.1" }),
    "gRPC-Web, HTTP/1.1": () => createGrpcWebTransport({ baseUrl: served.url, httpVersion: "1.1" }),
  };

  for (const [name, transport] of Object.entries(transports)) {
    it(`answers a unary call with the typed error over ${name}`, async () => {
      const client = createClient(health.Health, transport());
      const error = await errorOf((signal) => client.check({ service: "" }, { signal }));
      expect(error.code).toBe(Code.NotFound);
      // The typed answer keeps the message's start (messages are cut at 512 characters).
      expect(error.rawMessage).toMatch(/^not here: x{400}/);
    });

    it(`ends a stream with the typed error over ${name}`, async () => {
      const client = createClient(health.Health, transport());
      const error = await errorOf(async (signal) => {
        for await (const _ of client.watch({ service: "" }, { signal })) {
          // nothing is sent before the error
        }
      });
      expect(error.code).toBe(Code.NotFound);
      // The typed answer keeps the message's start (messages are cut at 512 characters).
      expect(error.rawMessage).toMatch(/^not here: x{400}/);
    });
  }

  it("logs no failed write of an answer", () => {
    expect(served.lines.filter((l) => String(l.msg).includes("failed"))).toEqual([]);
  });
});
