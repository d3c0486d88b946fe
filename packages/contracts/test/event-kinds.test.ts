import { describe, expect, it } from "vitest";
import { EVENT_KIND, textDelta, toolFinished, toolUse } from "../src/event-kinds.js";

describe("event-kind catalogue", () => {
  it("names the Harn kinds", () => {
    expect(EVENT_KIND.toolUse).toBe("agent.tool_use");
    expect(EVENT_KIND.mcpToolUse).toBe("agent.mcp_tool_use");
    expect(EVENT_KIND.textDelta).toBe("agent.text_delta");
    expect(new Set(Object.values(EVENT_KIND)).size).toBe(Object.values(EVENT_KIND).length);
  });

  it("round-trips a tool call through its wire payload", () => {
    const call = { toolCallId: "c1", name: "add", input: { a: 1 }, server: "math" };
    const wire = toolUse.encode(call);
    expect(wire).toEqual({ tool_call_id: "c1", name: "add", input: { a: 1 }, server: "math" });
    expect(toolUse.decode(wire)).toEqual(call);
    expect(toolUse.decode(toolUse.encode({ toolCallId: "c2", name: "x" }))).toEqual({
      toolCallId: "c2",
      name: "x",
    });
  });

  it("reads older producers' aliases and ignores fields of the wrong type", () => {
    expect(toolUse.decode({ id: "c3", tool_name: "y", server_name: "s" })).toEqual({
      toolCallId: "c3",
      name: "y",
      server: "s",
    });
    expect(toolFinished.decode({ toolCallId: "c4", name: 7, status: "denied" })).toEqual({
      toolCallId: "c4",
      name: "",
      status: "denied",
    });
    expect(textDelta.decode({ delta: "hi" })).toEqual({ text: "hi" });
    expect(textDelta.decode(null)).toEqual({ text: "" });
    expect(textDelta.decode(textDelta.encode({ text: "yo" }))).toEqual({ text: "yo" });
  });
});
