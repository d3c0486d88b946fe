import { describe, expect, it } from "vitest";
import {
  decodeToken,
  encodeToken,
  eventSubject,
  filterSubject,
  signalTokens,
  subjectMatches,
} from "../src/address.js";
import { makeEvent } from "../src/event-log.contract.js";
import { NO_SESSION } from "../src/event-log.js";
import { formatTraceparent, parseTraceparent } from "../src/trace.js";

describe("subject addressing", () => {
  it("keeps readable ids and escapes the rest injectively", () => {
    expect(encodeToken("task_12-a")).toBe("task_12-a");
    const tricky = ["", "_", "__", "_x", "a.b", "a b", "*", ">", "ünï", "🙂", "a\tb", "task_12-a"];
    const encoded = tricky.map(encodeToken);
    expect(new Set(encoded).size).toBe(tricky.length);
    for (const token of encoded) expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(encoded.map(decodeToken)).toEqual(tricky);
    expect(encodeToken("")).toBe(NO_SESSION);
  });

  it("builds subjects that read like sentences", () => {
    const event = makeEvent({ workspaceId: "ws_1", sessionId: "ses_2", resourceId: "task_3" });
    expect(eventSubject("trellis", event)).toBe("trellis.events.ws_1.ses_2.task.task_3");
    const noSession = makeEvent({ workspaceId: "ws_1", resourceId: "task_3" });
    expect(eventSubject("trellis", noSession)).toBe("trellis.events.ws_1._.task.task_3");
    expect(filterSubject("trellis", { workspaceId: "*" })).toBe("trellis.events.>");
    expect(filterSubject("trellis", { workspaceId: "ws_1" })).toBe("trellis.events.ws_1.>");
    expect(filterSubject("trellis", { workspaceId: "ws_1", sessionId: NO_SESSION })).toBe(
      "trellis.events.ws_1._.>",
    );
    expect(
      filterSubject("trellis", { workspaceId: "ws_1", resource: { object: "task", id: "t" } }),
    ).toBe("trellis.events.ws_1.*.task.t");
    expect(signalTokens("task_1.input.q 1")).toBe(`task_1.input.${encodeToken("q 1")}`);
  });

  it("matches subjects like NATS does", () => {
    expect(subjectMatches("a.>", "a.b.c")).toBe(true);
    expect(subjectMatches("a.>", "a")).toBe(false);
    expect(subjectMatches("a.*.c", "a.b.c")).toBe(true);
    expect(subjectMatches("a.*.c", "a.b.d")).toBe(false);
    expect(subjectMatches("a.b", "a.b.c")).toBe(false);
  });
});

describe("traceparent", () => {
  it("formats and parses W3C trace context, refusing malformed ids", () => {
    const header = formatTraceparent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    expect(header).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    expect(parseTraceparent(header)).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
    });
    expect(formatTraceparent("", "00f067aa0ba902b7")).toBeUndefined();
    expect(formatTraceparent("0".repeat(32), "00f067aa0ba902b7")).toBeUndefined();
    expect(parseTraceparent("garbage")).toBeUndefined();
  });
});
