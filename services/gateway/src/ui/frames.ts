/**
 * Frames of the UI stream: what one event projects to for a tier, the SSE
 * text of a frame, and the projector / bootstrap envelope of a session.
 * Shared by the SSE route (stream.ts), the per-session feed (fanout.ts) and
 * the gRPC stream.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Event } from "@trellis/contracts/core";
import type { Session } from "@trellis/contracts/tasks";
import { sseFrame } from "../domain/sse.js";
import {
  envelopeForTier,
  formatCursor,
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
  const frames: UiFrame[] = [];
  projector.project(event).forEach((envelope, index) => {
    const visible = envelopeForTier(envelope, tier);
    if (visible) frames.push({ id: formatCursor(event.id, index), ...visible });
  });
  return frames;
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
