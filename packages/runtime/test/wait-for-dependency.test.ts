// waitForDependency: a dependency that is not up yet is retried with a
// growing delay and logged, until it answers, the startup timeout passes
// (service_unavailable), the start is aborted or the error is one no wait
// can fix.
import { describe, expect, it } from "vitest";
import { isTrellisError } from "../src/errors.js";
import { waitForDependency } from "../src/wait-for-dependency.js";

function recordingLogger() {
  const lines: { msg: string; fields?: Record<string, unknown> }[] = [];
  return {
    lines,
    warn(msg: string, fields?: Record<string, unknown>) {
      lines.push({ msg, ...(fields ? { fields } : {}) });
    },
  };
}

describe("waitForDependency", () => {
  it("retries until the dependency answers, logging each wait", async () => {
    const logger = recordingLogger();
    let calls = 0;
    const value = await waitForDependency(
      "NATS",
      async () => {
        calls += 1;
        if (calls < 3) throw new Error("connection refused");
        return "up";
      },
      { timeoutMs: 10_000, logger },
    );
    expect(value).toBe("up");
    expect(logger.lines).toEqual([
      { msg: "waiting for NATS", fields: { error: "connection refused", retry_in_ms: 100 } },
      { msg: "waiting for NATS", fields: { error: "connection refused", retry_in_ms: 200 } },
    ]);
  });

  it("fails with service_unavailable once the next try would pass the timeout", async () => {
    const failure = await waitForDependency(
      "PostgreSQL",
      async () => {
        throw new Error("refused");
      },
      { timeoutMs: 150, logger: recordingLogger() },
    ).catch((error: unknown) => error);
    expect(isTrellisError(failure) && failure.reason).toBe("service_unavailable");
    expect((failure as Error).message).toBe("PostgreSQL was not reachable within 0 s: refused");
  });

  it("stops waiting at once when the signal aborts", async () => {
    const stop = new AbortController();
    const started = Date.now();
    const waiting = waitForDependency(
      "NATS",
      async () => {
        throw new Error("refused");
      },
      { timeoutMs: 60_000, logger: recordingLogger(), signal: stop.signal },
    ).catch((error: unknown) => error);
    setTimeout(() => stop.abort(), 20);
    const failure = await waiting;
    expect((failure as Error).message).toBe("stopped while waiting for NATS");
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("throws an error no wait can fix at once, without retrying or logging", async () => {
    const logger = recordingLogger();
    const missing = new Error('database "none" does not exist');
    let calls = 0;
    const failure = await waitForDependency(
      "PostgreSQL",
      async () => {
        calls += 1;
        throw missing;
      },
      { timeoutMs: 60_000, logger, permanent: (error) => error === missing },
    ).catch((error: unknown) => error);
    expect(failure).toBe(missing);
    expect(calls).toBe(1);
    expect(logger.lines).toEqual([]);
  });
});
