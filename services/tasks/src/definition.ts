/**
 * The tasks service: workspaces, agents, sessions, transcripts, tasks and their lifecycle, the per-session mailbox, signals.
 */
import type { ServiceDefinition } from "@trellis/platform";
import { DEFAULT_PORTS } from "@trellis/platform";

/** The tasks service, runnable embedded or as its own process. */
export const tasksService: ServiceDefinition = {
  name: "tasks",
  provides: [],
  defaultPort: DEFAULT_PORTS.tasks ?? 0,
  create() {
    return {};
  },
};
