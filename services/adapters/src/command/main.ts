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

/** Why `text` is not a URL a gRPC worker can dial (http or https, a host, no credentials); undefined when it is. */
function grpcUrlProblem(text: string): string | undefined {
  if (text.length > 2048) return "is longer than 2048 characters";
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "is not a URL (expected e.g. http://127.0.0.1:8080)";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `has scheme ${url.protocol.slice(0, 20)} (expected http: or https:)`;
  }
  if (url.hostname === "") return "has no host";
  if (url.username !== "" || url.password !== "") {
    return "must not carry credentials (the key comes from TRELLIS_API_KEY)";
  }
  return undefined;
}

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
const grpcUrl = values["grpc-url"];
if (grpcUrl !== undefined) {
  // A URL the worker could never dial is a usage error, said before anything starts.
  const problem = grpcUrlProblem(grpcUrl);
  if (problem) {
    process.stderr.write(
      `--grpc-url ${JSON.stringify(grpcUrl.slice(0, 200))}: ${problem}\n${usage}\n`,
    );
    process.exit(2);
  }
}
const adapter = createCommandAdapter({
  backendId: values.backend,
  command: positionals,
  capabilities: {
    ...(values.attachments ? { attachments: true } : {}),
    ...(depth ? { traceDepth: depth } : {}),
  },
});
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
