/**
 * Routes of the frontend event contract: a session's UI event stream (SSE)
 * and the list of envelope types the projection emits.
 */
import {
  UI_EVENT_TIERS,
  UI_EVENT_TYPES,
  UI_EXTENSION_TYPES,
  UI_TYPES_AWAITING_PRODUCERS,
  UI_TYPES_WITHOUT_EVENTS,
} from "../../ui/projection/index.js";
import { streamUiEvents } from "../../ui/stream.js";
import type { RouteSpec } from "../context.js";
import { ok, param } from "./common.js";

/** `GET /v1/ui/event-types`: what the stream can carry, by tier, and what it cannot yet. */
function eventTypes() {
  return ok({
    object: "ui_event_types",
    types: UI_EVENT_TYPES.map((type) => ({
      type,
      tier: UI_EVENT_TIERS[type],
      extension: UI_EXTENSION_TYPES.includes(type),
      awaiting_producer: UI_TYPES_AWAITING_PRODUCERS.includes(type),
    })),
    not_emitted: Object.entries(UI_TYPES_WITHOUT_EVENTS).map(([type, reason]) => ({
      type,
      reason,
    })),
  });
}

/** The UI routes, registered in the REST route table. */
export const uiEventRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/ui/sessions/{session_id}/events/stream",
    scope: "events:read",
    stream: true,
    handle: async (call) => {
      await streamUiEvents(call, param(call, "session_id"));
      return undefined;
    },
  },
  {
    method: "GET",
    path: "/v1/ui/event-types",
    scope: "events:read",
    handle: async () => eventTypes(),
  },
];
