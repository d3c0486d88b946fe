/**
 * CORS for the REST surface: browsers on the origins an operator lists may
 * call it; every other origin gets no CORS headers (its browser then refuses
 * to hand the response to the page). Default: no origin at all.
 *
 * `TRELLIS_CORS_ORIGINS` is a comma-separated list of exact origins
 * (`https://app.example.com,http://localhost:5173`), or `*` for any origin.
 * CORS is not authentication: a request from a listed origin still needs its
 * API key or token, and one from an unlisted origin is still served (only its
 * browser hides the answer).
 */
import { env, loadConfig, TrellisError } from "@trellis/runtime";

/** Environment read by {@link loadCorsPolicy}. */
export const corsConfigSchema = {
  /** Origins allowed to call the REST surface from a browser; `*` for any. Default none. */
  TRELLIS_CORS_ORIGINS: env.string().default(""),
};

/** Which origins may call, and what a preflight answers. */
export interface CorsPolicy {
  /** The `Access-Control-Allow-Origin` value for `origin`, or undefined when it is not allowed. */
  allowOrigin(origin: string): string | undefined;
}

// Request headers a browser client of the Harn REST surface sends.
export const corsAllowedHeaders = [
  "authorization",
  "content-type",
  "harn-agents-protocol-version",
  "idempotency-key",
  "last-event-id",
  "x-request-id",
  "traceparent",
  "tracestate",
];

// Response headers a page may read.
export const corsExposedHeaders = [
  "x-request-id",
  "harn-agents-protocol-version",
  "idempotent-replayed",
  "retry-after",
  "location",
  "www-authenticate",
];

const originPattern = /^https?:\/\/[^/\s,]+$/i;

/**
 * Read the policy from the environment; a malformed origin stops the start
 * with a `config_invalid` error naming it.
 */
export function loadCorsPolicy(source: Readonly<Record<string, string | undefined>>): CorsPolicy {
  const raw = loadConfig(corsConfigSchema, source).TRELLIS_CORS_ORIGINS;
  const entries = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (entries.includes("*")) return { allowOrigin: () => "*" };
  const allowed = new Set<string>();
  for (const entry of entries) {
    if (!originPattern.test(entry)) {
      throw new TrellisError({
        reason: "config_invalid",
        message: `TRELLIS_CORS_ORIGINS: ${JSON.stringify(entry)} is not an origin (scheme://host[:port]) or *`,
      });
    }
    allowed.add(entry.toLowerCase().replace(/\/$/, ""));
  }
  return {
    allowOrigin: (origin) => (allowed.has(origin.toLowerCase()) ? origin : undefined),
  };
}

/** Headers of a response to a request from `origin` (none when it is not allowed). */
export function corsHeaders(
  policy: CorsPolicy,
  origin: string | undefined,
): Record<string, string> {
  if (origin === undefined) return {};
  const allow = policy.allowOrigin(origin);
  if (allow === undefined) return {};
  return {
    "access-control-allow-origin": allow,
    "access-control-expose-headers": corsExposedHeaders.join(", "),
    ...(allow === "*" ? {} : { vary: "Origin" }),
  };
}

/** Headers of the answer to an allowed preflight for a route that takes `methods`. */
export function preflightHeaders(
  allowOrigin: string,
  methods: readonly string[],
): Record<string, string> {
  return {
    "access-control-allow-origin": allowOrigin,
    "access-control-allow-methods": [...methods, "OPTIONS"].join(", "),
    "access-control-allow-headers": corsAllowedHeaders.join(", "),
    "access-control-max-age": "600",
    ...(allowOrigin === "*" ? {} : { vary: "Origin" }),
  };
}
