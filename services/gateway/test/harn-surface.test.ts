// The protocol surface table: every operation no route serves gets a 501
// route, and a real route always takes its place.
import { describe, expect, it } from "vitest";
import type { RouteSpec } from "../src/http/context.js";
import { harnOperations, notServedRoutes } from "../src/http/harn-surface.js";
import { Router } from "../src/http/router.js";
import { restRoutes } from "../src/http/routes/index.js";

const served = (method: RouteSpec["method"], path: string): RouteSpec => ({
  method,
  path,
  scope: "tasks:read",
  handle: async () => undefined,
});

describe("Harn surface fallback", () => {
  it("lists each operation once, as METHOD /v1…", () => {
    expect(new Set(harnOperations).size).toBe(harnOperations.length);
    for (const op of harnOperations) expect(op).toMatch(/^(GET|POST|PATCH|PUT|DELETE) \/v1/);
  });

  it("adds a 501 route exactly for the operations no route serves", () => {
    const routes = [served("GET", "/v1/connectors")];
    const fallback = notServedRoutes(routes).map((r) => `${r.method} ${r.path}`);
    expect(fallback).not.toContain("GET /v1/connectors");
    expect(fallback).toContain("GET /v1/connectors/{connector_id}");
    expect(fallback).toHaveLength(harnOperations.length - 1);
    const router = new Router([...routes, ...notServedRoutes(routes)]);
    const match = router.match("GET", "/v1/connectors");
    expect(match.kind === "found" && match.route.notServed).toBeFalsy();
  });

  it("keeps methods answered only with 501 out of Allow", () => {
    const router = new Router([...restRoutes, ...notServedRoutes(restRoutes)]);
    const patch = router.match("PATCH", "/v1/sessions/ses_1");
    const served = restRoutes.some(
      (r) => r.method === "PATCH" && r.path === "/v1/sessions/{session_id}",
    );
    if (!served) expect(patch.kind === "found" && patch.route.notServed).toBe(true);
    const wrong = router.match("DELETE", "/v1/sessions/ses_1");
    expect(wrong.kind).toBe("method_not_allowed");
    if (wrong.kind === "method_not_allowed" && !served) expect(wrong.allow).not.toContain("PATCH");
  });
});
