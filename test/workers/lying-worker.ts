// A deliberately lying backend for `trellis adapters conformance`: it declares
// native streaming but sends no progress. Served over gRPC (runGrpcWorker). Env: TRELLIS_WORKER_URL,
// TRELLIS_API_KEY, LIAR_BACKEND (default "liar"). Prints "worker <id> ready".
import { defineAdapter, MINIMAL_CAPABILITIES, runGrpcWorker } from "@trellis/adapter-sdk";
import { chatToMessage } from "@trellis/messages";
import { createLogger } from "@trellis/runtime";

const url = process.env.TRELLIS_WORKER_URL;
if (!url) {
  process.stderr.write("TRELLIS_WORKER_URL is required\n");
  process.exit(2);
}
const worker = await runGrpcWorker({
  adapter: defineAdapter({
    backendId: process.env.LIAR_BACKEND ?? "liar",
    capabilities: {
      ...MINIMAL_CAPABILITIES,
      // The lie: no progress is ever sent.
      streaming: "native",
      maxContextStrategy: "small",
      notes: [],
    },
    async run() {
      return {
        status: "completed",
        messages: [chatToMessage({ role: "assistant", content: "all at once" })],
      };
    },
  }),
  url,
  ...(process.env.TRELLIS_API_KEY ? { apiKey: process.env.TRELLIS_API_KEY } : {}),
  heartbeatMs: 300,
  logger: createLogger({ service: "liar", level: "warn" }),
});
process.stdout.write(`worker ${worker.workerId} ready\n`);
process.once("SIGTERM", () => {
  void worker.stop().then(() => process.exit(0));
});
