// MCP's Streamable HTTP transport checks the outbound address at connect
// time, on the address connected to (issue 22 leftover): the early check
// when a session connects can be passed by a name that resolves to a public
// address then and to a loopback one when the socket connects (DNS
// rebinding); the socket's own lookup must refuse it. Literal IPv6 loopback
// spellings are refused before any connection.
import type { LookupAddress } from "node:dns";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

/** What the socket's lookup (node:dns) answers, per host; the early check's lookup says public. */
const answers = new Map<string, string>();

vi.mock("node:dns", async (original) => {
  const real = await original<typeof import("node:dns")>();
  const lookup = (
    host: string,
    options: unknown,
    callback: (e: NodeJS.ErrnoException | null, a: LookupAddress[] | string, f?: number) => void,
  ) => {
    const answer = answers.get(host);
    if (answer === undefined) return real.lookup(host, options as never, callback as never);
    const family = answer.includes(":") ? 6 : 4;
    if ((options as { all?: boolean }).all) callback(null, [{ address: answer, family }]);
    else callback(null, answer, family);
  };
  return { ...real, default: { ...real, lookup }, lookup };
});
vi.mock("node:dns/promises", async (original) => {
  const real = await original<typeof import("node:dns/promises")>();
  const lookup = async (host: string, options: unknown) =>
    answers.has(host)
      ? [{ address: "93.184.216.34", family: 4 }]
      : real.lookup(host, options as never);
  return { ...real, default: { ...real, lookup }, lookup };
});

const { checkOutbound, guardedFetch, OutboundRefusedError } = await import(
  "../../src/harness/mcp/outbound.js"
);
const { outboundAddressRefusal } = await import("@trellis/platform");

describe("MCP HTTP outbound address check at connect time", () => {
  let server: Server;
  let port = 0;
  let connections = 0;

  beforeAll(async () => {
    // Every loopback address, IPv4 and IPv6: a connection that got through counts.
    server = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "::", resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  async function failure(url: string, fetchImpl = guardedFetch(false, 1_000_000)) {
    return fetchImpl(url, { method: "POST", body: "{}" }).then(
      () => undefined,
      (e: unknown) => e,
    );
  }

  it("refuses a name that turns to a loopback spelling after the early check", async () => {
    const spellings = [
      "127.0.0.1",
      "::1",
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::127.0.0.1",
      "::ffff:0:7f00:1",
      "64:ff9b::7f00:1",
      "2002:7f00:1::",
      "fe80::1%lo",
      "169.254.169.254",
    ];
    for (const [i, address] of spellings.entries()) {
      const host = `mcp${i}.rebind.test`;
      answers.set(host, address);
      const url = `https://${host}:${port}/mcp`;
      // The early check saw a public address ...
      await expect(checkOutbound(new URL(url), false)).resolves.toBeUndefined();
      // ... the connection's own lookup sees the loopback one and refuses it.
      const error = await failure(url);
      expect(error, address).toBeInstanceOf(OutboundRefusedError);
      expect((error as Error).message).toContain(host);
    }
    expect(connections).toBe(0);
  });

  it("refuses literal IPv6 loopback spellings without connecting", async () => {
    for (const host of [
      "[::1]",
      "[0:0:0:0:0:0:0:1]",
      "[0::1]",
      "[::ffff:127.0.0.1]",
      "[::ffff:7f00:1]",
      "[::127.0.0.1]",
      "[::7f00:1]",
      "[::ffff:0:7f00:1]",
      "[64:ff9b::7f00:1]",
      "[2002:7f00:1::]",
    ]) {
      const error = await failure(`https://${host}:${port}/mcp`);
      expect(error, host).toBeInstanceOf(OutboundRefusedError);
    }
    expect(connections).toBe(0);
  });

  it("connects to the address its lookup checked (and only https)", async () => {
    answers.set("mcp.pinned.test", "127.0.0.1");
    // The policy here lets 127.0.0.1 through: the socket connects to it (the
    // TLS handshake with this plain TCP server then fails, not the policy).
    const only127 = (a: string) => (a === "127.0.0.1" ? undefined : outboundAddressRefusal(a));
    const error = await failure(
      `https://mcp.pinned.test:${port}/mcp`,
      guardedFetch(false, 1_000_000, undefined, only127),
    );
    expect(error).not.toBeInstanceOf(OutboundRefusedError);
    expect(connections).toBe(1);
    const plain = await failure(`http://mcp.pinned.test:${port}/mcp`);
    expect(plain).toBeInstanceOf(OutboundRefusedError);
    expect((plain as Error).message).toMatch(/https only/);
    expect(connections).toBe(1);
  });
});
