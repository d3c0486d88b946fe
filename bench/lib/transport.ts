/** How the benches reach a Trellis over gRPC. */
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { bearer } from "@trellis/testkit";

/** A gRPC transport to the Trellis at `baseUrl` that sends `apiKey` as its bearer token. */
export function bearerTransport(baseUrl: string, apiKey: string): Transport {
  return createGrpcTransport({
    baseUrl,
    interceptors: [bearer(apiKey)],
  });
}
