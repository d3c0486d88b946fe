// The REST surface against hostile bodies, paths, queries and origins: every
// refusal is a 4xx with the Harn error envelope, and CORS answers only the
// origins it is configured with. The gateway's real REST handler on a real
// server; the routes behind it echo what they were given.
import { createLogger, createService, type TrellisService } from "@trellis/runtime";
import { sendHttp1 } from "@trellis/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Authenticator } from "../src/auth/authenticator.js";
import { loadGatewayConfig } from "../src/config.js";
import type { GatewayDeps, RouteSpec } from "../src/http/context.js";
import { loadCorsPolicy } from "../src/http/cors.js";
import { jsonResponse } from "../src/http/io.js";
import { createRestHandler } from "../src/http/rest-handler.js";

const VERSION = "agents-protocol-2026-04-25";
const env = {
  TRELLIS_MAX_BODY_BYTES: "4096",
  TRELLIS_MAX_NESTING_DEPTH: "40",
  TRELLIS_CORS_ORIGINS: "https://app.example.com",
};

// Every key works and may do everything: this suite is about input, not auth.
const authenticator: Authenticator = {
  async authenticate(authorization) {
    if (!authorization) return { ok: false, failure: "missing" };
    return {
      ok: true,
      caller: { actorId: "key_1", workspaceId: "default", scopes: ["*"] },
      credential: { kind: "api_key", keyId: "key_1" },
    };
  },
};

const echo = async (call: Parameters<RouteSpec["handle"]>[0]) =>
  jsonResponse(200, { params: call.params, body: call.body ?? null });

const routes: RouteSpec[] = [
  { method: "POST", path: "/v1/sessions", scope: "sessions:write", handle: echo },
  { method: "GET", path: "/v1/sessions/{session_id}", scope: "sessions:read", handle: echo },
];

describe("REST: hostile input", () => {
  let service: TrellisService;
  let url: string;

  beforeAll(async () => {
    const deps = {
      authenticator,
      config: loadGatewayConfig(env),
      logger: createLogger({ service: "gateway", level: "error" }),
      closing: new AbortController().signal,
      startedAt: new Date(),
      mode: "embedded",
      env,
    } as unknown as GatewayDeps;
    service = createService({ name: "gateway", env, http: createRestHandler(deps, routes) });
    ({ url } = await service.listen({ host: "127.0.0.1", port: 0 }));
  });

  afterAll(() => service?.close({ graceMs: 200 }));

  const headers = {
    authorization: "Bearer k",
    "harn-agents-protocol-version": VERSION,
    "content-type": "application/json",
  };

  async function post(body: string | Uint8Array, extra: Record<string, string> = {}) {
    return sendHttp1(url, {
      method: "POST",
      path: "/v1/sessions",
      headers: { ...headers, ...extra },
      body: typeof body === "string" ? Buffer.from(body) : body,
    });
  }

  function envelopeOf(res: { status: number; body: Buffer }) {
    const json = JSON.parse(res.body.toString("utf8")) as { error: Record<string, unknown> };
    expect(json.error).toMatchObject({
      code: expect.any(String),
      message: expect.any(String),
      type: expect.any(String),
      request_id: expect.any(String),
    });
    return json.error;
  }

  it("accepts a well-formed body (the baseline the refusals differ from)", async () => {
    const res = await post('{"workspace_id":"default","metadata":{"a":[1,{"b":null}]}}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString()).body).toEqual({
      workspace_id: "default",
      metadata: { a: [1, { b: null }] },
    });
  });

  it.each([
    ["malformed JSON", "{bad", undefined],
    ["a JSON document with trailing garbage", '{"a":1}x', undefined],
  ])("refuses %s with 400 invalid_request", async (_name, body) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(envelopeOf(res)).toMatchObject({ code: "invalid_request", type: "request_error" });
  });

  it("refuses a body that is not UTF-8", async () => {
    const res = await post(
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    );
    expect(res.status).toBe(400);
    expect(envelopeOf(res).message).toMatch(/not valid UTF-8/);
  });

  it.each(["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"])(
    "refuses content type %s with 400 naming the header",
    async (type) => {
      const res = await post("{}", { "content-type": type });
      expect(res.status).toBe(400);
      expect(envelopeOf(res)).toMatchObject({ code: "invalid_request", param: "content-type" });
    },
  );

  it("accepts application/*+json and no content type at all", async () => {
    expect((await post("{}", { "content-type": "application/merge-patch+json" })).status).toBe(200);
    const { "content-type": _, ...without } = headers;
    const res = await sendHttp1(url, {
      method: "POST",
      path: "/v1/sessions",
      headers: without,
      body: Buffer.from("{}"),
    });
    expect(res.status).toBe(200);
  });

  it("refuses a body above the limit with 413 payload_too_large", async () => {
    const res = await post(`{"a":"${"x".repeat(5000)}"}`);
    expect(res.status).toBe(413);
    expect(envelopeOf(res)).toMatchObject({
      code: "payload_too_large",
      details: { metadata: { limit_bytes: "4096" } },
    });
  });

  it("refuses nesting past the limit (derived from TRELLIS_MAX_NESTING_DEPTH) and accepts it below", async () => {
    // 40 message levels leave (40 - 8) / 2 = 16 JSON levels.
    const deep = `{"m":${"[".repeat(16)}${"]".repeat(16)}}`;
    const res = await post(deep);
    expect(res.status).toBe(400);
    expect(envelopeOf(res)).toMatchObject({ details: { metadata: { limit_depth: "16" } } });
    expect((await post(`{"m":${"[".repeat(14)}${"]".repeat(14)}}`)).status).toBe(200);
    const hostile = await post("[".repeat(1500) + "]".repeat(1500));
    expect(hostile.status).toBe(400);
  });

  it("refuses NUL anywhere in a body (no store keeps it)", async () => {
    for (const body of ['{"name":"a\\u0000b"}', '{"meta":{"k\\u0000":1}}']) {
      const res = await post(body);
      expect(res.status).toBe(400);
      expect(envelopeOf(res).message).toMatch(/NUL/);
    }
  });

  it("refuses control characters in path parameters and query values, naming them", async () => {
    const get = (path: string) =>
      sendHttp1(url, {
        method: "GET",
        path,
        headers: { authorization: "Bearer k", "harn-agents-protocol-version": VERSION },
      });
    const nul = await get("/v1/sessions/a%00b");
    expect(nul.status).toBe(400);
    expect(envelopeOf(nul)).toMatchObject({ code: "invalid_request", param: "session_id" });
    const query = await get("/v1/sessions/ses_1?cursor=%0a");
    expect(query.status).toBe(400);
    expect(envelopeOf(query)).toMatchObject({ param: "cursor" });
    // Bad percent-encoding never matches a route: 404, with the envelope.
    const bad = await get("/v1/sessions/%ZZ");
    expect(bad.status).toBe(404);
    envelopeOf(bad);
    expect((await get("/v1/sessions/ses_%F0%9F%A6%9C")).status).toBe(200);
  });

  describe("CORS", () => {
    const origin = "https://app.example.com";

    it("sends no CORS headers by default (no origin configured)", () => {
      expect(loadCorsPolicy({}).allowOrigin(origin)).toBeUndefined();
      expect(loadCorsPolicy({ TRELLIS_CORS_ORIGINS: "*" }).allowOrigin("https://x.test")).toBe("*");
      expect(() => loadCorsPolicy({ TRELLIS_CORS_ORIGINS: "app.example.com" })).toThrow(
        /not an origin/,
      );
    });

    it("answers a configured origin's requests with its origin, and others with nothing", async () => {
      const mine = await post("{}", { origin });
      expect(mine.headers["access-control-allow-origin"]).toBe(origin);
      expect(mine.headers["access-control-expose-headers"]).toContain("x-request-id");
      expect(mine.headers.vary).toContain("Origin");
      const theirs = await post("{}", { origin: "https://evil.example" });
      expect(theirs.status).toBe(200);
      expect(theirs.headers["access-control-allow-origin"]).toBeUndefined();
    });

    it("answers an allowed preflight with 204 and the route's methods", async () => {
      const res = await sendHttp1(url, {
        method: "OPTIONS",
        path: "/v1/sessions",
        headers: {
          origin,
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization",
        },
      });
      expect(res.status).toBe(204);
      expect(res.headers["access-control-allow-origin"]).toBe(origin);
      expect(res.headers["access-control-allow-methods"]).toBe("POST, OPTIONS");
      expect(res.headers["access-control-allow-headers"]).toContain("idempotency-key");
    });

    it("refuses a preflight from an unlisted origin, or for no route, with the envelope", async () => {
      const preflight = (path: string, from: string) =>
        sendHttp1(url, {
          method: "OPTIONS",
          path,
          headers: { origin: from, "access-control-request-method": "GET" },
        });
      const denied = await preflight("/v1/sessions", "https://evil.example");
      expect(denied.status).toBe(403);
      expect(denied.headers["access-control-allow-origin"]).toBeUndefined();
      expect(envelopeOf(denied)).toMatchObject({ code: "permission_denied", param: "Origin" });
      const nowhere = await preflight("/v1/nothing", origin);
      expect(nowhere.status).toBe(404);
      envelopeOf(nowhere);
    });
  });
});
