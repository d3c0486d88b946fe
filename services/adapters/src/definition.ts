/**
 * The adapters service: the routing service and adapter workers that run agent backends.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";

/** The adapters service, runnable embedded or as its own process. */
export const adaptersService: ServiceDefinition = {
  name: "adapters",
  provides: [],
  defaultPort: DEFAULT_PORTS.adapters ?? 0,
  create() {
    return {};
  },
};
