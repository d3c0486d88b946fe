import * as http2 from "node:http2";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import { describe, expect, it } from "vitest";
import { errorDetailOf } from "../src/errors.js";
import { createService, httpRequestId } from "../src/server.js";
import { serveDuringSuite, testHealthImpl } from "./support.js";

const { SERVING } = health.HealthCheckResponse_ServingStatus;

describe("createService: one port, every protocol", () => {
  const served = serveDuringSuite(
    {
      routes: (router) => router.service(health.Health, testHealthImpl()),
      http: (req, res) => {
        if (req.url === "/v1/ping") {
          res.setHeader("content-type", "text/plain");
          res.end(`pong ${httpRequestId(req)}`);
          return true;
        }
        if (req.url === "/v1/async") {
          return Promise.resolve().then(() => {
            res.end("later");
            return true;
          });
        }
        if (req.url === "/v1/throws") throw new Error("rest handler bug");
        return false;
      },
    },
    { close: { graceMs: 1000 } },
  );

  it("binds port 0 to a real port and reports a usable URL", () => {
    const address = served.service.address()!;
    expect(address.port).toBeGreaterThan(0);
    expect(served.url).toBe(`http://127.0.0.1:${address.port}`);
  });

  it("serves Connect JSON over HTTP/1.1 (fetch) with a generated request id", async () => {
    const res = await fetch(`${served.url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ service: "" }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "SERVING" });
    const id = res.headers.get("x-request-id");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    // The handler saw the same id through the context values.
    expect(res.headers.get("x-seen-request-id")).toBe(id);
  });

  it("keeps the caller's request id", async () => {
    const res = await fetch(`${served.url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "req-abc.123" },
      body: "{}",
    });
    expect(res.headers.get("x-request-id")).toBe("req-abc.123");
  });

  it("replaces an unacceptable caller request id", async () => {
    const res = await fetch(`${served.url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": `bad id ${"x".repeat(200)}` },
      body: "{}",
    });
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("serves gRPC over h2c on the same port", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    let requestId: string | null = null;
    const res = await client.check(
      { service: "" },
      { onHeader: (h) => (requestId = h.get("x-request-id")) },
    );
    expect(res.status).toBe(SERVING);
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("serves gRPC-Web over HTTP/1.1 and HTTP/2 on the same port", async () => {
    for (const httpVersion of ["1.1", "2"] as const) {
      const client = createClient(
        health.Health,
        createGrpcWebTransport({ baseUrl: served.url, httpVersion }),
      );
      expect((await client.check({ service: "" })).status).toBe(SERVING);
    }
  });

  it("serves Connect (binary) over HTTP/2 and HTTP/1.1", async () => {
    for (const httpVersion of ["1.1", "2"] as const) {
      const client = createClient(
        health.Health,
        createConnectTransport({ baseUrl: served.url, httpVersion, useBinaryFormat: true }),
      );
      expect((await client.check({ service: "" })).status).toBe(SERVING);
    }
  });

  it("serves server streams", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    const got: number[] = [];
    for await (const res of client.watch({ service: "" })) got.push(res.status);
    expect(got).toEqual([SERVING, SERVING]);
  });

  it("passes non-RPC paths to the plain-HTTP handler", async () => {
    const ping = await fetch(`${served.url}/v1/ping`);
    expect(ping.status).toBe(200);
    const id = ping.headers.get("x-request-id");
    expect(await ping.text()).toBe(`pong ${id}`);
    const later = await fetch(`${served.url}/v1/async`);
    expect(await later.text()).toBe("later");
    const missing = await fetch(`${served.url}/nope`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("x-request-id")).toBeTruthy();
  });

  it("answers 500 with the request id when the plain-HTTP handler throws", async () => {
    const res = await fetch(`${served.url}/v1/throws`);
    expect(res.status).toBe(500);
    const id = res.headers.get("x-request-id")!;
    expect(await res.text()).toContain(id);
    expect(served.lines.some((l) => l.msg === "http handler failed" && l.request_id === id)).toBe(
      true,
    );
  });

  it("passes REST calls made over h2c to the same handler", async () => {
    const session = http2.connect(served.url);
    try {
      const body = await new Promise<string>((resolve, reject) => {
        const stream = session.request({ ":method": "GET", ":path": "/v1/ping" });
        let text = "";
        stream.setEncoding("utf8");
        stream.on("data", (chunk: string) => (text += chunk));
        stream.on("end", () => resolve(text));
        stream.on("error", reject);
      });
      expect(body).toMatch(/^pong [0-9a-f-]{36}$/);
    } finally {
      session.close();
    }
  });
});

describe("error mapping", () => {
  const served = serveDuringSuite(
    { routes: (router) => router.service(health.Health, testHealthImpl()) },
    { close: { graceMs: 1000 } },
  );

  async function failure(call: Promise<unknown>): Promise<ConnectError> {
    try {
      await call;
    } catch (error) {
      return ConnectError.from(error);
    }
    throw new Error("call succeeded");
  }

  it("maps a TrellisError to its Connect code with an ErrorDetail (gRPC)", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    const error = await failure(client.check({ service: "boom" }));
    expect(error.code).toBe(Code.NotFound);
    expect(error.rawMessage).toBe('thing "t_1" was not found');
    const detail = errorDetailOf(error);
    expect(detail?.reason).toBe("resource_not_found");
    expect(detail?.metadata).toEqual({ object: "thing", id: "t_1" });
    expect(error.metadata.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("maps a TrellisError the same way over Connect/HTTP 1.1", async () => {
    const client = createClient(
      health.Health,
      createConnectTransport({ baseUrl: served.url, httpVersion: "1.1" }),
    );
    const error = await failure(client.check({ service: "boom" }));
    expect(error.code).toBe(Code.NotFound);
    expect(errorDetailOf(error)?.reason).toBe("resource_not_found");
    expect(error.metadata.get("x-request-id")).toBeTruthy();
  });

  it("sends a JSON error with the detail to plain HTTP clients", async () => {
    const res = await fetch(`${served.url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ service: "boom" }),
    });
    expect(res.status).toBe(404);
    expect(res.headers.get("x-request-id")).toBeTruthy();
    const body = (await res.json()) as { code: string; details: { type: string }[] };
    expect(body.code).toBe("not_found");
    expect(body.details[0]?.type).toBe("trellis.core.v1.ErrorDetail");
  });

  it("lets ConnectErrors through unchanged", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    const error = await failure(client.check({ service: "connect-error" }));
    expect(error.code).toBe(Code.PermissionDenied);
    expect(error.rawMessage).toBe("nope");
  });

  it("propagates a downstream service's error intact through an upstream handler", async () => {
    // The upstream handler calls this test server and lets its error escape, as a
    // service does when it forwards a call; the downstream response's own framing
    // headers must not leak into the upstream response.
    const downstream = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    const upstream = createService({
      name: "upstream",
      logger: served.logger,
      routes: (router) =>
        router.service(health.Health, {
          check: (req) => downstream.check(req),
          list: (req) => downstream.list(req),
          async *watch() {},
        }),
    });
    const { url: upstreamUrl } = await upstream.listen({ host: "127.0.0.1" });
    try {
      for (const transport of [
        createGrpcTransport({ baseUrl: upstreamUrl }),
        createConnectTransport({ baseUrl: upstreamUrl, httpVersion: "2" }),
        createConnectTransport({ baseUrl: upstreamUrl, httpVersion: "1.1" }),
      ]) {
        const error = await failure(
          createClient(health.Health, transport).check({ service: "boom" }),
        );
        expect(error.code).toBe(Code.NotFound);
        expect(errorDetailOf(error)?.reason).toBe("resource_not_found");
      }
    } finally {
      await upstream.close({ graceMs: 100 });
    }
  });

  it("hides unexpected errors behind Internal and logs the cause with the request id", async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: served.url }));
    const error = await failure(
      client.check({ service: "crash" }, { headers: { "x-request-id": "req-crash-1" } }),
    );
    expect(error.code).toBe(Code.Internal);
    expect(error.rawMessage).toBe("internal error (request id req-crash-1)");
    expect(error.message).not.toContain("secret-internals");
    // Typed like every other error, with nothing of the cause in it.
    expect(errorDetailOf(error)).toMatchObject({ reason: "internal_error", metadata: {} });
    const logged = served.lines.find((l) => l.msg === "rpc failed with an unexpected error");
    expect(logged).toMatchObject({
      level: "error",
      service: "svc",
      rpc: "grpc.health.v1.Health/Check",
      request_id: "req-crash-1",
      error: { name: "Error", message: "connection to db:5432 failed: secret-internals" },
    });
  });
});
