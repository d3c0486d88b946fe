/**
 * SSRF guard for webhook URLs: the platform's outbound address policy
 * (`@trellis/platform`, `outbound-address.ts`) with the webhook settings —
 * loopback, link-local, private, shared, multicast and otherwise special
 * addresses, in every IPv6 spelling that embeds one, are refused unless the
 * operator allows private targets (`TRELLIS_WEBHOOKS_ALLOW_PRIVATE=1`).
 *
 * The check runs when a subscription is made and again on every delivery,
 * inside the connection's own DNS lookup (`guardedLookup`): the address that
 * was checked is the one connected to, so a name that resolves to a public
 * address at subscribe time and to 127.0.0.1 later (DNS rebinding) is refused.
 * Deliveries never follow redirects (a 3xx is a failed attempt).
 */
import {
  checkOutboundUrl,
  OUTBOUND_BLOCKED,
  type OutboundPolicy,
  outboundAddressRefusal,
  outboundLookup,
  resolveOutbound,
} from "@trellis/platform";

/** The error code of a delivery connection the guard refused. */
export const WEBHOOK_BLOCKED = OUTBOUND_BLOCKED;

function policyOf(allowPrivate: boolean): OutboundPolicy {
  return { allowPrivate, param: "url" };
}

/** Whether deliveries to `address` (an IP literal) are refused by default. */
export function isBlockedAddress(address: string): boolean {
  return outboundAddressRefusal(address) !== undefined;
}

/**
 * Check a subscription URL's shape (scheme, no credentials, length) and an IP
 * literal host; returns it parsed (a host name is checked by `resolveAllowed`).
 */
export function parseWebhookUrl(raw: string, allowPrivate = false): URL {
  return checkOutboundUrl(raw, policyOf(allowPrivate));
}

/** The addresses `host` resolves to, every one of them allowed (else a refusal). */
export function resolveAllowed(host: string, allowPrivate: boolean): Promise<string[]> {
  return resolveOutbound(host, policyOf(allowPrivate));
}

/**
 * A `lookup` for `http.request`: resolves, refuses the connection when any
 * address is not allowed, and hands the checked address to the socket.
 */
export function guardedLookup(allowPrivate: boolean) {
  return outboundLookup(policyOf(allowPrivate));
}
