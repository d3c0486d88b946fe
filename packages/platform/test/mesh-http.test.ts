// The service-credential guard of internal modules' plain-HTTP handlers.
import type { HttpHandler } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { MeshCredentials, meshHeader, meshHttpTarget } from "../src/mesh.js";
import { meshGuardedHttp } from "../src/mesh-http.js";

type GuardRequest = Parameters<HttpHandler>[0];
type GuardResponse = Parameters<HttpHandler>[1];

function request(headers: Record<string, string> = {}): GuardRequest {
  return { method: "GET", url: "/v1/things", headers } as unknown as GuardRequest;
}

function response() {
  const sent = { status: 0, headers: new Map<string, string>(), body: "" };
  const res = {
    set statusCode(value: number) {
      sent.status = value;
    },
    setHeader(name: string, value: string) {
      sent.headers.set(name, value);
    },
    end(body: string) {
      sent.body = body;
    },
  } as unknown as GuardResponse;
  return { res, sent };
}

const mesh = MeshCredentials.generate();
const served: HttpHandler = () => true;

describe("meshGuardedHttp", () => {
  it("passes a request signed for its method and path to the handler", async () => {
    const token = mesh.sign("gateway", meshHttpTarget("GET", "/v1/things"), undefined);
    const { res, sent } = response();
    expect(await meshGuardedHttp(served, mesh)(request({ [meshHeader]: token }), res)).toBe(true);
    expect(sent.status).toBe(0);
  });

  it("refuses an unsigned request with 401 and the error envelope", async () => {
    const { res, sent } = response();
    expect(await meshGuardedHttp(served, mesh)(request(), res)).toBe(true);
    expect(sent.status).toBe(401);
    expect(sent.headers.get("content-length")).toBe(String(Buffer.byteLength(sent.body)));
    expect(JSON.parse(sent.body)).toEqual({
      error: {
        code: "unauthenticated",
        message: expect.any(String),
        type: "auth_error",
        param: null,
        request_id: null,
        details: { credential: "service", problem: "missing" },
      },
    });
  });

  it("declines an unsigned request when asked (not for this module) but refuses a bad one", async () => {
    const guard = meshGuardedHttp(served, mesh, { declineUnsigned: true, reportRequestId: false });
    const unsigned = response();
    expect(await guard(request(), unsigned.res)).toBe(false);
    expect(unsigned.sent.status).toBe(0);
    const forged = response();
    const other = MeshCredentials.generate().sign(
      "gateway",
      meshHttpTarget("GET", "/v1/things"),
      undefined,
    );
    expect(await guard(request({ [meshHeader]: other }), forged.res)).toBe(true);
    expect(forged.sent.status).toBe(401);
    expect(JSON.parse(forged.sent.body).error.details.problem).toBe("bad_signature");
  });
});
