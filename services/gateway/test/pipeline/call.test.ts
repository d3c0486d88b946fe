import type { CallOptions } from "@connectrpc/connect";
import { setCallerHeaders } from "@trellis/platform";
import { type HttpRequest, type HttpResponse, requestIdHeader } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  anonymousCaller,
  createRestCall,
  outgoingCallOptions,
  type RestCallInit,
} from "../../src/http/call.js";
import type { RoutePorts } from "../../src/http/context.js";

const caller = { actorId: "key_1", workspaceId: "default", scopes: ["sessions:read"] };
const ports = { config: { TRELLIS_UPSTREAM_TIMEOUT: 1_234 } } as RoutePorts;
const req = {
  headers: {
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    baggage: "a=1",
  },
} as unknown as HttpRequest;

function callOf(extra: Partial<RestCallInit> = {}) {
  return createRestCall({
    req,
    res: {} as HttpResponse,
    requestId: "req_1",
    params: {},
    ports,
    ...extra,
  });
}

function headersOf(options: CallOptions): Headers {
  return new Headers(options.headers);
}

describe("createRestCall", () => {
  it("fills in what a transport leaves out", () => {
    const call = callOf();
    expect(call.caller).toBe(anonymousCaller);
    expect(call.idempotencyKey).toBe("");
    expect(call.body).toBeUndefined();
    expect([...call.query]).toEqual([]);
  });

  it("makes options with the caller the stages set, the request id and the timeout", () => {
    const call = callOf();
    const before = headersOf(call.options());
    expect(before.get(requestIdHeader)).toBe("req_1");
    const expected = new Headers();
    setCallerHeaders(expected, caller);
    const [name] = [...expected.keys()];
    expect(name).toBeDefined();
    expect(before.has(name ?? "")).toBe(false);

    call.caller = caller; // what the authenticate stage does
    const options = call.options();
    expect(headersOf(options).get(name ?? "")).toBe(expected.get(name ?? ""));
    expect(options.timeoutMs).toBe(1_234);
    expect(call.options({ streaming: true }).timeoutMs).toBe(0);
    expect(options.signal).toBeUndefined();
  });

  it("hands on the client's trace only when asked, and the transport's signal", () => {
    const abort = new AbortController();
    const plain = callOf({ requestId: "r" });
    expect(headersOf(plain.options()).has("traceparent")).toBe(false);
    const traced = callOf({ requestId: "r", forwardTrace: true, signal: abort.signal });
    const headers = headersOf(traced.options());
    expect(headers.get("traceparent")).toBe(req.headers.traceparent);
    expect(headers.get("baggage")).toBe("a=1");
    expect(headers.has("tracestate")).toBe(false);
    expect(traced.options().signal).toBe(abort.signal);
  });

  it("outgoingCallOptions sets no caller headers for the anonymous caller", () => {
    const anonymous = headersOf(
      outgoingCallOptions({ caller: anonymousCaller, requestId: "r", upstreamTimeoutMs: 5 }),
    );
    expect([...anonymous.keys()]).toEqual([requestIdHeader]);
  });
});
