// The outbound address policy: every spelling of a loopback, private or
// metadata address is refused (issue 22, finding 6), public ones pass, and
// the connect-time lookup and redirect check apply the same rule.
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import {
  checkOutboundUrl,
  isOutboundAddressAllowed,
  OUTBOUND_BLOCKED,
  outboundAddressRefusal,
  outboundLookup,
  redirectTarget,
  resolveOutbound,
} from "../src/outbound-address.js";

/** Loopback, private and metadata addresses in the spellings a URL or resolver may hand over. */
const refusedSpellings = [
  "127.0.0.1",
  "127.255.255.254",
  "10.1.2.3",
  "172.16.0.1",
  "192.168.1.1",
  "169.254.169.254",
  "100.100.100.200",
  "0.0.0.0",
  "255.255.255.255",
  "224.0.0.1",
  "192.0.2.1",
  "::1",
  "[::1]",
  "::",
  "fe80::1",
  "fe80::1%eth0",
  "fd00::1",
  "fd00:ec2::254",
  "ff02::1",
  // IPv4-mapped, in both spellings.
  "::ffff:127.0.0.1",
  "::ffff:7f00:1",
  "::ffff:a9fe:a9fe",
  "[::ffff:10.0.0.1]",
  // IPv4-compatible (deprecated), any embedded address.
  "::127.0.0.1",
  "[::127.0.0.1]",
  "::7f00:1",
  "::808:808",
  // IPv4-translated (RFC 6145).
  "::ffff:0:7f00:1",
  "::ffff:0:127.0.0.1",
  // NAT64: well-known prefix with a private address, and the local-use prefix.
  "64:ff9b::7f00:1",
  "64:ff9b::a9fe:a9fe",
  "64:ff9b:1::808:808",
  // 6to4 of loopback, private and metadata.
  "2002:7f00:1::",
  "2002:7f00:0001::1",
  "2002:a00:1::",
  "2002:a9fe:a9fe::",
  // Teredo, documentation.
  "2001:0:4136:e378:8000:63bf:3fff:fdd2",
  "2001:db8::1",
  "not-an-ip",
  "",
];

const allowedSpellings = [
  "8.8.8.8",
  "1.1.1.1",
  "203.0.114.1",
  "2606:4700:4700::1111",
  "[2606:4700:4700::1111]",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808",
  "2002:808:808::1",
];

describe("outbound address policy", () => {
  it("refuses every spelling of loopback, private and metadata addresses", () => {
    for (const address of refusedSpellings) {
      expect(outboundAddressRefusal(address), address).toBeTypeOf("string");
      expect(isOutboundAddressAllowed(address), address).toBe(false);
    }
  });

  it("allows public unicast addresses, also when an IPv6 form embeds one", () => {
    for (const address of allowedSpellings) {
      expect(outboundAddressRefusal(address), address).toBeUndefined();
    }
  });

  it("lets the operator allow private targets", () => {
    expect(isOutboundAddressAllowed("127.0.0.1", { allowPrivate: true })).toBe(true);
    expect(isOutboundAddressAllowed("::7f00:1", { allowPrivate: true })).toBe(true);
  });

  it("checks IP-literal URLs in the spellings the URL parser produces", () => {
    for (const raw of [
      "http://[::127.0.0.1]/hook",
      "http://[::7f00:1]/hook",
      "http://[::ffff:0:7f00:1]/hook",
      "http://[2002:7f00:1::]/hook",
      "http://[::ffff:169.254.169.254]/latest/meta-data",
      "http://0x7f.1/hook",
      "http://2130706433/hook",
      "http://127.1/hook",
      "http://[fe80::1%25eth0]/hook",
    ]) {
      expect(() => checkOutboundUrl(raw), raw).toThrow(/private address|not a URL|absolute/);
    }
    expect(checkOutboundUrl("https://203.0.114.1/hook").hostname).toBe("203.0.114.1");
    expect(() => checkOutboundUrl("ftp://203.0.114.1/")).toThrow(/https/);
    expect(() => checkOutboundUrl("https://u:p@203.0.114.1/")).toThrow(/credentials/);
  });

  it("re-checks a redirect's target and never leaves https", () => {
    const from = new URL("https://203.0.114.1/hook");
    expect(redirectTarget(from, "/next", {}).href).toBe("https://203.0.114.1/next");
    expect(() => redirectTarget(from, "https://[::7f00:1]/x")).toThrow(/private address/);
    expect(() => redirectTarget(from, "https://169.254.169.254/x")).toThrow(/private address/);
    expect(() => redirectTarget(from, "http://203.0.114.2/x")).toThrow(/leave https/);
  });

  it("refuses at resolve time a name that resolves to loopback", async () => {
    await expect(resolveOutbound("localhost")).rejects.toThrow(/private address/);
    await expect(resolveOutbound("[::ffff:7f00:1]")).rejects.toThrow(/private address/);
    expect(await resolveOutbound("localhost", { allowPrivate: true })).not.toEqual([]);
  });

  it("refuses the connection itself inside the socket's lookup", async () => {
    const server = createServer((_req, res) => res.end("reached"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const attempt = (allowPrivate: boolean) =>
        new Promise<string>((resolve) => {
          const req = request(`http://localhost:${port}/`, {
            lookup: outboundLookup({ allowPrivate }) as never,
            family: 4,
          });
          req.on("response", (res) => {
            res.resume();
            resolve(`status ${res.statusCode}`);
          });
          req.on("error", (error: NodeJS.ErrnoException) => resolve(`error ${error.code}`));
          req.end();
        });
      expect(await attempt(false)).toBe(`error ${OUTBOUND_BLOCKED}`);
      expect(await attempt(true)).toBe("status 200");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
