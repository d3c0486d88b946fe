/**
 * Issue 22, finding 9: failed authentication is throttled per source — 429
 * `rate_limited` with `Retry-After` over REST, ResourceExhausted over
 * Connect — in bounded memory.
 */

import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthThrottle, withAuthThrottle } from "../src/auth/auth-throttle.js";
import type { Authenticator } from "../src/auth/authenticator.js";
import { startGatewayWithTasks } from "./support/embedded.js";

describe("AuthThrottle", () => {
  it("blocks a source after maxFailures in a window, until the window ends", () => {
    let now = 0;
    const throttle = new AuthThrottle({
      maxFailures: 3,
      windowMs: 10_000,
      maxSources: 100,
      now: () => now,
    });
    for (let i = 0; i < 3; i++) {
      expect(throttle.retryAfterSeconds("a")).toBeUndefined();
      throttle.failed("a");
    }
    expect(throttle.retryAfterSeconds("a")).toBe(10);
    expect(throttle.retryAfterSeconds("b")).toBeUndefined();
    now = 7_500;
    expect(throttle.retryAfterSeconds("a")).toBe(3);
    now = 10_000;
    expect(throttle.retryAfterSeconds("a")).toBeUndefined();
  });

  it("tracks at most maxSources, forgetting the least recently failing", () => {
    const throttle = new AuthThrottle({ maxFailures: 1, windowMs: 60_000, maxSources: 100 });
    for (let i = 0; i < 10_000; i++) throttle.failed(`10.0.${i >> 8}.${i & 255}`);
    expect(throttle.size).toBe(100);
    expect(throttle.retryAfterSeconds("10.0.39.15")).toBeGreaterThan(0);
    expect(throttle.retryAfterSeconds("10.0.0.0")).toBeUndefined();
  });

  it("counts refused credentials only: not missing ones, not unreachable issuers, not re-checks", async () => {
    const results: Record<string, Awaited<ReturnType<Authenticator["authenticate"]>>> = {
      missing: { ok: false, failure: "missing" },
      unavailable: { ok: false, failure: "unavailable" },
      bad: { ok: false, failure: "invalid" },
    };
    const inner: Authenticator = { authenticate: async (h) => results[h ?? "missing"] as never };
    const throttle = new AuthThrottle({ maxFailures: 2, windowMs: 60_000, maxSources: 100 });
    const auth = withAuthThrottle(inner, throttle);
    for (let i = 0; i < 5; i++) {
      await auth.authenticate(undefined, "s");
      await auth.authenticate("unavailable", "s");
      await auth.authenticate("bad"); // no source: a re-check
    }
    expect(throttle.retryAfterSeconds("s")).toBeUndefined();
    await auth.authenticate("bad", "s");
    await auth.authenticate("bad", "s");
    expect(await auth.authenticate("bad", "s")).toMatchObject({ ok: false, failure: "throttled" });
  });
});

describe("failed authentication over the wire", () => {
  const ADMIN_KEY = "trellis-auth-throttle-admin-key-0123456789";
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY, { TRELLIS_AUTH_FAILURES_PER_SOURCE: "5" });
    api = harnClient(trellis.address.url, ADMIN_KEY);
  });

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("answers 401 five times, then 429 with Retry-After — on REST and Connect alike", async () => {
    for (let i = 0; i < 5; i++) {
      expect((await api.get("/v1/sessions", { key: `wrong-key-${i}` })).status).toBe(401);
    }
    const throttled = await api.get("/v1/sessions", { key: "wrong-key-again" });
    expect(throttled.status).toBe(429);
    expect(throttled.json.error.code).toBe("rate_limited");
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
    // Even a good key waits: the source is throttled, not the key.
    expect((await api.get("/v1/sessions")).status).toBe(429);

    const rpc = await fetch(`${trellis.address.url}/trellis.tasks.v1.SessionService/ListSessions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer nope" },
      body: "{}",
    });
    expect(rpc.status).toBe(429);
    expect(((await rpc.json()) as { code: string }).code).toBe("resource_exhausted");
  });

  it("throttles the OAuth token endpoint's client authentication from the same count", async () => {
    const res = await fetch(`${trellis.address.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials&client_id=cli_nobody&client_secret=nope",
    });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(((await res.json()) as { error: string }).error).toBe("temporarily_unavailable");
  });
});
