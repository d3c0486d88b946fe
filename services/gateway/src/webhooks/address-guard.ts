/**
 * SSRF guard for webhook URLs: a URL whose host resolves to a loopback,
 * link-local, private, shared, multicast or otherwise special address is
 * refused, unless the operator allows private targets
 * (`TRELLIS_WEBHOOKS_ALLOW_PRIVATE=1`).
 *
 * The check runs when a subscription is made and again on every delivery,
 * inside the connection's own DNS lookup (`guardedLookup`): the address that
 * was checked is the one connected to, so a name that resolves to a public
 * address at subscribe time and to 127.0.0.1 later (DNS rebinding) is refused.
 */
import { type LookupAddress, lookup } from "node:dns";
import { BlockList, isIP } from "node:net";
import { TrellisError } from "@trellis/runtime";

const blocked = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8], // "this" network
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local (cloud metadata)
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.88.99.0", 24], // 6to4 relay
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
] as const) {
  blocked.addSubnet(net, bits, "ipv6");
}

/** The IPv4 address an IPv6 address embeds (mapped, compatible, NAT64), if any. */
function embeddedIPv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex?.[1] && hex[2]) {
    const hi = Number.parseInt(hex[1], 16);
    const lo = Number.parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/** Whether deliveries to `address` (an IP literal) are refused by default. */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family !== 6) return true;
  const v4 = embeddedIPv4(address);
  if (v4 !== undefined) return blocked.check(v4, "ipv4");
  return blocked.check(address, "ipv6");
}

function refused(message: string): TrellisError {
  return new TrellisError({ reason: "invalid_request", message, param: "url" });
}

/** Check a subscription URL's shape (scheme, no credentials); returns it parsed. */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refused("url must be an absolute http(s) URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw refused("url must use https (or http)");
  }
  if (url.username !== "" || url.password !== "") {
    throw refused("url must not carry credentials");
  }
  if (raw.length > 2048) throw refused("url is longer than 2048 characters");
  return url;
}

/** The addresses `host` resolves to, every one of them allowed (else a refusal). */
export async function resolveAllowed(host: string, allowPrivate: boolean): Promise<string[]> {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  let addresses: string[];
  if (isIP(bare) !== 0) {
    addresses = [bare];
  } else {
    addresses = await new Promise<string[]>((resolve, reject) =>
      lookup(bare, { all: true, verbatim: true }, (error, found) =>
        error
          ? reject(refused(`the host of url does not resolve`))
          : resolve(found.map((a) => a.address)),
      ),
    );
  }
  if (!allowPrivate && addresses.some(isBlockedAddress)) {
    throw refused(
      "url resolves to a loopback, link-local or private address; webhooks only go to public addresses",
    );
  }
  return addresses;
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for `http.request`: resolves, refuses the connection when any
 * address is not allowed, and hands the checked address to the socket.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolveAllowed(hostname, allowPrivate).then(
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
      (error: Error) => callback(Object.assign(error, { code: "EWEBHOOKBLOCKED" }), ""),
    );
  };
}
