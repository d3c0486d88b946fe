/**
 * The outbound address policy: where a call that Trellis makes on a caller's
 * behalf (webhook deliveries today; A2A and MCP clients later) may connect.
 *
 * Only globally routable unicast addresses are allowed. Loopback, private,
 * shared (CGNAT), link-local (cloud metadata at 169.254.169.254), unique-local
 * (fd00:ec2::254), multicast, documentation, benchmarking and otherwise
 * reserved addresses are refused — in every spelling: an IPv6 address that
 * embeds an IPv4 one (mapped `::ffff:a.b.c.d`, translated `::ffff:0:a.b.c.d`,
 * compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`)
 * is judged by the IPv4 address it carries, the deprecated compatible form
 * and Teredo are refused outright, and zone ids and brackets are stripped
 * before parsing. Parsing is ipaddr.js's, never a regular expression.
 *
 * The check belongs at connect time, on the address actually connected to:
 * {@link outboundLookup} is a `lookup` for `http.request` / `net.connect`
 * that resolves, refuses the connection if any address is not allowed, and
 * hands the checked address to the socket (a name that resolved to a public
 * address earlier and to 127.0.0.1 now — DNS rebinding — is refused). An IP
 * literal is connected to without a lookup, so {@link checkOutboundUrl}
 * checks it; it is also what a redirect's target must pass before it is
 * followed ({@link redirectTarget}).
 */
import { type LookupAddress, lookup } from "node:dns";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import { TrellisError } from "@trellis/runtime";
import type * as IpAddr from "ipaddr.js";

// ipaddr.js is CommonJS with a single `module.exports` (no named exports for
// an ES import), and this repository compiles without esModuleInterop.
const ipaddr: typeof IpAddr = createRequire(import.meta.url)("ipaddr.js");

/** How strict the policy is. */
export interface OutboundPolicy {
  /** Allow loopback and private targets (an operator's explicit choice, e.g. tests). */
  readonly allowPrivate?: boolean;
  /** The request field the refusal names (default `url`). */
  readonly param?: string;
}

/** Why an address is refused; undefined when it is allowed. */
export function outboundAddressRefusal(address: string): string | undefined {
  let bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  const zone = bare.indexOf("%");
  if (zone >= 0) bare = bare.slice(0, zone);
  // Only the spellings the resolver and the URL parser produce: ipaddr.js
  // also reads "0x7f.1"-style IPv4, which no socket is handed.
  if (isIP(bare) === 0) return "not an IP address";
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === "ipv4") return ipv4Refusal(parsed as IpAddr.IPv4);
  return ipv6Refusal(parsed as IpAddr.IPv6);
}

/** Whether the policy lets a connection go to `address` (an IP literal). */
export function isOutboundAddressAllowed(address: string, policy: OutboundPolicy = {}): boolean {
  return policy.allowPrivate === true || outboundAddressRefusal(address) === undefined;
}

function ipv4Refusal(address: IpAddr.IPv4): string | undefined {
  const range = address.range();
  return range === "unicast" ? undefined : `${range} IPv4 address`;
}

function ipv4At(parts: readonly number[], index: number): IpAddr.IPv4 {
  const hi = parts[index] ?? 0;
  const lo = parts[index + 1] ?? 0;
  return new ipaddr.IPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
}

const NAT64_WELL_KNOWN = ipaddr.IPv6.parse("64:ff9b::");

function ipv6Refusal(address: IpAddr.IPv6): string | undefined {
  const parts = address.parts;
  const range = address.range();
  switch (range) {
    case "unicast": {
      // ::a.b.c.d (IPv4-compatible, deprecated; :: and ::1 have ranges of their own).
      if (parts.slice(0, 6).every((p: number) => p === 0)) return "IPv4-compatible IPv6 address";
      return undefined;
    }
    case "ipv4Mapped":
    case "rfc6145":
      return embedded(ipv4At(parts, 6), range);
    case "rfc6052":
      // The well-known NAT64 prefix carries the IPv4 address in its last 32
      // bits; the local-use prefix (64:ff9b:1::/48) reaches private networks.
      return address.match(NAT64_WELL_KNOWN, 96)
        ? embedded(ipv4At(parts, 6), "NAT64")
        : "local-use NAT64 IPv6 address";
    case "6to4":
      return embedded(ipv4At(parts, 1), "6to4");
    default:
      return `${range} IPv6 address`;
  }
}

function embedded(v4: IpAddr.IPv4, form: string): string | undefined {
  const refusal = ipv4Refusal(v4);
  return refusal === undefined ? undefined : `${form} IPv6 address embedding a ${refusal}`;
}

function refused(message: string, policy: OutboundPolicy): TrellisError {
  return new TrellisError({ reason: "invalid_request", message, param: policy.param ?? "url" });
}

/**
 * Check a target URL's shape (http or https, no credentials, at most 2048
 * characters) and, when its host is an IP literal, the address; returns it
 * parsed. A host name is checked when it is resolved ({@link resolveOutbound},
 * {@link outboundLookup}).
 */
export function checkOutboundUrl(raw: string, policy: OutboundPolicy = {}): URL {
  if (raw.length > 2048) throw refused("url is longer than 2048 characters", policy);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refused("url must be an absolute http(s) URL", policy);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw refused("url must use https (or http)", policy);
  }
  if (url.username !== "" || url.password !== "") {
    throw refused("url must not carry credentials", policy);
  }
  const host = bareHost(url.hostname);
  if (isIP(host) !== 0) ensureAllowed([host], policy);
  return url;
}

/**
 * The URL a redirect (`location`, relative to `from`) points at, checked as
 * a new target: the same policy, and never from https down to http.
 */
export function redirectTarget(from: URL, location: string, policy: OutboundPolicy = {}): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw refused("the redirect location is not a URL", policy);
  }
  if (from.protocol === "https:" && next.protocol !== "https:") {
    throw refused("a redirect may not leave https", policy);
  }
  return checkOutboundUrl(next.href, policy);
}

function bareHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function ensureAllowed(addresses: readonly string[], policy: OutboundPolicy): void {
  if (policy.allowPrivate === true) return;
  for (const address of addresses) {
    const why = outboundAddressRefusal(address);
    if (why !== undefined) {
      throw refused(
        `url resolves to a loopback, link-local or private address (${why}); only public addresses are allowed`,
        policy,
      );
    }
  }
}

/** The addresses `host` resolves to, every one of them allowed (else a refusal). */
export async function resolveOutbound(
  host: string,
  policy: OutboundPolicy = {},
): Promise<string[]> {
  const bare = bareHost(host);
  let addresses: string[];
  if (isIP(bare) !== 0) {
    addresses = [bare];
  } else {
    addresses = await new Promise<string[]>((resolve, reject) =>
      lookup(bare, { all: true, verbatim: true }, (error, found) =>
        error
          ? reject(refused("the host of url does not resolve", policy))
          : resolve(found.map((a) => a.address)),
      ),
    );
  }
  ensureAllowed(addresses, policy);
  return addresses;
}

/** The error code a refused connection fails with (its message says why). */
export const OUTBOUND_BLOCKED = "EOUTBOUNDBLOCKED";

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for `http.request` / `https.request` / `net.connect`: resolves,
 * refuses the connection (error code {@link OUTBOUND_BLOCKED}) when any
 * address is not allowed, and hands the checked address to the socket.
 */
export function outboundLookup(policy: OutboundPolicy = {}) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolveOutbound(hostname, policy).then(
      (addresses) => {
        if (options.all) {
          callback(
            null,
            addresses.map((address) => ({ address, family: isIP(address) })),
          );
        } else {
          const first = addresses[0] ?? "";
          callback(null, first, isIP(first));
        }
      },
      (error: Error) => callback(Object.assign(error, { code: OUTBOUND_BLOCKED }), ""),
    );
  };
}
