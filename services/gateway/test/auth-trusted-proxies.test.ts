/**
 * Issue 22 leftover: behind a proxy the auth-failure throttle counted the
 * proxy. `TRELLIS_TRUSTED_PROXIES` (opt-in) makes the source the
 * X-Forwarded-For client when — and only when — the peer is a trusted proxy.
 */

import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clientSourceFromEnv,
  clientSourceOf,
  normalizeAddress,
  parseTrustedProxies,
  peerSource,
} from "../src/auth/client-source.js";
import { startGatewayWithTasks } from "./support/embedded.js";

describe("client source rule", () => {
  const source = clientSourceOf(parseTrustedProxies("10.0.0.0/8, 127.0.0.1, fd00::/8"));

  it("is the peer without trusted proxies, whatever the header says", () => {
    expect(peerSource("203.0.113.9", "198.51.100.1")).toBe("203.0.113.9");
    expect(clientSourceFromEnv({})("203.0.113.9", "198.51.100.1")).toBe("203.0.113.9");
    expect(clientSourceFromEnv({ TRELLIS_TRUSTED_PROXIES: " " })("::1", "1.2.3.4")).toBe("::1");
  });

  it("ignores X-Forwarded-For from a peer that is not trusted", () => {
    expect(source("203.0.113.9", "198.51.100.1")).toBe("203.0.113.9");
    expect(source("11.0.0.1", "198.51.100.1")).toBe("11.0.0.1");
    expect(source("fe80::1", "198.51.100.1")).toBe("fe80::1");
  });

  it("takes the rightmost untrusted hop when the peer is trusted", () => {
    expect(source("10.1.2.3", "198.51.100.1")).toBe("198.51.100.1");
    // The client wrote a fake first entry; the proxy appended the real one.
    expect(source("10.1.2.3", "1.1.1.1, 198.51.100.1")).toBe("198.51.100.1");
    // Two trusted proxies in a row are skipped.
    expect(source("10.1.2.3", "198.51.100.1, 10.9.9.9")).toBe("198.51.100.1");
    // Several header lines are one list.
    expect(source("10.1.2.3", ["1.1.1.1", "198.51.100.7, 10.0.0.2"])).toBe("198.51.100.7");
    // Ports and brackets as some proxies write them; IPv6 clients.
    expect(source("10.1.2.3", "198.51.100.1:4711")).toBe("198.51.100.1");
    expect(source("10.1.2.3", "[2001:db8::5]:443")).toBe("2001:db8::5");
    expect(source("fd00::7", "2001:DB8::5")).toBe("2001:db8::5");
  });

  it("recognises an IPv4 peer in IPv6-mapped form", () => {
    expect(source("::ffff:10.1.2.3", "198.51.100.1")).toBe("198.51.100.1");
    expect(source("::ffff:127.0.0.1", "198.51.100.1")).toBe("198.51.100.1");
    expect(source("::ffff:203.0.113.9", "198.51.100.1")).toBe("::ffff:203.0.113.9");
  });

  it("falls back to the peer on a missing or malformed header", () => {
    expect(source("10.1.2.3", undefined)).toBe("10.1.2.3");
    expect(source("10.1.2.3", null)).toBe("10.1.2.3");
    expect(source("10.1.2.3", "")).toBe("10.1.2.3");
    expect(source("10.1.2.3", "unknown")).toBe("10.1.2.3");
    expect(source("10.1.2.3", "198.51.100.1, not-an-ip")).toBe("10.1.2.3");
    // Only trusted hops: the leftmost.
    expect(source("10.1.2.3", "10.4.4.4, 10.5.5.5")).toBe("10.4.4.4");
  });

  it("refuses a setting that is not addresses or CIDRs, naming the entry", () => {
    expect(() => parseTrustedProxies("10.0.0.0/33")).toThrow(/"10.0.0.0\/33"/);
    expect(() => parseTrustedProxies("10.0.0.0/8, proxy.internal")).toThrow(/proxy\.internal/);
    expect(() => parseTrustedProxies("fd00::/129")).toThrow(/TRELLIS_TRUSTED_PROXIES/);
    expect(() => parseTrustedProxies("10.0.0.0/x")).toThrow(/10.0.0.0\/x/);
    expect(parseTrustedProxies("")).toBeUndefined();
  });

  it("normalizes address spellings", () => {
    expect(normalizeAddress("[::1]")).toBe("::1");
    expect(normalizeAddress("fe80::1%eth0")).toBe("fe80::1");
    expect(normalizeAddress("::FFFF:1.2.3.4")).toBe("1.2.3.4");
    expect(normalizeAddress("1.2.3")).toBeUndefined();
  });
});

/** A gateway whose throttle allows 3 failures per source, with `env` added. */
async function gateway(env: Record<string, string>): Promise<EmbeddedTrellis> {
  return startGatewayWithTasks(ADMIN_KEY, { TRELLIS_AUTH_FAILURES_PER_SOURCE: "3", ...env });
}
const ADMIN_KEY = "trellis-trusted-proxies-admin-key-0123456789";

async function failFrom(api: ReturnType<typeof harnClient>, client: string): Promise<number> {
  const res = await api.get("/v1/sessions", {
    key: "wrong-key",
    headers: { "x-forwarded-for": client },
  });
  return res.status;
}

async function connectFrom(url: string, client: string): Promise<number> {
  const res = await fetch(`${url}/trellis.tasks.v1.SessionService/ListSessions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: "Bearer nope",
      "x-forwarded-for": client,
    },
    body: "{}",
  });
  await res.arrayBuffer();
  return res.status;
}

describe("throttle behind a trusted proxy (the test client is the proxy, on loopback)", () => {
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await gateway({ TRELLIS_TRUSTED_PROXIES: "127.0.0.1/32,::1/128" });
    api = harnClient(trellis.address.url, ADMIN_KEY);
  }, 240_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("counts each forwarded client on its own, over REST and Connect", async () => {
    for (let i = 0; i < 3; i++) expect(await failFrom(api, "198.51.100.1")).toBe(401);
    expect(await failFrom(api, "198.51.100.1")).toBe(429);
    expect(await connectFrom(trellis.address.url, "198.51.100.1")).toBe(429);
    // Another client behind the same proxy is not blocked by the first.
    expect(await failFrom(api, "198.51.100.2")).toBe(401);
    expect(await connectFrom(trellis.address.url, "198.51.100.2")).toBe(401);
    const good = await api.get("/v1/sessions", { headers: { "x-forwarded-for": "198.51.100.3" } });
    expect(good.status).toBe(200);
    // A client cannot escape by writing its own first entry: the proxy's appended one counts.
    expect(await failFrom(api, "192.0.2.77, 198.51.100.1")).toBe(429);
  });

  it("counts the OAuth token endpoint against the forwarded client", async () => {
    const token = (client: string) =>
      fetch(`${trellis.address.url}/oauth/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-forwarded-for": client,
        },
        body: "grant_type=client_credentials&client_id=cli_nobody&client_secret=nope",
      });
    expect((await token("198.51.100.1")).status).toBe(429);
    expect((await token("198.51.100.9")).status).toBe(401);
  });
});

describe("throttle with no trusted proxies (the default)", () => {
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await gateway({});
    api = harnClient(trellis.address.url, ADMIN_KEY);
  }, 240_000);
  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  it("counts the peer, so a forged X-Forwarded-For changes nothing", async () => {
    for (let i = 0; i < 3; i++) expect(await failFrom(api, `198.51.100.${i + 1}`)).toBe(401);
    expect(await failFrom(api, "198.51.100.50")).toBe(429);
    expect(await connectFrom(trellis.address.url, "198.51.100.51")).toBe(429);
  });
});
