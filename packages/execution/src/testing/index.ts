/**
 * @trellis/execution/testing: fake backends with chosen capabilities for
 * routing tests and benchmarks, in process or in a worker process
 * ({@link probeWorkerScript}, started with @trellis/testkit/worker-process).
 */
import { fileURLToPath } from "node:url";

export {
  capabilities,
  type ProbeOptions,
  probeAdapter,
  secretsReaderAdapter,
} from "./fake-adapters.js";

/** The probe worker script (a worker process running {@link probeAdapter}). */
export const probeWorkerScript = fileURLToPath(new URL("./probe-worker.ts", import.meta.url));
