// The built-in harness as a gRPC worker (the SDK's runGrpcWorker) in front
// of a local OpenAI-compatible stub, for `trellis adapters conformance`
// against the harness without a real provider. The stub streams the recorded
// `chat-weather-final.stream.http` answer; a request whose last message
// contains "slow" is held back 20 s (the conformance run's --slow-input).
// Env: TRELLIS_WORKER_URL, TRELLIS_API_KEY, HARNESS_BACKEND (default harness-rec).
// Prints "worker <id> ready" once connected.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { runGrpcWorker } from "@trellis/adapter-sdk";
import { createHarnessAdapter, harnessProvidersFromEnv } from "@trellis/execution";
import { createLogger } from "@trellis/runtime";

const url = process.env.TRELLIS_WORKER_URL;
if (!url) {
  process.stderr.write("TRELLIS_WORKER_URL is required\n");
  process.exit(2);
}
const recorded = readFileSync(
  new URL(
    "../../packages/execution/test/fixtures/openai/chat-weather-final.stream.http",
    import.meta.url,
  ),
  "utf8",
);
const body = recorded.slice(recorded.indexOf("\n\n") + 2);
const events = body.split("\n\n").filter((e) => e.trim() !== "");
const provider = createServer((req, res) => {
  let text = "";
  req.on("data", (chunk) => {
    text += chunk;
  });
  req.on("end", async () => {
    const request = JSON.parse(text) as { messages?: { content?: unknown }[] };
    const last = JSON.stringify(request.messages?.at(-1)?.content ?? "");
    const timer = setTimeout(
      () => {
        res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
        for (const event of events) res.write(`${event}\n\n`);
        res.end();
      },
      last.includes("slow") ? 20_000 : 0,
    );
    res.on("close", () => clearTimeout(timer));
  });
});
await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
const port = (provider.address() as AddressInfo).port;
const adapter = createHarnessAdapter({
  providers: harnessProvidersFromEnv({
    OPENAI_API_KEY: "sk-test-stub",
    OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`,
  }),
});
const worker = await runGrpcWorker({
  adapter: { ...adapter, backendId: process.env.HARNESS_BACKEND ?? "harness-rec" },
  url,
  ...(process.env.TRELLIS_API_KEY ? { apiKey: process.env.TRELLIS_API_KEY } : {}),
  logger: createLogger({ service: "harness-grpc-worker", level: "warn" }),
});
process.stdout.write(`worker ${worker.workerId} ready\n`);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    void worker.stop().then(() => process.exit(0));
  });
}
