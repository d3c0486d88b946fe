/**
 * The chat service: the harness-chat surface: Send, SendStreaming, Subscribe, GetHistory.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";

/** The chat service, runnable embedded or as its own process. */
export const chatService: ServiceDefinition = {
  name: "chat",
  provides: [],
  defaultPort: DEFAULT_PORTS.chat ?? 0,
  create() {
    return {};
  },
};
