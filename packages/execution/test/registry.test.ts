import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  BackendRegistry,
  MAX_WORKERS,
  type WorkerAnnouncement,
  type WorkerEntry,
} from "../src/routing/registry.js";
import { capabilities } from "../src/testing/index.js";

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
      [{ capacity: 1e9 }, "worker.capacity"],
      [{ hints: { costPerExecution: Number.POSITIVE_INFINITY, latencyMs: 0 } }, "worker.hints"],
      // ~1.1 MB of notes once answered 500 after half applying the registration.
      [
        { capabilities: { ...capabilities(), notes: ["x".repeat(1_100_000)] } },
        "worker.capabilities.notes[0]",
      ],
      [
        { capabilities: { ...capabilities(), notes: Array.from({ length: 50_000 }, () => "n") } },
        "worker.capabilities.notes",
      ],
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

  it("keeps at most MAX_WORKERS remote workers, and still refreshes known ones", () => {
    const registry = new BackendRegistry();
    for (let i = 0; i < MAX_WORKERS; i++) registry.announce(announcement({ workerId: `w${i}` }));
    const error = (() => {
      try {
        registry.announce(announcement({ workerId: "one_more" }));
      } catch (e) {
        return e;
      }
    })();
    expect(isTrellisError(error) && error.reason).toBe("rate_limited");
    expect(registry.announce(announcement({ workerId: "w0", inFlight: 1 })).ttlMs).toBe(300);
  });
});
