/**
 * Where the A2A backend may connect. Production refuses loopback, private,
 * link-local and other special addresses (a card URL is agent data: it must
 * not reach the mesh's own services or a cloud metadata endpoint); tests and
 * single-host setups allow them explicitly with `TRELLIS_A2A_ALLOW_PRIVATE=1`.
 *
 * Which addresses are refused is the host's decision, injected as
 * `refusal` (the host wiring passes the platform's outbound address policy,
 * which an adapter may not import); {@link builtinRefusal} is the fallback
 * of an adapter created without one. Every HTTP request goes through
 * `pinnedFetch`: the address is checked inside the connection's own lookup
 * and that address is the one connected to; redirects are re-checked.
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { TrellisError } from "@trellis/runtime";
import { type AddressRefusal, pinnedFetch, refusedTarget } from "./pinned-fetch.js";

const blocked = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(net, bits, "ipv6");
}

/** The fallback address check (no host policy injected): private, special, mapped ranges. */
export const builtinRefusal: AddressRefusal = (raw) => {
  const address = raw.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const family = mapped ? 4 : isIP(address);
  if (family === 0) return "not an IP address";
  const hit = blocked.check(mapped ?? address, family === 4 ? "ipv4" : "ipv6");
  return hit ? "private or special address" : undefined;
};

/** The address policy of an A2A connection. */
export interface A2aTargetPolicy {
  allowPrivate: boolean;
  refusal: AddressRefusal;
}

/** The scheme and credential-free shape of an A2A URL (no I/O). */
export function parseA2aUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TrellisError({
      reason: "invalid_request",
      message: `not a URL: ${raw.slice(0, 200)}`,
    });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new TrellisError({ reason: "invalid_request", message: "an A2A URL must be http(s)" });
  }
  if (url.username || url.password) {
    throw new TrellisError({
      reason: "invalid_request",
      message: "an A2A URL may not carry credentials (use the definition's credential)",
    });
  }
  return url;
}

/**
 * Refuse a target whose host is, or resolves to, a refused address, unless
 * `allowPrivate`. Throws `permission_denied`. An early answer for the run's
 * error; the connection itself is checked again at connect (`pinnedFetch`).
 */
export async function checkA2aTarget(url: URL, policy: A2aTargetPolicy): Promise<void> {
  if (policy.allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host)
    ? [host]
    : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  const bad = addresses.find((a) => policy.refusal(a) !== undefined);
  if (bad !== undefined || addresses.length === 0) {
    throw refusedTarget(url.host, bad ? `${bad}: ${policy.refusal(bad)}` : "none");
  }
}

/** A fetch that connects only to checked addresses, re-checks redirects, and adds `authorization`. */
export function guardedFetch(options: A2aTargetPolicy & { token?: string }): typeof fetch {
  const fetchImpl = pinnedFetch(options);
  return (input, init) => {
    parseA2aUrl(input instanceof Request ? input.url : String(input));
    return fetchImpl(input, init);
  };
}
