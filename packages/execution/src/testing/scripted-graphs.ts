/**
 * Scripted graph definitions (`src/scripted/graph.ts`) that tests across the
 * mesh share, written as an agent's author writes them: run directly by the
 * graph's own tests and registered as scripted agents by the services' tests.
 */
import type { JsonObject } from "@bufbuild/protobuf";

/** Greets the input, waits for the `approval` signal, then done (approved) or nope (raises). */
export const APPROVAL_GRAPH: JsonObject = {
  entry: "greet",
  nodes: {
    greet: { update: { messages: [{ role: "assistant", content: "Hello {{input}}" }] } },
    approve: { suspend: { signal_id: "approval", metadata: { tool: "deploy" } } },
    done: { update: { messages: [{ role: "assistant", content: "approved: {{signal}}" }] } },
    nope: { raise: { category: "provider_invalid_request", message: "denied" } },
  },
  edges: [
    { from: "greet", to: "approve" },
    { from: "approve", to: "done", when: { path: "approved", equals: true } },
    { from: "approve", to: "nope" },
    { from: "done", to: "END" },
  ],
};

/**
 * Harness conformance fixtures 003 and 007, with the fixtures' node spelling:
 * a gate suspending on `signalId`, then a node that sets `completed_flag`.
 */
export function gateGraph(signalId: string): JsonObject {
  return {
    state: {
      fields: {
        approved: { type: "bool", default: false },
        completed_flag: { type: "bool", default: false },
      },
    },
    entry: "gate",
    nodes: {
      gate: { suspend_with_descriptor: { signal_id: signalId } },
      after_resume: { update: { completed_flag: true } },
    },
    edges: [
      { from: "gate", to: "after_resume" },
      { from: "after_resume", to: "END" },
    ],
  };
}
