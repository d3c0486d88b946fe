/**
 * Harn Agents Protocol version negotiation (Harn v1 "Versioning").
 *
 * Every request except public discovery carries `Harn-Agents-Protocol-Version`;
 * a missing or unsupported value is refused with 426 `unsupported_protocol_version`
 * and the list of versions this server speaks.
 */

/** The request header that names the protocol version. */
export const protocolVersionHeader = "harn-agents-protocol-version";

/** The version this server speaks by default (and the only one today). */
export const currentProtocolVersion = "agents-protocol-2026-04-25";

/** Every version this server accepts, newest first. */
export const supportedProtocolVersions: readonly string[] = [currentProtocolVersion];

/** Outcome of {@link checkProtocolVersion}. */
export type VersionCheck =
  | { ok: true; version: string }
  | { ok: false; reason: "missing" | "unsupported"; given?: string };

/**
 * Check the version header value (as Node gives it: string, list or absent).
 * Surrounding whitespace is ignored; the comparison is exact otherwise
 * (versions are date-stamped tokens, not ranges).
 */
export function checkProtocolVersion(value: string | string[] | undefined): VersionCheck {
  const raw = Array.isArray(value) ? value[0] : value;
  const given = raw?.trim();
  if (given === undefined || given === "") return { ok: false, reason: "missing" };
  if (supportedProtocolVersions.includes(given)) return { ok: true, version: given };
  return { ok: false, reason: "unsupported", given };
}
