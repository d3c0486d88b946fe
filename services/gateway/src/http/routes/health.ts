/** `GET /v1/health`: the mesh as this gateway sees it (`../../topology/mesh-health.ts`). */
import type { JsonValue } from "@bufbuild/protobuf";
import type { RouteSpec } from "../context.js";
import { ok } from "./common.js";

/** The health route (public: no key, no protocol version; see the scope table). */
export const healthRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/health",
    scope: "public",
    handle: async (call) => ok((await call.ports.meshHealth.check()) as unknown as JsonValue),
  },
];
