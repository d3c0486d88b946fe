/**
 * `trellis.gateway.v1.UiEventService`: the UI event stream as a gRPC server
 * stream. Same projection, cursors and tiers as the SSE route
 * (`../ui/stream.ts`): the session's log is projected from its first event,
 * envelopes after the cursor are sent, then the log is followed live from the
 * last event read (`StreamEvents` with `after_event_id`), so nothing is lost
 * or sent twice. Bad input is refused before anything is sent, with the
 * usual Connect code and ErrorDetail (`invalid_request` + field).
 */
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import {
  type StreamUiEventsRequest,
  type StreamUiEventsResponse,
  UiEventService,
  UiTier,
} from "@trellis/contracts/gateway";
import { EventService, SessionService } from "@trellis/contracts/tasks";
import { callerOf, type ServiceClients } from "@trellis/platform";
import { errors } from "@trellis/runtime";
import { isAdmin } from "../domain/scopes.js";
import { bootstrapFrame, projectorFor, resumedFrames, sessionHistory } from "../ui/frames.js";
import { type UiTier as ProjectionTier, parseCursor } from "../ui/projection/index.js";
import { forwardOptions } from "./forwarders.js";

function tierOf(tier: UiTier): ProjectionTier {
  switch (tier) {
    case UiTier.UNSPECIFIED:
    case UiTier.DEFAULT:
      return "default";
    case UiTier.DEBUG:
      return "debug";
    default:
      throw errors.invalid(`unknown tier ${tier}`, "tier");
  }
}

/** The envelopes of one session's UI stream, as the RPC sends them. */
export async function* streamUiEvents(
  clients: ServiceClients,
  request: StreamUiEventsRequest,
  ctx: HandlerContext,
): AsyncGenerator<StreamUiEventsResponse> {
  const tier = tierOf(request.tier);
  if (request.sessionId === "") throw errors.invalid("session_id is required", "session_id");
  const cursor = request.cursor === "" ? undefined : parseCursor(request.cursor);
  if (request.cursor !== "" && !cursor) {
    throw errors.invalid(
      "the cursor must be an id of this stream (`<event id>:<index>`) or an event id",
      "cursor",
    );
  }
  const unary = forwardOptions(ctx);
  const { session } = await clients
    .get(SessionService)
    .getSession({ sessionId: request.sessionId }, unary);
  const caller = callerOf(ctx);
  // Another workspace's session is absent to a non-admin caller (never 403).
  if (
    !session ||
    (caller && session.workspaceId !== caller.workspaceId && !isAdmin(caller.scopes))
  ) {
    throw errors.notFound("session", request.sessionId);
  }

  const events = clients.get(EventService);
  const until = request.untilEventId;
  const { history, ids } = await sessionHistory(events, session, unary, {
    cursorText: request.cursor,
    cursor,
    until: until === "" ? undefined : until,
    untilField: "until_event_id",
  });

  const boot = bootstrapFrame(session, tier, request.cursor);
  yield { $typeName: "trellis.gateway.v1.StreamUiEventsResponse", envelope: envelope("", boot) };

  const resumed = resumedFrames(projectorFor(session), tier, cursor);
  function* framesOf(event: Event): Generator<StreamUiEventsResponse> {
    for (const frame of resumed(event)) {
      yield {
        $typeName: "trellis.gateway.v1.StreamUiEventsResponse",
        envelope: envelope(frame.id ?? "", frame),
      };
    }
  }
  for (const event of history) {
    yield* framesOf(event);
    if (event.id === until) return;
  }
  const live = events.streamEvents(
    { sessionId: session.id, afterEventId: history.at(-1)?.id ?? "" },
    forwardOptions(ctx, { streaming: true }),
  );
  for await (const { event } of live) {
    if (event === undefined || ids.has(event.id)) continue;
    ids.add(event.id);
    yield* framesOf(event);
  }
}

function envelope(
  cursor: string,
  frame: { type: string; payload: import("@bufbuild/protobuf").JsonObject },
): StreamUiEventsResponse["envelope"] {
  return {
    $typeName: "trellis.gateway.v1.UiEnvelope",
    cursor,
    type: frame.type,
    payload: frame.payload,
  };
}

/** Register the service on the gateway's router. */
export function registerUiEventService(router: ConnectRouter, clients: ServiceClients): void {
  router.service(UiEventService, {
    streamUiEvents: (request, ctx) => streamUiEvents(clients, request, ctx),
  });
}
