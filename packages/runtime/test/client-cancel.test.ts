// A client that leaves a call (an HTTP/2 RST_STREAM on its own stream) is a
// cancellation: the call ends Canceled and nothing is logged above debug.
// The same reset seen on a downstream call stays a warning (Unavailable).
import { Code, ConnectError } from "@connectrpc/connect";
import { createLogger, toWireError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";

const resetError = () =>
  new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);

function capture() {
  const lines: { level: string; msg: string }[] = [];
  const logger = createLogger({
    service: "t",
    level: "debug",
    write: (chunk) => {
      for (const line of chunk.split("\n").filter((l) => l !== "")) lines.push(JSON.parse(line));
    },
  });
  return { logger, lines };
}

describe("client cancellation", () => {
  it("is Canceled and logged at debug only when the call's own stream was reset", () => {
    const { logger, lines } = capture();
    const controller = new AbortController();
    controller.abort(resetError());
    const wire = toWireError(resetError(), logger, "p.S/Subscribe", "req-1", controller.signal);
    logger.flush();
    expect(wire.code).toBe(Code.Canceled);
    expect(wire.details.length).toBe(1);
    expect(lines.map((l) => l.level)).toEqual(["debug"]);
  });

  it("still warns when a downstream call's stream was reset", () => {
    const { logger, lines } = capture();
    const wire = toWireError(resetError(), logger, "p.S/Subscribe", "req-2");
    logger.flush();
    expect(wire.code).toBe(Code.Unavailable);
    expect(lines.map((l) => l.level)).toEqual(["warn"]);
  });
});
