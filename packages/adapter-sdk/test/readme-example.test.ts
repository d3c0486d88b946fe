/** The adapter of the README, as written there, does what the README says. */
import { describe, expect, it } from "vitest";
import {
  chatToMessage,
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionEvent,
  textOf,
} from "../src/index.js";

const adapter = defineAdapter({
  backendId: "shouty",
  capabilities: {
    schemaVersion: EXECUTION_SCHEMA_VERSION,
    toolUse: "none",
    structuredToolCalls: false,
    continuationSupport: "none",
    approvalInterrupts: "none",
    traceDepth: "minimal",
    attachments: false,
    streaming: "native",
    maxContextStrategy: "small",
    notes: ["answers in capitals"],
  },
  async run(request) {
    const answer = textOf(request.input).toUpperCase();
    request.onEvent?.({ kind: "text_delta", text: answer });
    if (request.signal.aborted) return { status: "cancelled", messages: [] };
    return {
      status: "completed",
      messages: [chatToMessage({ role: "assistant", content: answer })],
    };
  },
});

const request = (text: string, over = {}) => ({
  taskId: "tsk_1",
  sessionId: "ses_1",
  workspaceId: "ws_1",
  agent: { id: "agt_1", backend: "shouty", definition: {}, tools: [] },
  history: [],
  input: chatToMessage({ role: "user", content: text }),
  signal: new AbortController().signal,
  ...over,
});

describe("the README's adapter", () => {
  it("answers, streams, and gets trace, backend id and schema version filled in", async () => {
    const events: ExecutionEvent[] = [];
    const result = await adapter.execute({ ...request("hi"), onEvent: (e) => events.push(e) });
    expect(result).toMatchObject({ status: "completed", backendId: "shouty", schemaVersion: 1 });
    expect(result.messages.map(textOf)).toEqual(["HI"]);
    expect(events).toEqual([{ kind: "text_delta", text: "HI" }]);
    expect(result.trace).toMatchObject({ stepCount: 1, toolCallCount: 0, degraded: false });
  });

  it("refuses what it cannot do instead of faking it", async () => {
    const result = await adapter.execute(request("hi", { requirements: { toolUse: "required" } }));
    expect(result).toMatchObject({
      status: "failed",
      category: "unsupported",
      reasons: [{ code: "tool_use_unsupported", severity: "blocking" }],
    });
  });
});
