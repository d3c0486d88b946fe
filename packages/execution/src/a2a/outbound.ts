/**
 * Where the A2A backend may connect. Production refuses loopback, private,
 * link-local and other special addresses (a card URL is agent data: it must
 * not reach the mesh's own services or a cloud metadata endpoint); tests and
 * single-host setups allow them explicitly with `TRELLIS_A2A_ALLOW_PRIVATE=1`.
 *
 * The whole policy is {@link checkA2aTarget}, one function, so a shared
 * outbound address policy can replace it. Redirects are not followed (a
 * public URL must not bounce the call to a private one). Known gap: the
 * address is checked on resolution, not at connect, so DNS rebinding between
 * the two is not caught.
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { TrellisError } from "@trellis/runtime";

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

function isPrivate(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped) return blocked.check(mapped, "ipv4");
  const family = isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family === 6) return blocked.check(address, "ipv6");
  return true;
}

function refused(message: string): TrellisError {
  return new TrellisError({ reason: "permission_denied", message, domain: "adapters" });
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
 * Refuse a target whose host is, or resolves to, a private address, unless
 * `allowPrivate`. Throws `permission_denied`.
 */
export async function checkA2aTarget(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host)
    ? [host]
    : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  const bad = addresses.find(isPrivate);
  if (bad !== undefined || addresses.length === 0) {
    throw refused(
      `the A2A agent at ${url.host} resolves to a private or special address (${bad ?? "none"}); set TRELLIS_A2A_ALLOW_PRIVATE=1 to allow it`,
    );
  }
}

/** A fetch that checks every target first, never follows redirects, and adds `authorization`. */
export function guardedFetch(options: { allowPrivate: boolean; token?: string }): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    await checkA2aTarget(parseA2aUrl(url.href), options.allowPrivate);
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    for (const [name, value] of new Headers(init?.headers)) headers.set(name, value);
    if (options.token !== undefined) headers.set("authorization", `Bearer ${options.token}`);
    return fetch(input, { ...init, headers, redirect: "error" });
  };
}
