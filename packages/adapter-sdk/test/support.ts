/** What the adapter SDK's tests share. */
import { chatToMessage } from "@trellis/messages";
import type { ExecutionRequest } from "../src/index.js";

/** A request of one user message ("hi") to agent agt_1 on backend "b", with `over` applied. */
export const request = (over: Partial<ExecutionRequest> = {}): ExecutionRequest => ({
  taskId: "tsk_1",
  sessionId: "ses_1",
  workspaceId: "ws_1",
  agent: { id: "agt_1", backend: "b", definition: {}, tools: [] },
  history: [],
  input: chatToMessage({ role: "user", content: "hi" }),
  signal: new AbortController().signal,
  ...over,
});
