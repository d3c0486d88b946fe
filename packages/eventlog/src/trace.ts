/**
 * W3C trace context on events: an event carries `trace_id` / `span_id` (hex);
 * transports carry them as a `traceparent` header so any OpenTelemetry
 * propagator downstream picks them up (ARCHITECTURE.md "Cross-cutting").
 */

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/**
 * The `traceparent` value for a trace and span id, or undefined when either is
 * missing or malformed (an invalid header is worse than none). The event does
 * not record the sampled flag; it exists because a span recorded it, so `01`.
 */
export function formatTraceparent(traceId: string, spanId: string): string | undefined {
  if (!TRACE_ID.test(traceId) || !SPAN_ID.test(spanId)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return `00-${traceId}-${spanId}-01`;
}

/** Parse a `traceparent` header (version 00 layout), or undefined. */
export function parseTraceparent(
  value: string | undefined,
): { traceId: string; spanId: string } | undefined {
  if (!value) return undefined;
  const parts = value.trim().split("-");
  if (parts.length < 4) return undefined;
  const [, traceId, spanId] = parts;
  if (!traceId || !spanId || !TRACE_ID.test(traceId) || !SPAN_ID.test(spanId)) return undefined;
  return { traceId, spanId };
}
