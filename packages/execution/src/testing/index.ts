/**
 * @trellis/execution/testing: fake backends with chosen capabilities for
 * routing tests and benchmarks, in process or in a worker process
 * ({@link probeWorkerScript} on JetStream, {@link probeGrpcWorkerScript} over
 * gRPC; started with @trellis/testkit/worker-process), a distributed router
 * on a test NATS server and the user turns routing tests send it;
 * and for the built-in harness, a server replaying recorded OpenAI and
 * Anthropic responses (`test/fixtures/`) with the tools, providers and
 * requests the harness tests share.
 */
import { fileURLToPath } from "node:url";

export {
  capabilities,
  type ProbeOptions,
  probeAdapter,
  secretsReaderAdapter,
} from "./fake-adapters.js";
export {
  createTools,
  recordedProviders,
  turnRequest,
  userText,
  weatherTool,
} from "./harness-agents.js";
export {
  type RecordedHarness,
  startRecordedHarness,
  weatherAgent,
  weatherTurn,
} from "./recorded-harness.js";
export {
  ANTHROPIC_MESSAGES,
  enqueueChat,
  fixture,
  OPENAI_CHAT,
  type ReceivedRequest,
  type RecordedResponse,
  type RecordedServer,
  startRecordedServer,
} from "./recorded-server.js";
export {
  distributedRouterEnv,
  routedEvents,
  runCollecting,
  startDistributedRouter,
  userTurn,
} from "./routed-turns.js";

/** The probe worker script (a worker process running {@link probeAdapter}). */
export const probeWorkerScript = fileURLToPath(new URL("./probe-worker.ts", import.meta.url));

/** The probe adapter as a gRPC worker (its env in `./probe-grpc-worker.ts`). */
export const probeGrpcWorkerScript = fileURLToPath(
  new URL("./probe-grpc-worker.ts", import.meta.url),
);
export { APPROVAL_GRAPH, gateGraph } from "./scripted-graphs.js";
