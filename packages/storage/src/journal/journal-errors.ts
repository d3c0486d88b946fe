import type { TrellisError } from "@trellis/runtime";
import { storageError } from "../errors.js";

/** A bad argument: `invalid_request`, naming the field. */
export function invalidJournalInput(message: string, param: string): TrellisError {
  return storageError({ reason: "invalid_request", message, param });
}

/** An entry or append over the journal's bounds: `payload_too_large`. */
export function journalTooLarge(message: string, param: string, limit: number): TrellisError {
  return storageError({
    reason: "payload_too_large",
    message,
    param,
    metadata: { limit: String(limit) },
  });
}

/**
 * The queue of appends waiting for a flush is full: `rate_limited` (maps to
 * ResourceExhausted), so callers back off and retry instead of piling on.
 */
export function journalQueueFull(limit: number): TrellisError {
  return storageError({
    reason: "rate_limited",
    message: `the journal's queue is full (${limit} entries waiting); retry shortly`,
    metadata: { limit: String(limit), queue: "journal" },
  });
}

/** The database refused or lost the batch, or the journal/projector is closed. */
export function journalUnavailable(message: string, cause?: unknown): TrellisError {
  return storageError({
    reason: "service_unavailable",
    message,
    metadata: { dependency: "journal" },
    ...(cause === undefined ? {} : { cause }),
  });
}

/** `waitFor` gave up: `deadline_exceeded`. */
export function projectorTimeout(name: string, position: bigint, at: bigint, ms: number) {
  return storageError({
    reason: "deadline_exceeded",
    message: `projector ${name} did not reach position ${position} within ${ms} ms (at ${at})`,
    metadata: { projector: name, position: String(position), at: String(at) },
  });
}
