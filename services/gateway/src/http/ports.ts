/** The ports route handlers get (`RestCall.ports`), one set per gateway. */
import { MeshHealthProbe } from "../topology/mesh-health.js";
import type { GatewayDeps, RoutePorts } from "./context.js";

const portsOf = new WeakMap<GatewayDeps, RoutePorts>();

/** The route ports of a gateway (the same object for the same dependencies). */
export function routePortsOf(deps: GatewayDeps): RoutePorts {
  let ports = portsOf.get(deps);
  if (ports === undefined) {
    ports = {
      clients: deps.clients,
      config: deps.config,
      logger: deps.logger,
      closing: deps.closing,
      startedAt: deps.startedAt,
      authenticator: deps.authenticator,
      keys: deps.keys,
      oauthClients: deps.oauthClients,
      sessionDetails: deps.sessionDetails,
      meshHealth: new MeshHealthProbe({ mode: deps.mode, clients: deps.clients, env: deps.env }),
      ...(deps.limits ? { limits: deps.limits } : {}),
      ...(deps.agentPolicies ? { agentPolicies: deps.agentPolicies } : {}),
      ...(deps.webhooks ? { webhooks: deps.webhooks } : {}),
    };
    portsOf.set(deps, ports);
  }
  return ports;
}
