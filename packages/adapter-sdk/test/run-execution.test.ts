import { describe, expect, it } from "vitest";
import {
  type ExecutionAdapter,
  type ExecutionEvent,
  runExecution,
  streamExecution,
} from "../src/index.js";
import { request } from "./support.js";

/** A backend that never returns and ignores aborts. */
const stuck: ExecutionAdapter = { backendId: "stuck", execute: () => new Promise(() => {}) };

/** A backend that stops when aborted, after `ms` otherwise. */
const polite = (ms: number): ExecutionAdapter => ({
  backendId: "polite",
  execute: (r) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ status: "completed", messages: [] }), ms);
      r.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve({ status: "cancelled", messages: [] });
      });
    }),
});

describe("runExecution", () => {
  it("turns maxElapsedMs into a retryable timeout failure, promptly", async () => {
    const started = Date.now();
    const result = await runExecution(
      polite(10_000),
      request({ requirements: { maxElapsedMs: 100 } }),
    );
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result).toMatchObject({ status: "failed", category: "timeout", retryable: true });
  });

  it("never hangs on a backend that ignores the abort: the grace period ends it", async () => {
    const started = Date.now();
    const result = await runExecution(stuck, request({ requirements: { maxElapsedMs: 50 } }), {
      graceMs: 100,
    });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result).toMatchObject({ status: "failed", category: "timeout" });
    const abort = new AbortController();
    const pending = runExecution(stuck, request({ signal: abort.signal }), { graceMs: 50 });
    abort.abort();
    expect(await pending).toEqual({ status: "cancelled", messages: [] });
  });

  it("reports a cancel as cancelled", async () => {
    const abort = new AbortController();
    const pending = runExecution(polite(10_000), request({ signal: abort.signal }));
    setTimeout(() => abort.abort(), 20);
    expect((await pending).status).toBe("cancelled");
  });

  it("turns a throwing backend into a failed result", async () => {
    const broken: ExecutionAdapter = {
      backendId: "broken",
      execute: async () => {
        throw new Error("exploded");
      },
    };
    expect(await runExecution(broken, request())).toMatchObject({
      status: "failed",
      category: "internal_error",
      message: expect.stringContaining("exploded"),
    });
  });

  it("drops events a backend reports after its result", async () => {
    let late: ((e: ExecutionEvent) => void) | undefined;
    const chatty: ExecutionAdapter = {
      backendId: "chatty",
      execute: async (r) => {
        r.onEvent?.({ kind: "text_delta", text: "early" });
        late = r.onEvent;
        return { status: "completed", messages: [] };
      },
    };
    const seen: ExecutionEvent[] = [];
    await runExecution(chatty, request({ onEvent: (e) => seen.push(e) }));
    late?.({ kind: "text_delta", text: "late" });
    expect(seen).toEqual([{ kind: "text_delta", text: "early" }]);
  });
});

describe("streamExecution", () => {
  it("yields progress, then exactly one turn_finished", async () => {
    const events: ExecutionEvent[] = [];
    for await (const event of streamExecution(async (r) => {
      r.onEvent?.({ kind: "text_delta", text: "a" });
      r.onEvent?.({ kind: "turn_finished", result: { status: "cancelled", messages: [] } });
      r.onEvent?.({ kind: "text_delta", text: "b" });
      return { status: "completed", messages: [] };
    }, request())) {
      events.push(event);
    }
    expect(events.map((e) => e.kind)).toEqual(["text_delta", "text_delta", "turn_finished"]);
    expect(events.at(-1)).toEqual({
      kind: "turn_finished",
      result: { status: "completed", messages: [] },
    });
  });
});
