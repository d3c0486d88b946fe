import { fileURLToPath } from "node:url";
import { describeAdapterContract } from "@trellis/execution/conformance";
import { createCommandAdapter } from "../src/command/command-adapter.js";

const script = fileURLToPath(new URL("../src/command/examples/echo-agent.mjs", import.meta.url));

describeAdapterContract("command (node echo-agent.mjs)", {
  create: () =>
    createCommandAdapter({ backendId: "echo-command", command: [process.execPath, script] }),
  sourceFiles: [fileURLToPath(new URL("../src/command/command-adapter.ts", import.meta.url))],
  scenarios: {
    simple: { input: "hello" },
    clarification: { input: "ask", resumePayload: { more: "nothing" } },
    failure: { input: "fail" },
    slow: { input: "sleep 5000" },
  },
});
