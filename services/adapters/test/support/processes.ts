/** Worker scripts of the adapters service's tests; start them with @trellis/testkit/worker-process. */
import { fileURLToPath } from "node:url";

export { probeGrpcWorkerScript, probeWorkerScript } from "@trellis/execution/testing";
export {
  startWorkerProcess,
  type WorkerProcess,
} from "@trellis/testkit/worker-process";

/** The command adapter's worker entry point. */
export const commandWorkerScript = fileURLToPath(
  new URL("../../src/command/main.ts", import.meta.url),
);

/** The example JSON-lines program. */
export const echoAgentScript = fileURLToPath(
  new URL("../../src/command/examples/echo-agent.mjs", import.meta.url),
);
