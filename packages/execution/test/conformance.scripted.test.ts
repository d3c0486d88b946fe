import { fileURLToPath } from "node:url";
import { describeAdapterContract } from "../src/conformance/adapter.contract.js";
import { createScriptedAdapter } from "../src/scripted/scripted-adapter.js";

const reply = (content: string) => ({
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content }] } } },
});

describeAdapterContract("scripted", {
  create: () => createScriptedAdapter(),
  sourceFiles: [fileURLToPath(new URL("../src/scripted/scripted-adapter.ts", import.meta.url))],
  scenarios: {
    simple: { input: "world", definition: reply("Hello {{input}}") },
    clarification: {
      input: "book a table",
      definition: {
        entry: "ask",
        nodes: {
          ask: { update: { messages: [{ role: "assistant", content: "For how many?" }] } },
          wait: { suspend: { signal_id: "party_size" } },
          done: { update: { messages: [{ role: "assistant", content: "Booked." }] } },
        },
        edges: [
          { from: "ask", to: "wait" },
          { from: "wait", to: "done" },
        ],
      },
      resumePayload: { people: 4 },
    },
    approval: {
      input: "email Bob",
      definition: {
        entry: "wait",
        nodes: { wait: { suspend: { signal_id: "approval", metadata: { kind: "approval" } } } },
      },
    },
    failure: {
      input: "x",
      definition: {
        entry: "boom",
        nodes: { boom: { raise: { category: "provider_unavailable", message: "model down" } } },
      },
    },
    slow: {
      input: "x",
      definition: {
        entry: "slow",
        nodes: { slow: { update: { messages: [], delay_ms: 2500 } } },
      },
    },
  },
});
