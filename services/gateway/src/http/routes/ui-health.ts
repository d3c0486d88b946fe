/** Routes of session health: the snapshot and its change stream (SSE). */
import { sessionHealth, streamSessionHealth } from "../../health/index.js";
import type { RouteSpec } from "../context.js";
import { ok, param } from "./common.js";

/** The health routes, registered in the REST route table. */
export const uiHealthRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/ui/sessions/{session_id}/health",
    scope: "events:read",
    handle: async (call) => ok(await sessionHealth(call, param(call, "session_id"))),
  },
  {
    method: "GET",
    path: "/v1/ui/sessions/{session_id}/health/stream",
    scope: "events:read",
    stream: true,
    handle: async (call) => {
      await streamSessionHealth(call, param(call, "session_id"));
      return undefined;
    },
  },
];
