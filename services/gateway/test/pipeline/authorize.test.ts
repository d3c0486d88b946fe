import { describe, expect, it } from "vitest";
import { authorizeStage } from "../../src/http/pipeline/authorize.js";
import { errorOf, exchangeOf, recorder, route } from "./support.js";

function asCaller(scopes: string[], scope: Parameters<typeof route>[0] = {}) {
  const exchange = exchangeOf(route(scope));
  exchange.call.caller = { actorId: "key_1", workspaceId: "default", scopes };
  return exchange;
}

describe("stage authorize", () => {
  it("passes a caller that holds the route's scope (or its wildcard)", async () => {
    const { next, reached } = recorder();
    await authorizeStage(next)(asCaller(["sessions:read"]));
    await authorizeStage(next)(asCaller(["sessions:*"]));
    await authorizeStage(next)(asCaller(["*"], { scope: "admin" }));
    expect(reached).toHaveLength(3);
  });

  it("answers 403 naming the missing scope, with an insufficient_scope challenge", async () => {
    const { next, reached } = recorder();
    const refusal = await authorizeStage(next)(asCaller(["tasks:read"]));
    expect(errorOf(refusal)).toMatchObject({ status: 403, code: "permission_denied" });
    expect(errorOf(refusal).body.details).toEqual({ required_scope: "sessions:read" });
    expect(refusal?.headers["www-authenticate"]).toContain('scope="sessions:read"');
    expect(reached).toHaveLength(0);
  });

  it("answers 403 without a challenge when only the admin key would do", async () => {
    const { next } = recorder();
    const refusal = await authorizeStage(next)(asCaller(["sessions:*"], { scope: "admin" }));
    expect(errorOf(refusal).body.details).toEqual({ required_scope: "*" });
    expect(refusal?.headers["www-authenticate"]).toBeUndefined();
  });

  it("lets any credential reach an operation not served, and anyone a public route", async () => {
    const { next, reached } = recorder();
    await authorizeStage(next)(asCaller([], { scope: "authenticated", notServed: true }));
    await authorizeStage(next)(asCaller([], { scope: "public" }));
    expect(reached).toHaveLength(2);
  });
});
