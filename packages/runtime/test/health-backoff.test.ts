// The health monitor's dependency probes back off while every dependency
// stays healthy and nobody asks, and probe at the base interval again on a
// failure or a health request. Fake timers: probe counts, never wall time.
import { create } from "@bufbuild/protobuf";
import { health } from "@trellis/contracts/grpc";
import { directCallContext } from "@trellis/testkit";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createHealthImpl, HealthMonitor } from "../src/health.js";
import { captureLogger } from "./support.js";

describe("health probes while idle", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function monitor(probe: () => void) {
    const { logger } = captureLogger("health");
    return new HealthMonitor(
      {
        pollIntervalMs: 1000,
        idlePollMaxMs: 8000,
        dependencies: [{ name: "db", check: probe }],
      },
      logger,
    );
  }

  it("probes less and less often while healthy, at most every idlePollMaxMs", async () => {
    let probes = 0;
    const m = monitor(() => {
      probes++;
    });
    await m.start();
    expect(probes).toBe(1);
    await vi.advanceTimersByTimeAsync(60_000);
    // Without back-off: 60 more probes. With it: at 1, 3, 7, 15, then every 8 s.
    expect(probes).toBe(1 + 9);
    m.shutdown();
    const after = probes;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(probes).toBe(after);
  });

  it("goes back to the base interval when a probe fails, and stays there while failing", async () => {
    let probes = 0;
    let down = false;
    const m = monitor(() => {
      probes++;
      if (down) throw new Error("db down");
    });
    await m.start();
    await vi.advanceTimersByTimeAsync(30_000); // backed off to 8 s
    expect(m.status()).toBe("SERVING");
    down = true;
    // Within one long wait the failure is seen, then every second.
    await vi.advanceTimersByTimeAsync(8000);
    expect(m.status()).toBe("NOT_SERVING");
    const seen = probes;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probes - seen).toBe(10);
    down = false;
    await vi.advanceTimersByTimeAsync(1000);
    expect(m.status()).toBe("SERVING");
    m.shutdown();
  });

  it("a Check brings probing back to the base interval at once", async () => {
    let probes = 0;
    const m = monitor(() => {
      probes++;
    });
    const impl = createHealthImpl(m);
    await m.start();
    await vi.advanceTimersByTimeAsync(30_000); // waiting 8 s between probes now
    const before = probes;
    // A Check now: the wait in progress ends within a second of its start.
    await impl.check(
      create(health.HealthCheckRequestSchema, { service: "" }),
      directCallContext(health.Health.method.check, new AbortController().signal),
    );
    await vi.advanceTimersByTimeAsync(1000);
    expect(probes).toBe(before + 1);
    m.shutdown();
  });
});
