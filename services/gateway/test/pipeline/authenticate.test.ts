import { describe, expect, it } from "vitest";
import type { AuthResult } from "../../src/auth/authenticator.js";
import { authenticateStage } from "../../src/http/pipeline/authenticate.js";
import { anonymous, errorOf, exchangeOf, recorder, route } from "./support.js";

const caller = { actorId: "key_1", workspaceId: "default", scopes: ["sessions:read"] };

/** An authenticator that knows one bearer token, recording what it was asked. */
function authenticator(result?: AuthResult) {
  const asked: { authorization: string | null | undefined; source: string | undefined }[] = [];
  return {
    asked,
    async authenticate(authorization: string | null | undefined, source?: string) {
      asked.push({ authorization, source });
      if (result) return result;
      return authorization === "Bearer good"
        ? ({ ok: true, caller, credential: { kind: "api_key", keyId: "key_1" } } as const)
        : ({ ok: false, failure: authorization ? "invalid" : "missing" } as const);
    },
  };
}

describe("stage authenticate", () => {
  it("makes the credential's caller the call's caller", async () => {
    const auth = authenticator();
    const { next, reached } = recorder();
    const exchange = exchangeOf(route(), { headers: { authorization: "Bearer good" } });
    await authenticateStage(auth)(next)(exchange);
    expect(reached).toHaveLength(1);
    expect(exchange.call.caller).toEqual(caller);
    expect(auth.asked).toEqual([{ authorization: "Bearer good", source: "127.0.0.1" }]);
  });

  it("answers 401 with a challenge without or with a bad credential", async () => {
    const { next, reached } = recorder();
    const cases: Record<string, string>[] = [{}, { authorization: "Bearer bad" }];
    for (const headers of cases) {
      const exchange = exchangeOf(route(), { headers });
      const refusal = await authenticateStage(authenticator())(next)(exchange);
      expect(errorOf(refusal)).toMatchObject({ status: 401, code: "unauthenticated" });
      expect(refusal?.headers["www-authenticate"]).toMatch(/^Bearer /);
      expect(exchange.call.caller).toBe(anonymous);
    }
    expect(reached).toHaveLength(0);
  });

  it("answers 429 when attempts are throttled and 503 when it cannot check", async () => {
    const { next } = recorder();
    const throttled = await authenticateStage(
      authenticator({ ok: false, failure: "throttled", retryAfterSeconds: 7 }),
    )(next)(exchangeOf(route()));
    expect(errorOf(throttled).status).toBe(429);
    expect(throttled?.headers["retry-after"]).toBe("7");
    const unavailable = await authenticateStage(
      authenticator({ ok: false, failure: "unavailable" }),
    )(next)(exchangeOf(route()));
    expect(errorOf(unavailable).status).toBe(503);
  });

  it("asks nothing on a public route", async () => {
    const auth = authenticator();
    const { next, reached } = recorder();
    await authenticateStage(auth)(next)(exchangeOf(route({ scope: "public" })));
    expect(reached).toHaveLength(1);
    expect(auth.asked).toEqual([]);
  });
});
