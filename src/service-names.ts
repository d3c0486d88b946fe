/**
 * The names of what Trellis runs, without loading any of it: the CLI checks a
 * name it is given (`trellis serve warp-drive`, `trellis migrate --service x`)
 * before it imports the services. test/service-names.test.ts holds these to
 * `allServices` (services.ts) and the adapters service's `ADAPTER_WORKER`.
 */

/** Every service's name, in start order: `allServices.map((s) => s.name)`. */
export const serviceNames: readonly string[] = ["gateway", "tasks", "adapters", "chat", "receipts"];

/** The built-in adapter worker (`ADAPTER_WORKER` of @trellis/adapters). */
export const adapterWorkerName = "adapter-worker";

/**
 * Names `trellis serve` accepts: the services in start order, then the
 * built-in adapter worker (not a service of the mesh's RPCs: it takes work
 * from NATS and serves only gRPC health).
 */
export const servableServices: readonly string[] = [...serviceNames, adapterWorkerName];
