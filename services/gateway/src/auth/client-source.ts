/**
 * The source address a failed authentication is counted against
 * (`auth-throttle.ts`). By default it is the TCP peer. Behind a reverse proxy
 * or load balancer that is the proxy, so every client would share one count;
 * `TRELLIS_TRUSTED_PROXIES` (opt-in: comma-separated addresses or CIDRs,
 * IPv4 and IPv6) names the proxies whose `X-Forwarded-For` is believed.
 *
 * Only when the peer is one of them is the header read, from the right: each
 * hop a trusted proxy appended is skipped, and the first address that is not
 * a trusted proxy is the client (the leftmost entries are whatever the client
 * wrote, so they never count when an untrusted hop comes after them). A peer
 * that is not trusted, a missing header, or a malformed entry before any
 * untrusted address leaves the source at the peer: a client cannot choose
 * its own source by sending the header.
 */
import { BlockList, isIP } from "node:net";
import { env, loadConfig } from "@trellis/runtime";

/** Environment variables of the source rule. */
export const clientSourceSchema = {
  /** Proxies whose X-Forwarded-For names the client: addresses or CIDRs, comma-separated. */
  TRELLIS_TRUSTED_PROXIES: env.string().default(""),
};

/** Given the TCP peer and the request's X-Forwarded-For header(s): the source to count. */
export type ClientSourceOf = (
  peer: string | undefined,
  forwardedFor: string | readonly string[] | null | undefined,
) => string | undefined;

/** The TCP peer, whatever the headers say (no trusted proxies). */
export const peerSource: ClientSourceOf = (peer) => peer;

/** `::ffff:a.b.c.d` → `a.b.c.d`; brackets and an IPv6 zone dropped; `undefined` if not an IP. */
export function normalizeAddress(raw: string): string | undefined {
  let text = raw.trim();
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(text);
  if (mapped) text = mapped[1] as string;
  return isIP(text) === 0 ? undefined : text.toLowerCase();
}

/** Parse `TRELLIS_TRUSTED_PROXIES`; throws naming the entry that is not an address or CIDR. */
export function parseTrustedProxies(raw: string): BlockList | undefined {
  const entries = raw
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  if (entries.length === 0) return undefined;
  const list = new BlockList();
  for (const entry of entries) {
    const slash = entry.indexOf("/");
    const address = normalizeAddress(slash < 0 ? entry : entry.slice(0, slash));
    const family = address === undefined ? 0 : isIP(address);
    const max = family === 4 ? 32 : 128;
    const prefix = slash < 0 ? max : Number(entry.slice(slash + 1));
    if (
      address === undefined ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max ||
      (slash >= 0 && !/^\d{1,3}$/.test(entry.slice(slash + 1)))
    ) {
      throw new Error(
        `TRELLIS_TRUSTED_PROXIES: "${entry}" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`,
      );
    }
    list.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
  }
  return list;
}

function trusted(list: BlockList, address: string): boolean {
  return list.check(address, isIP(address) === 4 ? "ipv4" : "ipv6");
}

/** The source rule for `trustedProxies` (undefined or empty: the peer). */
export function clientSourceOf(trustedProxies: BlockList | undefined): ClientSourceOf {
  if (trustedProxies === undefined) return peerSource;
  return (peer, forwardedFor) => {
    if (peer === undefined || peer === "") return peer;
    const from = normalizeAddress(peer);
    if (from === undefined || !trusted(trustedProxies, from)) return peer;
    if (forwardedFor === undefined || forwardedFor === null) return peer;
    // Several header lines are one list, in order.
    const joined = typeof forwardedFor === "string" ? forwardedFor : forwardedFor.join(",");
    const hops = joined.split(",");
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = normalizeAddress(stripPort(hops[i] as string));
      // A hop a trusted proxy wrote that is not an address: nothing better than the peer.
      if (hop === undefined) return peer;
      if (!trusted(trustedProxies, hop)) return hop;
    }
    // Every hop is a trusted proxy: the leftmost is as close to the client as known.
    return normalizeAddress(stripPort(hops[0] as string)) ?? peer;
  };
}

/** `1.2.3.4:5678` → `1.2.3.4`; `[::1]:80` → `[::1]`; bare IPv6 is left alone. */
function stripPort(hop: string): string {
  const text = hop.trim();
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(text);
  if (v4) return v4[1] as string;
  const v6 = /^(\[[^\]]+\]):\d+$/.exec(text);
  if (v6) return v6[1] as string;
  return text;
}

/** The source rule from an environment. */
export function clientSourceFromEnv(
  source: Readonly<Record<string, string | undefined>>,
): ClientSourceOf {
  const raw = loadConfig(clientSourceSchema, source).TRELLIS_TRUSTED_PROXIES;
  return clientSourceOf(parseTrustedProxies(raw));
}

/** The source of an HTTP request (REST, SSE, WebSocket upgrade) under `deps`' rule. */
export function sourceOf(
  deps: { clientSource?: ClientSourceOf | undefined },
  req: {
    socket?: { remoteAddress?: string | undefined } | null;
    headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  },
): string | undefined {
  return (deps.clientSource ?? peerSource)(
    req.socket?.remoteAddress,
    req.headers["x-forwarded-for"],
  );
}
