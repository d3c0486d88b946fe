// A worker process running a probe adapter (./fake-adapters.ts), for tests
// and the routing benchmark. Configured by env:
//   PROBE_BACKEND        backend id
//   PROBE_CAPABILITIES   JSON of capability overrides (default {})
//   NATS_URL, TRELLIS_NATS_PREFIX, TRELLIS_WORKER_CAPACITY, TRELLIS_WORKER_HEARTBEAT,
//   TRELLIS_WORKER_ID, TRELLIS_WORKER_COST, TRELLIS_WORKER_LATENCY_MS  (runWorkerMain)
// Prints "worker <id> ready" once registered, and "ran <task id>" per execution.
import { runWorkerMain } from "@trellis/adapter-sdk";
import { probeAdapter } from "./fake-adapters.js";

const backendId = process.env.PROBE_BACKEND;
if (!backendId) {
  process.stderr.write("PROBE_BACKEND is required\n");
  process.exit(2);
}
await runWorkerMain(
  probeAdapter({
    backendId,
    capabilities: JSON.parse(process.env.PROBE_CAPABILITIES ?? "{}"),
    onRun: (request) => process.stdout.write(`ran ${request.taskId}\n`),
  }),
);
