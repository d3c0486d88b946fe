// What both worker kinds check and settle before they connect.
import { describe, expect, it } from "vitest";
import type { ExecutionAdapter, ExecutionCapabilities } from "../src/index.js";
import { drainExecutions, RunningExecutions, workerSetup } from "../src/worker-setup.js";

const adapter = (backendId: string, capabilities?: unknown): ExecutionAdapter => ({
  backendId,
  ...(capabilities === undefined
    ? {}
    : { describeCapabilities: () => capabilities as ExecutionCapabilities }),
  execute: () => Promise.reject(new Error("not run here")),
});

describe("workerSetup", () => {
  it("applies the defaults and derives a worker id from the backend", () => {
    const setup = workerSetup({ adapter: adapter("echo") });
    expect(setup).toMatchObject({
      backendId: "echo",
      capacity: 1,
      heartbeatMs: 1000,
      graceMs: 2000,
    });
    expect(setup.workerId).toMatch(/^echo-/);
    expect(setup.capabilities.notes.join(" ")).toContain("does not describe its capabilities");
  });

  it("keeps given settings; capacity is a whole number of at least 1", () => {
    const setup = workerSetup({
      adapter: adapter("echo"),
      workerId: "w1",
      capacity: 3.7,
      heartbeatMs: 50,
      graceMs: 10,
    });
    expect(setup).toMatchObject({ workerId: "w1", capacity: 3, heartbeatMs: 50, graceMs: 10 });
    expect(workerSetup({ adapter: adapter("echo"), capacity: -2 }).capacity).toBe(1);
  });

  it("refuses a malformed backend id and invalid capabilities, naming them", () => {
    expect(() => workerSetup({ adapter: adapter("no spaces") })).toThrow(
      'backend id "no spaces" must match',
    );
    expect(() => workerSetup({ adapter: adapter("echo", { schemaVersion: 0 }) })).toThrow(
      /adapter echo describes invalid capabilities: schemaVersion must be a positive integer/,
    );
  });
});

describe("drainExecutions", () => {
  const execution = (settle: (abort: AbortController) => Promise<void>) => {
    const abort = new AbortController();
    return { abort, done: settle(abort) };
  };
  const untilAborted = (abort: AbortController) =>
    new Promise<void>((resolve) => abort.signal.addEventListener("abort", () => resolve()));

  it("aborts what still runs after the grace period, then waits for it", async () => {
    const stuck = execution(untilAborted);
    await drainExecutions(new Map([["b", stuck]]), 0);
    expect(String(stuck.abort.signal.reason)).toContain("the worker is stopping");
  });

  it("aborts nothing that finishes within the grace period", async () => {
    const quick = execution(() => Promise.resolve());
    await drainExecutions(new Map([["a", quick]]), 60_000);
    expect(quick.abort.signal.aborted).toBe(false);
  });

  it("fails on a failed execution unless told to ignore failures", async () => {
    const failing = () => new Map([["a", execution(() => Promise.reject(new Error("boom")))]]);
    await expect(drainExecutions(failing(), 1000)).rejects.toThrow("boom");
    await expect(
      drainExecutions(failing(), 1000, { ignoreFailures: true }),
    ).resolves.toBeUndefined();
  });
});

describe("RunningExecutions", () => {
  it("holds an execution until it is done, counts it finished, and cancels by id", async () => {
    const running = new RunningExecutions();
    const abort = new AbortController();
    const done = new Promise<void>((resolve) =>
      abort.signal.addEventListener("abort", () => resolve()),
    );
    const tracked = running.track("e1", { abort, done });
    expect([running.size, running.completed]).toEqual([1, 0]);
    running.cancel("other", "not this one");
    expect(abort.signal.aborted).toBe(false);
    running.cancel("e1", "canceled by the router");
    await tracked;
    expect(String(abort.signal.reason)).toContain("canceled by the router");
    expect([running.size, running.completed]).toEqual([0, 1]);
  });

  it("counts a failed execution finished and passes its failure on", async () => {
    const running = new RunningExecutions();
    const done = Promise.reject(new Error("boom"));
    await expect(running.track("e1", { abort: new AbortController(), done })).rejects.toThrow(
      "boom",
    );
    expect([running.size, running.completed]).toEqual([0, 1]);
  });
});
