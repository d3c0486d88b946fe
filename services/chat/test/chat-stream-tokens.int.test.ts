// harness-chat §9 with a backend that streams tokens: SendStreaming relays the
// turn's agent.text_delta events as text_delta chunks, in order and before the
// message they add up to, then the message and one outcome. Distributed mode:
// tasks and chat as separate services on a real PostgreSQL and JetStream, so
// the deltas travel tasks' outbox → the log → StreamEvents → chat.
import { chatToMessage, textOf } from "@trellis/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DistributedChat, scriptedAgent, startDistributedChat } from "./support.js";

let h: DistributedChat;

beforeAll(async () => {
  h = await startDistributedChat();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

describe("SendStreaming with streamed tokens", () => {
  it("relays the turn's text deltas as text_delta chunks before the message", async () => {
    const reply = "Tokens arrive a few characters at a time, then the whole message.";
    const agentId = await scriptedAgent(h, "token-streamer", {
      entry: "reply",
      nodes: {
        reply: {
          update: {
            stream: { chunk_chars: 3, delay_ms: 15 },
            messages: [{ role: "assistant", content: reply }],
          },
        },
      },
      edges: [{ from: "reply", to: "END" }],
    });
    const trace: string[] = [];
    let deltas = "";
    let deltaChunks = 0;
    for await (const r of h.chat.sendStreaming({
      sessionId: `ses_tokens_${Date.now().toString(36)}`,
      agentId,
      message: chatToMessage({ role: "user", content: "go" }),
    })) {
      if (r.kind.case === "outcome") {
        trace.push(`outcome:${r.kind.value.kind.case}`);
        continue;
      }
      const chunk = r.kind.case === "chunk" ? r.kind.value.kind : undefined;
      if (chunk?.case === "textDelta") {
        deltas += chunk.value.text;
        deltaChunks += 1;
        if (trace.at(-1) !== "deltas") trace.push("deltas");
      } else if (chunk?.case === "message") {
        trace.push(`message:${textOf(chunk.value)}`);
      } else {
        trace.push(`other:${chunk?.case}`);
      }
    }
    expect(trace).toEqual(["deltas", `message:${reply}`, "outcome:completed"]);
    expect(deltas).toBe(reply);
    // ~22 chunks over ~300 ms, recorded in 50 ms batches: several events, not one.
    expect(deltaChunks).toBeGreaterThanOrEqual(2);
  });
});
