/**
 * One gRPC health check, kept apart from `mesh.ts` so that `trellis health`
 * loads a client and the health contract only, never the services.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";

/** Ask a service's gRPC health endpoint; resolves with the status name. */
export async function checkHealth(url: string, timeoutMs = 2000): Promise<string> {
  const client = createClient(health.Health, createGrpcTransport({ baseUrl: url }));
  const response = await client.check({ service: "" }, { timeoutMs });
  return health.HealthCheckResponse_ServingStatus[response.status] ?? String(response.status);
}
