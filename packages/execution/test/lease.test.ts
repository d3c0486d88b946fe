// The lease rules both remote dispatchers share (routing/lease.ts).
import { describe, expect, it } from "vitest";
import { unavailableBackend } from "../src/routing/lease.js";

describe("unavailableBackend", () => {
  it("lets a queued execution wait from the first check that saw no worker, then fails it retryably", () => {
    const pending: { orphanedSince?: number } = {};
    expect(unavailableBackend(pending, "b1", 1000, 500)).toBeUndefined();
    expect(pending.orphanedSince).toBe(1000);
    expect(unavailableBackend(pending, "b1", 1499, 500)).toBeUndefined();
    expect(unavailableBackend(pending, "b1", 1500, 500)).toEqual({
      status: "failed",
      messages: [],
      category: "backend_unavailable",
      message: "backend b1 has had no live worker for 500 ms",
      retryable: true,
    });
  });
});
