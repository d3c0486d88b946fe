import { describe, expect, it } from "vitest";
import { GraphDefinitionError, parseGraph, runGraph } from "../src/scripted/graph.js";
import { APPROVAL_GRAPH } from "../src/testing/scripted-graphs.js";

const approval = parseGraph(APPROVAL_GRAPH);

describe("scripted graph", () => {
  it("runs until a suspend node and reports what it waits for", () => {
    const result = runGraph(approval, { kind: "start" }, { input: "Ada" });
    expect(result).toEqual({
      status: "suspended",
      messages: [{ role: "assistant", content: "Hello Ada" }],
      node: "approve",
      signalLabel: "approval",
      metadata: { tool: "deploy" },
      kind: "input",
    });
  });

  it("branches on the signal payload when resumed", () => {
    const yes = runGraph(
      approval,
      { kind: "resume", node: "approve", payload: { approved: true } },
      { input: "" },
    );
    expect(yes).toEqual({
      status: "completed",
      messages: [{ role: "assistant", content: 'approved: {"approved":true}' }],
    });
    const no = runGraph(
      approval,
      { kind: "resume", node: "approve", payload: { approved: false } },
      { input: "" },
    );
    expect(no).toMatchObject({
      status: "failed",
      category: "provider_invalid_request",
      message: "denied",
    });
  });

  it("emits tool-loop messages in graph order", () => {
    const graph = parseGraph({
      entry: "call",
      nodes: {
        call: {
          update: {
            messages: [
              {
                role: "assistant",
                tool_calls: [{ id: "c1", name: "weather", arguments: { city: "Oslo" } }],
              },
              { role: "tool", tool_call_id: "c1", content: "4°C" },
            ],
          },
        },
        answer: { update: { messages: [{ role: "assistant", content: "It is 4°C in Oslo." }] } },
      },
      edges: [{ from: "call", to: "answer" }],
    });
    const result = runGraph(graph, { kind: "start" }, { input: "weather?" });
    expect(result.status).toBe("completed");
    expect(result.messages.map((m) => m.role)).toEqual(["assistant", "tool", "assistant"]);
  });

  it("stops a cycle at max_steps instead of looping forever", () => {
    const graph = parseGraph({
      entry: "a",
      max_steps: 10,
      nodes: { a: { update: { messages: [] } } },
      edges: [{ from: "a", to: "a" }],
    });
    expect(runGraph(graph, { kind: "start" }, { input: "" })).toMatchObject({
      status: "failed",
      category: "graph_step_limit",
    });
  });

  it("names the path of the first problem in a bad document", () => {
    expect(() =>
      parseGraph({ entry: "x", nodes: { x: { update: { messages: [{ role: "robot" }] } } } }),
    ).toThrow(
      new GraphDefinitionError(
        "role must be system, user, assistant or tool",
        "nodes.x.update.messages[0].role",
      ),
    );
    expect(() =>
      parseGraph({ entry: "missing", nodes: { x: { raise: { category: "c", message: "m" } } } }),
    ).toThrow(/entry: must name a node/);
    expect(() =>
      parseGraph({
        entry: "x",
        nodes: { x: { update: { messages: [] }, raise: { category: "c", message: "m" } } },
      }),
    ).toThrow(/exactly one of/);
    expect(() =>
      parseGraph({
        entry: "x",
        nodes: { x: { update: { messages: [] } } },
        edges: [{ from: "x", to: "y" }],
      }),
    ).toThrow(/edges\[0\]\.to: unknown node y/);
  });
});
