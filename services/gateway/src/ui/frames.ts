/**
 * Frames of the UI stream: what one event projects to for a tier (from the
 * start, or for a client resuming at a cursor), the SSE text of a frame, the
 * projector / bootstrap envelope of a session, and the history a stream
 * projects first. Shared by the SSE route (stream.ts), the per-session feed
 * (fanout.ts) and the gRPC stream.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { CallOptions, Client } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import type { EventService, Session } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { sseFrame } from "../domain/sse.js";
import {
  envelopeForTier,
  formatCursor,
  type ProjectedEnvelope,
  type UiCursor,
  type UiEventType,
  UiProjector,
  type UiTier,
} from "./projection/index.js";

/** One frame of the UI stream. */
export interface UiFrame {
  /** The cursor; absent on the `session` bootstrap envelope. */
  id?: string;
  type: UiEventType;
  payload: JsonObject;
}

/** The frames `event` projects to for a client of `tier`. */
export function framesOf(projector: UiProjector, event: Event, tier: UiTier): UiFrame[] {
  return visibleFrames(event, projector.project(event), tier, -1);
}

/**
 * The frames a client of `tier` resuming at `cursor` receives, event by
 * event in log order: every event goes through the projector (its state
 * needs the whole log); nothing is returned until the cursor's envelope has
 * gone by.
 */
export function resumedFrames(
  projector: UiProjector,
  tier: UiTier,
  cursor: UiCursor | undefined,
): (event: Event) => UiFrame[] {
  let sending = cursor === undefined;
  return (event) => {
    const envelopes = projector.project(event);
    let skipThrough = -1;
    if (!sending) {
      if (cursor?.eventId !== event.id) return [];
      sending = true;
      skipThrough = cursor.index ?? Number.POSITIVE_INFINITY;
    }
    return visibleFrames(event, envelopes, tier, skipThrough);
  };
}

/** The frames of `event`'s envelopes after index `skipThrough` that `tier` sees. */
function visibleFrames(
  event: Event,
  envelopes: readonly ProjectedEnvelope[],
  tier: UiTier,
  skipThrough: number,
): UiFrame[] {
  const frames: UiFrame[] = [];
  for (const [index, envelope] of envelopes.entries()) {
    const visible = index > skipThrough ? envelopeForTier(envelope, tier) : undefined;
    if (visible) frames.push({ id: formatCursor(event.id, index), ...visible });
  }
  return frames;
}

/** Where a stream starts and ends in a session's log, as its client named them. */
export interface StreamBounds {
  /** The cursor as the client sent it (for the message that refuses it). */
  cursorText: string;
  cursor: UiCursor | undefined;
  /** The event whose envelopes end the stream, if any. */
  until: string | undefined;
  /** The request field that named `until`. */
  untilField: string;
}

/**
 * The session's log from its first event and the ids in it, read before
 * anything is sent so that a cursor or `until` naming no event of the
 * session is refused (`invalid_request`) before the stream starts.
 */
export async function sessionHistory(
  events: Client<typeof EventService>,
  session: Session,
  options: CallOptions,
  bounds: StreamBounds,
): Promise<{ history: Event[]; ids: Set<string> }> {
  const history: Event[] = [];
  for (let after = ""; ; ) {
    const page = await events.listEvents(
      { sessionId: session.id, afterEventId: after, limit: 200 },
      options,
    );
    history.push(...page.events);
    const last = page.events.at(-1);
    if (!page.hasMore || last === undefined) break;
    after = last.id;
  }
  const ids = new Set(history.map((e) => e.id));
  if (bounds.cursor && !ids.has(bounds.cursor.eventId)) {
    throw errors.invalid(
      `cursor ${JSON.stringify(bounds.cursorText)} is not a position in the UI stream of session ${session.id}`,
      "cursor",
    );
  }
  if (bounds.until !== undefined && !ids.has(bounds.until)) {
    throw errors.invalid(
      `event ${JSON.stringify(bounds.until)} is not an event of session ${session.id}`,
      bounds.untilField,
    );
  }
  return { history, ids };
}

/** A frame as SSE text. */
export function sseOfFrame(frame: UiFrame): string {
  return sseFrame({
    ...(frame.id !== undefined ? { id: frame.id } : {}),
    event: frame.type,
    data: JSON.stringify({ type: frame.type, payload: frame.payload }),
  });
}

/** A projector for `session` (with its lineage when it is a branch). */
export function projectorFor(session: Session): UiProjector {
  return new UiProjector({
    sessionId: session.id,
    ...(session.parentSessionId !== ""
      ? {
          lineage: {
            parentSessionId: session.parentSessionId,
            forkedFromEventId: session.forkedFromEventId,
          },
        }
      : {}),
  });
}

/** The `session` bootstrap envelope. */
export function bootstrapFrame(session: Session, tier: UiTier, cursor: string): UiFrame {
  return {
    type: "session",
    payload: {
      session_id: session.id,
      workspace_id: session.workspaceId,
      agent_id: session.agentId || null,
      parent_session_id: session.parentSessionId || null,
      branch_source_event_id: session.forkedFromEventId || null,
      tier,
      resume_cursor: cursor || null,
    },
  };
}
