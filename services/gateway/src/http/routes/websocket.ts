/** `GET /v1/sessions/{session_id}/ws` without an upgrade: say how to use it (the upgrade is `ws/upgrade.ts`). */
import { harnError } from "../../domain/errors.js";
import type { RouteSpec } from "../context.js";
import { errorResponse } from "../io.js";
import { param, visibleSession } from "./common.js";

export const webSocketRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/sessions/{session_id}/ws",
    scope: "events:read",
    handle: async (call) => {
      await visibleSession(call, param(call, "session_id"));
      return errorResponse(
        harnError(
          "invalid_request",
          "this endpoint is a WebSocket: send an HTTP/1.1 upgrade (Connection: Upgrade, Upgrade: websocket)",
          { requestId: call.requestId, param: "Upgrade", headers: { upgrade: "websocket" } },
        ),
      );
    },
  },
];
