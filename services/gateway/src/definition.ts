/**
 * The gateway service: the only public door: REST, SSE, WebSocket and gRPC for every public service, auth, idempotency, rate limits.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";

/** The gateway service, runnable embedded or as its own process. */
export const gatewayService: ServiceDefinition = {
  name: "gateway",
  provides: [],
  defaultPort: DEFAULT_PORTS.gateway ?? 0,
  create() {
    return {};
  },
};
