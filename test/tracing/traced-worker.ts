// An adapter worker process for the tracing and fault suites: the probe adapter
// of the adapters tests (replies "<backend> says: <text>", "sleep <ms>" waits)
// run by the SDK's runWorkerMain, with OpenTelemetry set up from the standard
// OTEL_* variables like every service. Env: PROBE_BACKEND (backend id), plus
// runWorkerMain's NATS_URL, TRELLIS_NATS_PREFIX, TRELLIS_WORKER_HEARTBEAT, …
// Prints "worker <id> ready" once registered, "ran <task id>" when a run
// starts and "finished <task id> <status>" when it returns (before the SDK
// reports the result to the router).
import { runWorkerMain } from "@trellis/adapter-sdk";
import { probeAdapter } from "@trellis/execution/testing";
import { initTelemetry } from "@trellis/runtime";

const backendId = process.env.PROBE_BACKEND;
if (!backendId) {
  process.stderr.write("PROBE_BACKEND is required\n");
  process.exit(2);
}
const telemetry = initTelemetry({ serviceName: "trellis-adapter-worker" });
process.once("beforeExit", () => void telemetry.shutdown());
const probe = probeAdapter({
  backendId,
  onRun: (request) => process.stdout.write(`ran ${request.taskId}\n`),
});
await runWorkerMain({
  ...probe,
  execute: async (request) => {
    const result = await probe.execute(request);
    process.stdout.write(`finished ${request.taskId} ${result.status}\n`);
    return result;
  },
});
