/** `GET /v1/health`: the mesh as this gateway sees it (`../../topology/mesh-health.ts`). */
import type { JsonValue } from "@bufbuild/protobuf";
import { MeshHealthProbe } from "../../topology/mesh-health.js";
import type { GatewayDeps, RouteSpec } from "../context.js";
import { ok } from "./common.js";

// One probe (and its one-second reuse) per gateway.
const probes = new WeakMap<GatewayDeps, MeshHealthProbe>();

function probeOf(deps: GatewayDeps): MeshHealthProbe {
  let probe = probes.get(deps);
  if (!probe) {
    probe = new MeshHealthProbe({ mode: deps.mode, clients: deps.clients, env: deps.env });
    probes.set(deps, probe);
  }
  return probe;
}

/** The health route (public: no key, no protocol version; see the scope table). */
export const healthRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/health",
    scope: "public",
    handle: async (call) => ok((await probeOf(call.deps).check()) as unknown as JsonValue),
  },
];
