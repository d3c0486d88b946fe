/**
 * Stage `hand-on`: a route served by another service's REST handler
 * (`delegateTo`, the receipts) goes no further here. After its own checks
 * (`beforeHandOn`; the body is not read), in embedded mode the request is
 * stamped with the caller and left to the owning module's handler after this
 * one on the same server; in distributed mode it is forwarded over HTTP
 * (`../proxy.ts`).
 */
import { type MeshCredentials, type Mode, serviceUrl } from "@trellis/platform";
import type { GatewayConfig } from "../../config.js";
import { forwardHttp, stampCaller } from "../proxy.js";
import type { Stage } from "./stage.js";

/** What handing on needs. */
export interface HandOnPorts {
  mode: Mode;
  mesh: MeshCredentials;
  /** Where the other services are (distributed mode). */
  env: Readonly<Record<string, string | undefined>>;
  config: Pick<GatewayConfig, "TRELLIS_UPSTREAM_TIMEOUT" | "TRELLIS_MAX_BODY_BYTES">;
}

export function handOnStage(ports: HandOnPorts): Stage {
  return (next) => async (exchange) => {
    const { route, call } = exchange;
    if (route.delegateTo === undefined) return next(exchange);
    await route.beforeHandOn?.(call);
    if (ports.mode === "embedded") {
      stampCaller(call.req, call.caller, ports.mesh);
      exchange.handedOn = true;
      return undefined;
    }
    return forwardHttp(call.req, serviceUrl(route.delegateTo, ports.env as NodeJS.ProcessEnv), {
      caller: call.caller,
      requestId: call.requestId,
      mesh: ports.mesh,
      timeoutMs: ports.config.TRELLIS_UPSTREAM_TIMEOUT,
      maxBodyBytes: ports.config.TRELLIS_MAX_BODY_BYTES,
    });
  };
}
