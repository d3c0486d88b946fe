/**
 * Dead letters of the outbox relay: an event the log refuses for good (too
 * large for the log's messages, malformed) must not stall every event behind
 * it. The relay publishes a small stand-in in its place — same id, resource,
 * sequence and previous id, so the resource's sequence stays gapless and the
 * next event still fits — counts it, and moves on at once.
 *
 * | refusal | what the relay does |
 * |---|---|
 * | `payload_too_large`, `invalid_request` (permanent) | publishes the batch's events one by one; each refused one is replaced by its stand-in (kind {@link DEAD_LETTER_KIND}) |
 * | a body that does not decode | skipped (no resource to stand in for), counted |
 * | anything else (log down, `conflict`) | the round is retried with backoff, as before |
 */
import { create, fromBinary, type JsonObject } from "@bufbuild/protobuf";
import { type Event, EventPayloadSchema, EventSchema } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";

/** The kind of the event published in place of one the log refused. */
export const DEAD_LETTER_KIND = "event.dead_lettered";

/** Reasons after which publishing the same event again can never succeed. */
const PERMANENT = new Set(["payload_too_large", "invalid_request"]);

/** True when the log refused an event for good (see the module header). */
export function isPermanentRefusal(error: unknown): boolean {
  return isTrellisError(error) && PERMANENT.has(error.reason);
}

/** What the relay reports for each dead letter. */
export interface DeadLetter {
  /** The outbox position of the row. */
  position: bigint;
  /** The refused event's id and kind (empty when its body did not decode). */
  eventId: string;
  kind: string;
  /** `payload_too_large`, `invalid_request` or `undecodable`. */
  reason: string;
  message: string;
}

/** The stand-in published instead of `event` (see the module header). */
export function deadLetterStandIn(event: Event, reason: string, message: string): Event {
  const data: JsonObject = {
    original_kind: event.kind,
    reason,
    message: message.length > 512 ? `${message.slice(0, 509)}...` : message,
  };
  return create(EventSchema, {
    id: event.id,
    kind: DEAD_LETTER_KIND,
    ...(event.resource ? { resource: event.resource } : {}),
    ...(event.createdAt ? { createdAt: event.createdAt } : {}),
    sequence: event.sequence,
    payload: create(EventPayloadSchema, { kind: { case: "data", value: data } }),
    traceId: event.traceId,
    spanId: event.spanId,
    sessionId: event.sessionId,
    taskId: event.taskId,
    workspaceId: event.workspaceId,
    ...(event.actor ? { actor: event.actor } : {}),
    previousEventId: event.previousEventId,
  });
}

/** Decodes an outbox body; undefined (never a throw) when it is not an Event. */
export function decodeOutboxBody(body: Uint8Array): Event | undefined {
  try {
    return fromBinary(EventSchema, body);
  } catch {
    return undefined;
  }
}

/**
 * Publishes `batch` with `publish`; when the log refuses it for good,
 * publishes the events one at a time in order and replaces each refused one
 * by its stand-in. A refusal that is not permanent is thrown (the caller
 * retries the round). Returns the dead letters.
 */
export async function publishOrDeadLetter<T extends { position: bigint; event: Event }>(
  batch: readonly T[],
  publish: (batch: readonly T[]) => Promise<unknown>,
  standIn: (entry: T, event: Event) => T,
): Promise<DeadLetter[]> {
  if (batch.length === 0) return [];
  try {
    await publish(batch);
    return [];
  } catch (error) {
    if (!isPermanentRefusal(error)) throw error;
  }
  const dead: DeadLetter[] = [];
  for (const entry of batch) {
    try {
      await publish([entry]);
    } catch (error) {
      if (!isPermanentRefusal(error)) throw error;
      const reason = isTrellisError(error) ? error.reason : "invalid_request";
      const message = error instanceof Error ? error.message : String(error);
      dead.push({
        position: entry.position,
        eventId: entry.event.id,
        kind: entry.event.kind,
        reason,
        message,
      });
      // The stand-in is small and well formed; a log that refuses it too is
      // refusing the resource itself: the row is skipped (and counted above).
      await publish([standIn(entry, deadLetterStandIn(entry.event, reason, message))]).catch(
        (again: unknown) => {
          if (!isPermanentRefusal(again)) throw again;
        },
      );
    }
  }
  return dead;
}
