/**
 * Scripted agent graphs (a persona's `definition` with the `scripted`
 * workflow) that the gateway's tests and the repository's Harn conformance
 * suite register: one that answers at once, one that waits for input.
 */

/** A scripted agent that replies once. */
export const replyGraph = {
  entry: "reply",
  nodes: { reply: { update: { messages: [{ role: "assistant", content: "done" }] } } },
  edges: [{ from: "reply", to: "END" }],
};

/** A scripted agent that waits for input (signal `more`), then replies. */
export const waitGraph = {
  entry: "ask",
  nodes: {
    ask: { suspend: { signal_id: "more", kind: "input" } },
    done: { update: { messages: [{ role: "assistant", content: "thanks" }] } },
  },
  edges: [
    { from: "ask", to: "done" },
    { from: "done", to: "END" },
  ],
};
