/** AdapterRegistryService: workers announce themselves; operators list backends. */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { capabilitiesToProto } from "@trellis/adapter-sdk";
import { type AdapterRegistryService, BackendStatusSchema } from "@trellis/contracts/adapters";
import type { BackendRegistry, WorkerAnnouncement } from "@trellis/execution";
import { announcementFromProto } from "@trellis/execution";
import { remoteWorkersUnavailable, workerNotFound } from "./errors.js";

/** What the registry handlers need. */
export interface RegistryHandlerDeps {
  registry: BackendRegistry;
  /**
   * Share an announcement with every router of the mesh (NATS heartbeats).
   * Absent in embedded mode, where remote workers cannot join.
   */
  publish?(announcement: WorkerAnnouncement): void;
}

export function createRegistryHandlers(
  deps: RegistryHandlerDeps,
): ServiceImpl<typeof AdapterRegistryService> {
  const { registry } = deps;
  // All or nothing: a registration the mesh could not hear of is undone here
  // too, so this router never routes to a worker the others do not know.
  const accept = (announcement: WorkerAnnouncement) => {
    const publish = deps.publish;
    if (!publish) throw remoteWorkersUnavailable();
    const known = registry.worker(announcement.workerId);
    const { ttlMs } = registry.announce(announcement);
    try {
      publish(announcement);
    } catch (error) {
      if (known) {
        const { lastSeen: _seen, ttlMs: _ttl, ...previous } = known;
        registry.announce(previous);
      } else {
        registry.remove(announcement.workerId);
      }
      throw error;
    }
    return { ttlMs };
  };
  return {
    async registerBackend(request) {
      return accept(announcementFromProto(request.worker, "worker"));
    },
    async heartbeat(request) {
      const known = registry.worker(request.workerId);
      if (!known) throw workerNotFound(request.workerId);
      const { lastSeen: _seen, ttlMs: _ttl, ...announcement } = known;
      return accept({ ...announcement, inFlight: request.inFlight });
    },
    async deregisterBackend(request) {
      const known = registry.worker(request.workerId);
      if (!known) throw workerNotFound(request.workerId);
      const { lastSeen: _seen, ttlMs: _ttl, ...announcement } = known;
      deps.publish?.({ ...announcement, leaving: true });
      registry.remove(request.workerId);
      return {};
    },
    async listBackends() {
      return {
        backends: registry.backends().map((b) =>
          create(BackendStatusSchema, {
            backendId: b.backendId,
            capabilities: capabilitiesToProto(b.capabilities),
            hints: b.hints,
            inProcess: b.inProcess,
            workers: b.workers.map((w) => ({
              workerId: w.workerId,
              capacity: w.capacity,
              inFlight: w.inFlight,
              lastSeen: timestampFromMs(w.lastSeen),
            })),
          }),
        ),
      };
    },
  };
}
