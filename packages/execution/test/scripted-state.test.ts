// Scripted graphs keep state besides the transcript: fields with reducers
// (replace, append), declared defaults, the signal payload written on resume,
// and the harness fixtures' node spellings.
import { describe, expect, it } from "vitest";
import { GraphDefinitionError, parseGraph, runGraph } from "../src/scripted/graph.js";
import { gateGraph } from "../src/testing/scripted-graphs.js";

describe("scripted graph state", () => {
  it("replaces a field by default and starts from the declared default", () => {
    // harness fixture 004: {value: 42} on a field declared with default 0.
    const graph = parseGraph({
      state: { fields: { value: { type: "int", default: 0 } } },
      entry: "compute",
      nodes: { compute: { update: { value: 42 } } },
      edges: [{ from: "compute", to: "END" }],
    });
    expect(runGraph(graph, { kind: "start" }, { input: "" })).toEqual({
      status: "completed",
      messages: [],
      state: { value: 42 },
    });
    // A stored value is replaced too, not merged.
    expect(runGraph(graph, { kind: "start" }, { input: "", state: { value: 7 } }).state).toEqual({
      value: 42,
    });
  });

  it("appends to a list field across runs, from the state the last run left", () => {
    // harness fixture 002: [1] after the first turn, [1, 1] after the second.
    const graph = parseGraph({
      state: { fields: { message_count: { type: "list<int>", reducer: "append", default: [] } } },
      entry: "append_one",
      nodes: { append_one: { update: { message_count: [1] } } },
      edges: [{ from: "append_one", to: "END" }],
    });
    const first = runGraph(graph, { kind: "start" }, { input: "" });
    expect(first.state).toEqual({ message_count: [1] });
    const second = runGraph(graph, { kind: "start" }, { input: "", ...first });
    expect(second.state).toEqual({ message_count: [1, 1] });
    // The stored state is not changed in place.
    expect(first.state).toEqual({ message_count: [1] });
  });

  it("writes the resume payload's declared fields, then the nodes after the suspend", () => {
    // harness fixtures 003 / 007, with the fixtures' node spelling.
    const graph = parseGraph(gateGraph("approval-test-001"));
    const paused = runGraph(graph, { kind: "start" }, { input: "" });
    expect(paused).toMatchObject({
      status: "suspended",
      signalLabel: "approval-test-001",
      state: { approved: false, completed_flag: false },
    });
    const resumed = runGraph(
      graph,
      { kind: "resume", node: "gate", payload: { approved: true, note: "not declared" } },
      { input: "", ...(paused.state ? { state: paused.state } : {}) },
    );
    expect(resumed).toEqual({
      status: "completed",
      messages: [],
      state: { approved: true, completed_flag: true },
    });
  });

  it("keeps messages apart from state and accepts `raises` for raise", () => {
    const graph = parseGraph({
      state: {
        fields: { messages: { type: "list[ChatMessage]", reducer: "append", default: [] } },
      },
      entry: "reply",
      nodes: {
        reply: { update: { messages: [{ role: "assistant", content: "hi" }], turns: 1 } },
        fail: { raises: { category: "provider_unavailable", message: "down" } },
      },
      edges: [{ from: "reply", to: "fail" }],
    });
    const result = runGraph(graph, { kind: "start" }, { input: "" });
    expect(result).toMatchObject({
      status: "failed",
      category: "provider_unavailable",
      messages: [{ role: "assistant", content: "hi" }],
      state: { turns: 1 },
    });
  });

  it("leaves the result of a graph without state unchanged (no state key)", () => {
    const graph = parseGraph({
      entry: "reply",
      nodes: { reply: { update: { messages: [{ role: "assistant", content: "x" }] } } },
    });
    expect(runGraph(graph, { kind: "start" }, { input: "", state: { a: 1 } })).toEqual({
      status: "completed",
      messages: [{ role: "assistant", content: "x" }],
    });
  });

  it("refuses bad state declarations and updates, naming the path", () => {
    const problem = (document: unknown) => {
      try {
        parseGraph(document);
      } catch (error) {
        if (error instanceof GraphDefinitionError) return error.path;
        throw error;
      }
      return "no problem";
    };
    const node = { update: { value: 1 } };
    expect(
      problem({
        state: { fields: { value: { reducer: "merge" } } },
        entry: "n",
        nodes: { n: node },
      }),
    ).toBe("state.fields.value.reducer");
    expect(
      problem({
        state: { fields: { messages: { reducer: "replace" } } },
        entry: "n",
        nodes: { n: node },
      }),
    ).toBe("state.fields.messages.reducer");
    expect(
      problem({
        state: { fields: { value: { reducer: "append" } } },
        entry: "n",
        nodes: { n: node },
      }),
    ).toBe("nodes.n.update.value");
    expect(problem({ state: { fields: [] }, entry: "n", nodes: { n: node } })).toBe("state.fields");
    expect(problem({ state: { extra: 1 }, entry: "n", nodes: { n: node } })).toBe("state.extra");
    expect(problem({ entry: "n", nodes: { n: { update: {}, suspend: { signal_id: "x" } } } })).toBe(
      "nodes.n",
    );
  });
});
