// A request in the REST pipeline without a server: a readable stream for the
// body, headers, and a call as the REST handler builds it.
import { Readable } from "node:stream";
import type { HttpRequest, HttpResponse } from "@trellis/runtime";
import type { RestCall, RoutePorts, RouteSpec } from "../../src/http/context.js";
import { jsonResponse } from "../../src/http/io.js";
import type { Exchange, Next, Outcome } from "../../src/http/pipeline/stage.js";

export interface FakeRequest {
  method?: string;
  url?: string;
  headers?: Record<string, string>;
  body?: string;
  params?: Record<string, string>;
}

export const anonymous = { actorId: "", workspaceId: "", scopes: [] };

export function route(overrides: Partial<RouteSpec> = {}): RouteSpec {
  return {
    method: "GET",
    path: "/v1/sessions/{session_id}",
    scope: "sessions:read",
    handle: async () => jsonResponse(200, { ok: true }),
    ...overrides,
  };
}

export function exchangeOf(spec: RouteSpec, request: FakeRequest = {}): Exchange {
  const req = Readable.from(
    request.body === undefined ? [] : [Buffer.from(request.body)],
  ) as unknown as HttpRequest;
  Object.assign(req, {
    method: request.method ?? spec.method,
    url: request.url ?? "/v1/sessions/ses_1",
    headers: request.headers ?? {},
    socket: { remoteAddress: "127.0.0.1" },
  });
  const url = new URL(request.url ?? "/v1/sessions/ses_1", "http://gateway.invalid");
  const call: RestCall = {
    req,
    res: {} as HttpResponse,
    requestId: "req_1",
    params: request.params ?? {},
    query: url.searchParams,
    caller: anonymous,
    body: undefined,
    idempotencyKey: "",
    options: () => ({}),
    ports: {} as RoutePorts,
  };
  return { route: spec, url, call, handedOn: false };
}

/** The rest of the pipeline, recording what reached it. */
export function recorder(outcome: Outcome = jsonResponse(200, { reached: true })) {
  const reached: Exchange[] = [];
  const next: Next = async (exchange) => {
    reached.push(exchange);
    return outcome;
  };
  return { next, reached };
}

/** The parsed error envelope of a refusal. */
export function errorOf(outcome: Outcome): {
  status: number;
  code: string;
  body: Record<string, unknown>;
} {
  if (outcome === undefined) throw new Error("no response");
  const body = JSON.parse(String(outcome.body)) as { error: Record<string, unknown> };
  return { status: outcome.status, code: String(body.error.code), body: body.error };
}
