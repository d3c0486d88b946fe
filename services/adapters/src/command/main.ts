// A command adapter worker process:
//
//   tsx services/adapters/src/command/main.ts --backend my-bot [--attachments] -- python3 bot.py
//
// NATS_URL, TRELLIS_NATS_PREFIX, TRELLIS_WORKER_* as for every worker
// (@trellis/adapter-sdk runWorkerMain). With `--grpc-url URL` it joins over
// gRPC instead (WorkerService; no NATS: a `trellis dev` gateway, say), with
// the admin key from TRELLIS_API_KEY; TRELLIS_WORKER_ID and
// TRELLIS_WORKER_CAPACITY still apply.
import { parseArgs } from "node:util";
import { runGrpcWorker, runWorkerMain } from "@trellis/adapter-sdk";
import { createLogger } from "@trellis/runtime";
import { createCommandAdapter } from "./command-adapter.js";

const usage =
  "usage: main.ts --backend <id> [--grpc-url <url>] [--attachments] [--trace-depth minimal|standard|detailed] -- <command> [args…]";
function parse() {
  try {
    return parseArgs({
      options: {
        backend: { type: "string" },
        "grpc-url": { type: "string" },
        attachments: { type: "boolean" },
        "trace-depth": { type: "string" },
      },
      allowPositionals: true,
    });
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
    process.exit(2);
  }
}
const { values, positionals } = parse();
const depth = values["trace-depth"];
if (!values.backend || positionals.length === 0) {
  process.stderr.write(`${usage}\n`);
  process.exit(2);
}
if (depth !== undefined && depth !== "minimal" && depth !== "standard" && depth !== "detailed") {
  process.stderr.write(`--trace-depth must be minimal, standard or detailed\n${usage}\n`);
  process.exit(2);
}
const adapter = createCommandAdapter({
  backendId: values.backend,
  command: positionals,
  capabilities: {
    ...(values.attachments ? { attachments: true } : {}),
    ...(depth ? { traceDepth: depth } : {}),
  },
});
const grpcUrl = values["grpc-url"];
if (grpcUrl) {
  const worker = await runGrpcWorker({
    adapter,
    url: grpcUrl,
    ...(process.env.TRELLIS_API_KEY ? { apiKey: process.env.TRELLIS_API_KEY } : {}),
    ...(process.env.TRELLIS_WORKER_ID ? { workerId: process.env.TRELLIS_WORKER_ID } : {}),
    capacity: Number(process.env.TRELLIS_WORKER_CAPACITY ?? 1),
    logger: createLogger({ service: `adapter-${adapter.backendId}` }),
  }).catch((error: unknown) => {
    process.stderr.write(
      `adapter worker ${adapter.backendId}: cannot start: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  });
  process.stdout.write(`worker ${worker.workerId} ready\n`);
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      void worker.stop().then(() => process.exit(0));
    });
  }
} else {
  await runWorkerMain(adapter);
}
