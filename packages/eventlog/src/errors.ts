/**
 * The domain errors the event log raises, all {@link TrellisError}s with a
 * stable reason (STYLE.md "Errors"): the Connect interceptor maps them to codes.
 */
import { TrellisError } from "@trellis/runtime";

const domain = "trellis.eventlog";

/** `invalid_request`: the caller sent something the log cannot store or read. */
export function invalidRequest(message: string, param?: string): TrellisError {
  return new TrellisError({
    reason: "invalid_request",
    message,
    domain,
    ...(param ? { param } : {}),
  });
}

/** `conflict`: an optimistic-concurrency check failed (Connect Aborted). */
export function sequenceConflict(
  message: string,
  metadata: Record<string, string>,
  cause?: unknown,
): TrellisError {
  return new TrellisError({ reason: "conflict", message, domain, metadata, cause });
}

/** `cursor_expired`: the cursor names no event the log (still) has in that filter. */
export function cursorExpired(eventId: string): TrellisError {
  return new TrellisError({
    reason: "cursor_expired",
    message: `cursor event ${JSON.stringify(eventId)} is not in the log for this filter`,
    domain,
    metadata: { event_id: eventId },
  });
}

/** `service_unavailable`: the backing server cannot be reached; retry later. */
export function unavailable(dependency: string, cause?: unknown): TrellisError {
  return new TrellisError({
    reason: "service_unavailable",
    message: `${dependency} is unavailable; retry later`,
    domain,
    metadata: { dependency },
    cause,
  });
}

/** `service_unavailable` for a handle used after `close()`. */
export function closedError(what: string): TrellisError {
  return new TrellisError({
    reason: "service_unavailable",
    message: `${what} is closed`,
    domain,
    metadata: { dependency: what },
  });
}

/** `payload_too_large`: an event larger than the log takes (see `MAX_EVENT_BYTES`). */
export function eventTooLarge(eventId: string, size: number, limit: number): TrellisError {
  return new TrellisError({
    reason: "payload_too_large",
    message: `event ${eventId} is ${size} bytes; the event log takes at most ${limit}`,
    domain,
    metadata: { event_id: eventId, size_bytes: String(size) },
  });
}
