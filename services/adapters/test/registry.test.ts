import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  BackendRegistry,
  type WorkerAnnouncement,
  type WorkerEntry,
} from "../src/routing/registry.js";
import { capabilities } from "./support/fake-adapters.js";

const announcement = (over: Partial<WorkerAnnouncement> = {}): WorkerAnnouncement => ({
  workerId: "w1",
  backendId: "remote",
  capabilities: capabilities(),
  capacity: 2,
  inFlight: 0,
  hints: { costPerExecution: 0, latencyMs: 0 },
  heartbeatMs: 100,
  leaving: false,
  ...over,
});

describe("BackendRegistry", () => {
  it("drops a worker that misses three heartbeats, and reports it lost", () => {
    let now = 1000;
    const registry = new BackendRegistry({ now: () => now });
    const lost: WorkerEntry[] = [];
    registry.onWorkerLost((w) => lost.push(w));
    expect(registry.announce(announcement())).toEqual({ ttlMs: 300 });
    now += 250;
    expect(registry.sweep()).toEqual([]);
    expect(registry.heartbeat("w1", 1)).toEqual({ ttlMs: 300 });
    now += 299;
    expect(registry.backend("remote")?.inFlight).toBe(1);
    now += 2;
    expect(registry.backend("remote")).toBeUndefined();
    expect(registry.sweep().map((w) => w.workerId)).toEqual(["w1"]);
    expect(lost.map((w) => w.workerId)).toEqual(["w1"]);
    expect(registry.heartbeat("w1", 0)).toBeUndefined();
  });

  it("gives a leaving worker no new work but keeps it until its executions report", () => {
    const registry = new BackendRegistry();
    registry.announce(announcement());
    registry.announce(announcement({ workerId: "w2" }));
    expect(registry.backend("remote")?.capacity).toBe(4);
    registry.announce(announcement({ workerId: "w2", leaving: true }));
    expect(registry.backend("remote")?.workers.map((w) => w.workerId)).toEqual(["w1"]);
    expect(registry.worker("w2")).toBeDefined();
  });

  it("merges the workers of a backend to what all of them can do", () => {
    const registry = new BackendRegistry();
    registry.announce(
      announcement({
        capabilities: capabilities({ approvalInterrupts: "native", attachments: true }),
      }),
    );
    registry.announce(
      announcement({
        workerId: "w2",
        capabilities: capabilities({ approvalInterrupts: "adapter-mediated" }),
      }),
    );
    expect(registry.backend("remote")?.capabilities).toMatchObject({
      approvalInterrupts: "adapter-mediated",
      attachments: false,
    });
  });

  it("refuses an invalid announcement, naming the field", () => {
    const registry = new BackendRegistry();
    const cases: [Partial<WorkerAnnouncement>, string][] = [
      [{ workerId: "a b" }, "worker.worker_id"],
      [{ backendId: "" }, "worker.backend_id"],
      [{ capacity: 0 }, "worker.capacity"],
      [{ heartbeatMs: 1 }, "worker.heartbeat_interval_ms"],
      [
        { capabilities: { ...capabilities(), traceDepth: "deep" as never } },
        "worker.capabilities.traceDepth",
      ],
    ];
    for (const [over, param] of cases) {
      try {
        registry.announce(announcement(over));
        expect.unreachable(JSON.stringify(over));
      } catch (error) {
        expect(isTrellisError(error) && [error.reason, error.param]).toEqual([
          "adapter_registration_invalid",
          param,
        ]);
      }
    }
  });
});
