/**
 * Clients of a test mesh deployment's services (adapters and tasks), each
 * call signed with the deployment's service credential: internal services
 * only take calls signed so.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdapterRegistryService, RoutingService, VaultService } from "@trellis/contracts/adapters";
import { AgentService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { createMeshClientInterceptor, MeshCredentials } from "@trellis/platform";

/** For the service at a URL, its clients, signed with `meshSecret` as `caller`. */
export function meshClients(meshSecret: string, caller: string) {
  const signer = createMeshClientInterceptor(new MeshCredentials(meshSecret), caller);
  return (url: string) => {
    const transport = createGrpcTransport({ baseUrl: url, interceptors: [signer] });
    return {
      registry: createClient(AdapterRegistryService, transport),
      routing: createClient(RoutingService, transport),
      vaults: createClient(VaultService, transport),
      agents: createClient(AgentService, transport),
      sessions: createClient(SessionService, transport),
      tasks: createClient(TaskService, transport),
    };
  };
}
