// Subscribe links each call with the host's `closing` signal, which lives as
// long as the process: once a call is over, `closing` must hold nothing of
// it — not even when the client went away while the stream was suspended at
// a yield (Connect then never resumes it). AbortSignal.any left an entry in
// `closing` per call for good (Node 20).
import { getEventListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import { ChatService, type SubscribeRequest } from "@trellis/contracts/chat";
import { directCallContext } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import { loadChatConfig } from "../src/config.js";
import { subscribe } from "../src/handlers/subscribe.js";
import type { TasksPort } from "../src/handlers/tasks-port.js";

/** What `signal` keeps of other signals: abort listeners and signals derived from it. */
function heldBy(signal: AbortSignal): number {
  const dependants = Object.getOwnPropertySymbols(signal).find(
    (s) => s.description === "kDependantSignals",
  );
  const derived = dependants
    ? ((signal as unknown as Record<symbol, Set<unknown> | undefined>)[dependants]?.size ?? 0)
    : 0;
  return getEventListeners(signal, "abort").length + derived;
}

function openSubscribe(closing: AbortSignal) {
  const client = new AbortController();
  const context = directCallContext(ChatService.method.subscribe, client.signal);
  // From the origin of a session that has no events yet: the stream waits for them.
  const port = {
    sessions: {
      async getSession() {
        return { session: { id: "ses_leak" } };
      },
    },
    events: {
      // biome-ignore lint/correctness/useYield: a stream that fails at once
      async *streamEvents() {
        throw new ConnectError("no such session", Code.NotFound);
      },
    },
  } as unknown as TasksPort;
  const deps = { port, config: loadChatConfig({}), closing };
  const request = { sessionId: "ses_leak", afterCursor: "origin" } as SubscribeRequest;
  return { stream: subscribe(deps, request, context), client };
}

describe("Subscribe leaves nothing on the host's closing signal", () => {
  it("when clients go away while their streams wait at a yield", async () => {
    const closing = new AbortController();
    for (let i = 0; i < 3; i++) {
      const { stream, client } = openSubscribe(closing.signal);
      expect((await stream.next()).value?.kind?.case).toBe("subscribed");
      // The client leaves; the stream is never resumed.
      client.abort(new Error("client gone"));
    }
    expect(heldBy(closing.signal)).toBe(0);
  });

  it("and a stream still ends when the host starts closing", async () => {
    const closing = new AbortController();
    const { stream } = openSubscribe(closing.signal);
    await stream.next();
    const next = stream.next();
    // Let it find that the session has no events yet and wait for them.
    await new Promise((resolve) => setTimeout(resolve, 0));
    closing.abort(new Error("shutting down"));
    expect((await next).done).toBe(true);
    expect(heldBy(closing.signal)).toBe(0);
  });
});
