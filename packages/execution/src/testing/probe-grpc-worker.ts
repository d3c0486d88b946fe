// A probe adapter (./fake-adapters.ts) served over gRPC (WorkerService, the
// SDK's runGrpcWorker), for tests and the worker-grpc benchmark. Env:
//   PROBE_BACKEND        backend id
//   TRELLIS_WORKER_URL   the WorkerService's base URL
//   TRELLIS_API_KEY      admin key, when the URL is a gateway
//   TRELLIS_WORKER_ID, TRELLIS_WORKER_CAPACITY (default 1)
// Prints "worker <id> ready" once connected, and "ran <task id>" per execution.
import { runGrpcWorker } from "@trellis/adapter-sdk";
import { createLogger } from "@trellis/runtime";
import { probeAdapter } from "./fake-adapters.js";

const backendId = process.env.PROBE_BACKEND;
const url = process.env.TRELLIS_WORKER_URL;
if (!backendId || !url) {
  process.stderr.write("PROBE_BACKEND and TRELLIS_WORKER_URL are required\n");
  process.exit(2);
}
const worker = await runGrpcWorker({
  adapter: probeAdapter({
    backendId,
    onRun: (request) => process.stdout.write(`ran ${request.taskId}\n`),
  }),
  url,
  ...(process.env.TRELLIS_API_KEY ? { apiKey: process.env.TRELLIS_API_KEY } : {}),
  ...(process.env.TRELLIS_WORKER_ID ? { workerId: process.env.TRELLIS_WORKER_ID } : {}),
  capacity: Number(process.env.TRELLIS_WORKER_CAPACITY ?? 1),
  logger: createLogger({ service: `adapter-${backendId}`, level: "warn" }),
});
process.stdout.write(`worker ${worker.workerId} ready\n`);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    void worker.stop().then(() => process.exit(0));
  });
}
