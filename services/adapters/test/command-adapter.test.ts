/** The command adapter against the example JSON-lines program. */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { ExecutionRequest } from "@trellis/adapter-sdk";
import { runCollecting, userTurn } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import { describe, expect, it } from "vitest";
import { createCommandAdapter } from "../src/command/command-adapter.js";
import { echoAgentScript } from "./support/processes.js";

const adapter = createCommandAdapter({
  backendId: "echo-command",
  command: [process.execPath, echoAgentScript],
  killGraceMs: 500,
});

const request = (text: string, over: Partial<ExecutionRequest> = {}) =>
  userTurn("echo-command", text, over);

const run = (r: ExecutionRequest) => runCollecting(adapter, r);

describe("command adapter", () => {
  it("declares degraded capabilities honestly: no approval interrupts, opaque continuation", () => {
    expect(adapter.describeCapabilities?.()).toMatchObject({
      approvalInterrupts: "none",
      continuationSupport: "opaque-resume",
      toolUse: "none",
      attachments: false,
      streaming: "native",
    });
  });

  it("streams the program's deltas and builds the answer from them when it sends no message", async () => {
    const { result, events } = await run(request("hello there"));
    expect(result.status).toBe("completed");
    expect(result.messages.map(textOf)).toEqual(["echo: hello there"]);
    const deltas = events
      .filter((e) => e.kind === "text_delta")
      .map((e) => e.kind === "text_delta" && e.text);
    expect(deltas.join("")).toBe("echo: hello there");
    expect(deltas.length).toBeGreaterThan(1);
    expect(result.trace?.stepCount).toBe(1);
  });

  it("passes the program's own tool events through and counts them in the trace", async () => {
    const { result, events } = await run(request("tool"));
    expect(events.map((e) => e.kind)).toEqual(["tool_started", "tool_finished", "step_finished"]);
    expect(result.trace?.toolCallCount).toBe(1);
  });

  it("hands an opaque checkpoint back on resume", async () => {
    const first = await run(request("ask"));
    expect(first.result).toMatchObject({
      status: "suspended",
      checkpoint: { asked: "ask" },
      reason: "clarification",
    });
    if (first.result.status !== "suspended") return;
    const resumed = await run(
      request("ask", { resume: { checkpoint: first.result.checkpoint, payload: { people: 4 } } }),
    );
    expect(resumed.result.messages.map(textOf)).toEqual(['resumed with {"people":4}']);
  });

  it("reports a program that exits without a result, with its stderr", async () => {
    const { result } = await run(request("crash"));
    expect(result).toMatchObject({ status: "failed", category: "backend_execution_error" });
    if (result.status === "failed") expect(result.message).toMatch(/code 3.*boom/);
  });

  it("refuses output that is not an ExecutionEvent", async () => {
    const started = Date.now();
    const { result } = await run(request("garbage"));
    expect(result).toMatchObject({ status: "failed", category: "invalid_backend_output" });
    // The program is stopped, not waited for.
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("stops the program on cancel", async () => {
    const abort = new AbortController();
    const pending = run(request("sleep 10000", { signal: abort.signal }));
    setTimeout(() => abort.abort(), 300);
    const started = Date.now();
    const { result } = await pending;
    expect(result.status).toBe("cancelled");
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("reports a missing executable as a failed result", async () => {
    const missing = createCommandAdapter({ backendId: "nope", command: ["/nonexistent/agent"] });
    const result = await missing.execute(request("hi"));
    expect(result).toMatchObject({ status: "failed", category: "backend_execution_error" });
  });
});

describe("command adapter worker main (--grpc-url)", () => {
  // Garbage URLs are refused before anything starts: a clear message, exit 2.
  // One process each; the cases differ in what is wrong.
  const root = fileURLToPath(new URL("../../..", import.meta.url));
  const cases: [string, string, RegExp][] = [
    ["text", "not a url", /is not a URL/],
    ["another scheme", "ftp://127.0.0.1:1", /has scheme ftp: \(expected http: or https:\)/],
    ["a 3000-character host", `http://${"a".repeat(3000)}`, /longer than 2048 characters/],
  ];
  it.each(cases)(
    "refuses %s with exit 2",
    (_label, garbage, expected) => {
      const run = spawnSync(
        process.execPath,
        [
          "--import",
          "tsx",
          "services/adapters/src/command/main.ts",
          "--backend",
          "cmd-bad",
          "--grpc-url",
          garbage,
          "--",
          process.execPath,
          "-e",
          "",
        ],
        { cwd: root, encoding: "utf8", timeout: 60_000 },
      );
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(expected);
      expect(run.stderr).toMatch(/usage: main.ts/);
      // The bad URL is quoted (clipped), never echoed whole.
      expect(run.stderr.length).toBeLessThan(1000);
      expect(run.stdout).toBe("");
    },
    90_000,
  );
});
