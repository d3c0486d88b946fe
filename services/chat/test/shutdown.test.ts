// An open Subscribe stream must not hold a shutdown for the whole grace period:
// it ends cleanly when the host starts closing, and the client resumes later
// from its cursor.
import { describe, expect, it } from "vitest";
import { startChatHarness } from "./support.js";

describe("chat shutdown", () => {
  it("ends open Subscribe streams when the host starts closing", async () => {
    const harness = await startChatHarness();
    // Subscribe answers NotFound for a session that does not exist: create it first.
    await harness.sessions.createSession({ sessionId: "ses_shutdown_1" });
    const stream = harness.chat.subscribe({ sessionId: "ses_shutdown_1" });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value?.kind.case).toBe("subscribed");
    const rest = (async () => {
      const seen: string[] = [];
      for (;;) {
        const next = await iterator.next();
        if (next.done) return seen;
        seen.push(next.value.kind.case ?? "");
      }
    })();
    const started = performance.now();
    // A grace period far longer than the stream should take to end.
    await harness.trellis.close({ graceMs: 10_000 });
    const elapsed = performance.now() - started;
    expect(await rest).toEqual([]);
    expect(elapsed).toBeLessThan(5_000);
  });
});
