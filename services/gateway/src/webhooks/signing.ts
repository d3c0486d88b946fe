/**
 * Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>`
 * over `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the bytes of the
 * secret (`whsec_<base64>`).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const prefix = "whsec_";

/** A new signing secret (shown to the subscriber once). */
export function newWebhookSecret(): string {
  return `${prefix}${randomBytes(32).toString("base64")}`;
}

function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(prefix) ? secret.slice(prefix.length) : secret, "base64");
}

/** The `webhook-signature` value of one delivery attempt. */
export function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const mac = createHmac("sha256", keyOf(secret))
    .update(`${id}.${timestampSeconds}.${body}`)
    .digest("base64");
  return `v1,${mac}`;
}

/**
 * Whether any signature in a `webhook-signature` header (space-separated
 * `v1,<sig>` entries) matches; what receivers do (and what tests check).
 */
export function verifyWebhook(
  secret: string,
  headers: { id: string; timestamp: string; signature: string },
  body: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): boolean {
  const timestamp = Number(headers.timestamp);
  if (!Number.isSafeInteger(timestamp)) return false;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (options.toleranceSeconds ?? 300)) return false;
  const expected = Buffer.from(signWebhook(secret, headers.id, timestamp, body).slice(3), "base64");
  return headers.signature.split(" ").some((entry) => {
    const [version, value] = entry.split(",", 2);
    if (version !== "v1" || value === undefined) return false;
    const given = Buffer.from(value, "base64");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}
