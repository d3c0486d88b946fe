// The A2A backend's outbound check (issue 22 leftover): the host injects the
// platform's address policy; the address is checked at connect time on the
// address actually connected to, every loopback spelling is refused, and
// redirects are re-checked (the bearer credential stays on its origin).
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ExecutionRequest } from "@trellis/adapter-sdk";
import { chatToMessage } from "@trellis/messages";
import { outboundAddressRefusal } from "@trellis/platform";
import { TrellisError } from "@trellis/runtime";
import { type A2aTestAgent, startA2aTestAgent } from "@trellis/testkit/a2a-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createA2aAdapter } from "../src/a2a/a2a-adapter.js";
import { builtinRefusal, guardedFetch } from "../src/a2a/outbound.js";
import { pinnedFetch } from "../src/a2a/pinned-fetch.js";

const strict = { allowPrivate: false, refusal: outboundAddressRefusal };
// The test servers listen on 127.0.0.1: that one literal is let through, every
// other address is judged by the platform's policy.
const only127 = {
  allowPrivate: false,
  refusal: (a: string) => (a === "127.0.0.1" ? undefined : outboundAddressRefusal(a)),
};

async function refusal(promise: Promise<unknown>): Promise<TrellisError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  const cause =
    error instanceof TypeError && error.cause instanceof TrellisError ? error.cause : error;
  expect(cause).toBeInstanceOf(TrellisError);
  expect((cause as TrellisError).reason).toBe("permission_denied");
  return cause as TrellisError;
}

describe("A2A outbound address check", () => {
  let server: Server;
  let port = 0;
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url ?? "", headers: req.headers });
      const to = new URL(req.url ?? "/", "http://x").searchParams.get("to");
      if (to !== null) {
        res.writeHead(302, { location: to }).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it("refuses every loopback, mapped, NAT64 and 6to4 spelling before connecting", async () => {
    const spellings = [
      "http://127.0.0.1",
      "http://127.1",
      "http://0x7f.0.0.1",
      "http://2130706433",
      "http://[::1]",
      "http://[::ffff:127.0.0.1]",
      "http://[::ffff:7f00:1]",
      "http://[::127.0.0.1]",
      "http://[::ffff:0:7f00:1]",
      "http://[64:ff9b::7f00:1]",
      "http://[2002:7f00:1::]",
      "http://[0:0:0:0:0:0:0:1]",
      "http://169.254.169.254",
      "http://[fd00:ec2::254]",
      "http://0.0.0.0",
    ];
    const before = seen.length;
    for (const base of spellings) {
      const fetchImpl = guardedFetch(strict);
      const error = await refusal(fetchImpl(`${base}:${port}/card`));
      expect(error.message).toMatch(/TRELLIS_A2A_ALLOW_PRIVATE/);
    }
    expect(seen.length).toBe(before);
  });

  it("checks a host name inside the connection's lookup (localhost never reaches the socket)", async () => {
    const before = seen.length;
    const error = await refusal(pinnedFetch(strict)(`http://localhost:${port}/card`));
    expect(error.message).toMatch(/localhost/);
    expect(seen.length).toBe(before);
  });

  it("connects to an allowed address, sending the credential to its origin", async () => {
    const res = await pinnedFetch({ ...only127, token: "t0k" })(`http://127.0.0.1:${port}/card`, {
      method: "POST",
      body: '{"a":1}',
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(seen.at(-1)?.headers.authorization).toBe("Bearer t0k");
  });

  it("re-checks every redirect target: loopback spellings are refused, allowed ones followed", async () => {
    const fetchImpl = pinnedFetch({ ...only127, token: "t0k" });
    for (const target of [
      `http://[::1]:${port}/x`,
      `http://[::ffff:127.0.0.1]:${port}/x`,
      `http://[::ffff:7f00:1]:${port}/x`,
      "http://169.254.169.254/latest/meta-data/",
    ]) {
      const before = seen.length;
      await refusal(fetchImpl(`http://127.0.0.1:${port}/r?to=${encodeURIComponent(target)}`));
      expect(seen.length).toBe(before + 1); // the redirecting hop only
    }
    const followed = await fetchImpl(
      `http://127.0.0.1:${port}/r?to=${encodeURIComponent(`http://127.0.0.1:${port}/final`)}`,
    );
    expect(followed.status).toBe(200);
    expect(seen.at(-1)?.url).toBe("/final");
    expect(seen.at(-1)?.headers.authorization).toBe("Bearer t0k");
    await refusal(
      fetchImpl(`http://127.0.0.1:${port}/r?to=${encodeURIComponent("ftp://127.0.0.1/")}`),
    );
  });

  it("keeps a fallback check when no policy is injected", () => {
    for (const a of ["127.0.0.1", "::1", "::ffff:10.0.0.1", "[fe80::1%eth0]", "169.254.169.254"]) {
      expect(builtinRefusal(a)).toBeDefined();
    }
    expect(builtinRefusal("93.184.216.34")).toBeUndefined();
  });
});

describe("A2A backend with the injected policy", () => {
  let agent: A2aTestAgent;
  beforeAll(async () => {
    agent = await startA2aTestAgent({ token: "tok" });
  });
  afterAll(async () => {
    await agent?.close();
  });

  const request = (cardUrl: string): ExecutionRequest => ({
    taskId: `task_${Math.random().toString(36).slice(2)}`,
    sessionId: "ses_a2a_outbound",
    workspaceId: "default",
    agent: {
      id: "agent_remote",
      backend: "a2a",
      definition: { card_url: cardUrl, credential: "v/t" },
      tools: [],
    },
    history: [],
    input: chatToMessage({ role: "user", content: "hello" }),
    signal: new AbortController().signal,
    onEvent: () => undefined,
  });

  it("uses the host's check, not its own list", async () => {
    const adapter = createA2aAdapter({ addressRefusal: () => "refused by the host policy" });
    const result = await adapter.execute(
      request("http://93.184.216.34/.well-known/agent-card.json"),
    );
    expect(result.status).toBe("failed");
    if (result.status === "failed") {
      expect(result.category).toBe("permission_denied");
      expect(result.message).toMatch(/refused by the host policy/);
    }
  });

  it("runs a turn through the pinned connection when the host allows the address", async () => {
    const adapter = createA2aAdapter({
      addressRefusal: only127.refusal,
      vaults: async () => new Map([["v", { allowed: true, secrets: new Map([["t", "tok"]]) }]]),
    });
    const result = await adapter.execute(request(agent.cardUrl));
    expect(result.status, JSON.stringify(result)).toBe("completed");
    const mapped = agent.cardUrl.replace("127.0.0.1", "[::ffff:127.0.0.1]");
    const refused = await adapter.execute(request(mapped));
    expect(refused.status).toBe("failed");
    if (refused.status === "failed") expect(refused.category).toBe("permission_denied");
  });
});
