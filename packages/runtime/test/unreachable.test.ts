// What the error interceptor treats as "a dependency is unreachable"
// (Unavailable, retryable) instead of Internal — what clients of a mesh whose
// Postgres restarts must see (test/faults/restart-infra.int.test.ts).
import { Code } from "@connectrpc/connect";
import { createLogger, toWireError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { isUnreachableError } from "../src/unreachable.js";

const sysError = (code: string) => Object.assign(new Error(`read ${code}`), { code });

describe("unreachable dependencies", () => {
  it("recognises socket errors, Postgres shutdown / connection states and pg's own", () => {
    expect(isUnreachableError(sysError("ECONNRESET"))).toBe(true);
    expect(isUnreachableError(sysError("ECONNREFUSED"))).toBe(true);
    expect(isUnreachableError(Object.assign(new Error("terminating"), { code: "57P01" }))).toBe(
      true,
    );
    expect(isUnreachableError(Object.assign(new Error("conn"), { code: "08006" }))).toBe(true);
    expect(isUnreachableError(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isUnreachableError(new Error("outer", { cause: sysError("EPIPE") }))).toBe(true);
    expect(isUnreachableError(new AggregateError([sysError("ECONNREFUSED")]))).toBe(true);
  });

  it("leaves real bugs and data errors alone", () => {
    expect(isUnreachableError(new TypeError("x is undefined"))).toBe(false);
    expect(isUnreachableError(Object.assign(new Error("dup"), { code: "23505" }))).toBe(false);
    expect(isUnreachableError(sysError("ENOENT"))).toBe(false);
    expect(isUnreachableError(undefined)).toBe(false);
  });

  it("maps to Unavailable with a service_unavailable ErrorDetail, never Internal", () => {
    const logger = createLogger({ service: "t", write: () => {} });
    const wire = toWireError(sysError("ECONNRESET"), logger, "p.S/M", "req-1");
    expect(wire.code).toBe(Code.Unavailable);
    expect(wire.rawMessage).toContain("req-1");
    expect(wire.rawMessage).not.toContain("ECONNRESET");
    expect(wire.details.length).toBe(1);
    expect(toWireError(new TypeError("bug"), logger, "p.S/M", "req-2").code).toBe(Code.Internal);
  });
});
