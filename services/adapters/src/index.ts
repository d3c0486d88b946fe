/**
 * @trellis/adapters: the adapters service (adapter registry, routing, vaults
 * and gRPC worker sessions over RPC) and the adapter worker process. The
 * execution itself (router, in-process backends) is @trellis/execution.
 */

// The gRPC worker sessions moved to @trellis/execution (the tasks service holds them too).
export {
  createWorkerHandlers,
  WorkerSessions,
  type WorkerSessionsOptions,
} from "@trellis/execution";
export {
  type AdaptersServiceOptions,
  adaptersService,
  createAdaptersService,
} from "./definition.js";
export {
  createVaultAccessHandlers,
  createVaultHandlers,
  MAX_SECRET_BYTES,
  SECRET_NAME,
} from "./vaults/handlers.js";
export {
  type AdapterWorkerOptions,
  type RunningAdapterWorker,
  startAdapterWorker,
} from "./worker/adapter-worker.js";
export {
  ADAPTER_WORKER,
  ADAPTER_WORKER_PORT,
  type AdapterWorkerConfig,
  adapterWorkerConfigSchema,
  BUILTIN_WORKER_BACKENDS,
  loadAdapterWorkerConfig,
} from "./worker/config.js";
export { runAdapterWorkerMain } from "./worker/main.js";
