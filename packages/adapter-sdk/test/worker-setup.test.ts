// What both worker kinds check and settle before they connect.
import { describe, expect, it } from "vitest";
import type { ExecutionAdapter, ExecutionCapabilities } from "../src/index.js";
import { workerSetup } from "../src/worker-setup.js";

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
