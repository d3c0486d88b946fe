import { describe, expect, it } from "vitest";
import { rpcRuleOf } from "../src/auth/scope-table.js";
import { checkProtocolVersion, currentProtocolVersion } from "../src/domain/protocol.js";
import { hasScope } from "../src/domain/scopes.js";
import { parseSse, sseComment, sseFrame } from "../src/domain/sse.js";
import { Router } from "../src/http/router.js";

describe("SSE framing", () => {
  it("writes id, event and one data line per line, ended by a blank line", () => {
    expect(sseFrame({ id: "evt_1", event: "task.started", data: '{"a":1}' })).toBe(
      'id: evt_1\nevent: task.started\ndata: {"a":1}\n\n',
    );
    expect(sseFrame({ data: "a\nb" })).toBe("data: a\ndata: b\n\n");
    // A field value cannot smuggle in another field.
    expect(sseFrame({ id: "x\nevent: evil", data: "{}" })).toBe("id: x event: evil\ndata: {}\n\n");
    expect(sseComment("ping")).toBe(": ping\n\n");
  });

  it("parses frames back, keeping the incomplete tail", () => {
    const text = `${sseComment("ping")}${sseFrame({ id: "1", event: "k", data: "a\nb" })}id: 2\nda`;
    const { frames, rest } = parseSse(text);
    expect(frames).toEqual([{ comment: "ping" }, { id: "1", event: "k", data: "a\nb" }]);
    expect(rest).toBe("id: 2\nda");
  });
});

describe("protocol version", () => {
  it("accepts the current version only", () => {
    expect(checkProtocolVersion(currentProtocolVersion)).toEqual({
      ok: true,
      version: currentProtocolVersion,
    });
    expect(checkProtocolVersion(` ${currentProtocolVersion} `).ok).toBe(true);
    expect(checkProtocolVersion(undefined)).toEqual({ ok: false, reason: "missing" });
    expect(checkProtocolVersion("")).toEqual({ ok: false, reason: "missing" });
    expect(checkProtocolVersion("agents-protocol-2020-01-01")).toEqual({
      ok: false,
      reason: "unsupported",
      given: "agents-protocol-2020-01-01",
    });
  });
});

describe("scopes", () => {
  it("grants by exact scope, area wildcard or *", () => {
    expect(hasScope(["*"], "tasks:write")).toBe(true);
    expect(hasScope(["tasks:*"], "tasks:write")).toBe(true);
    expect(hasScope(["tasks:read"], "tasks:write")).toBe(false);
    expect(hasScope([], "tasks:read")).toBe(false);
    expect(rpcRuleOf("trellis.tasks.v1.TaskService", "SubmitTask")).toBe("tasks:write");
    expect(rpcRuleOf("trellis.tasks.v1.EventService", "StreamEvents")).toBe("events:read");
    expect(rpcRuleOf("trellis.receipts.v1.ReceiptService", "VerifyReceipt")).toBe("receipts:read");
  });
});

describe("router", () => {
  const router = new Router([
    { method: "GET", path: "/v1/tasks/{task_id}" },
    { method: "POST", path: "/v1/tasks/{task_id}/cancel" },
    { method: "GET", path: "/v1/tasks" },
    { method: "POST", path: "/v1/tasks" },
  ]);
  it("matches params, 405 with allowed methods, 404 otherwise", () => {
    expect(router.match("GET", "/v1/tasks/t%201")).toMatchObject({
      kind: "found",
      params: { task_id: "t 1" },
    });
    expect(router.match("DELETE", "/v1/tasks")).toEqual({
      kind: "method_not_allowed",
      allow: ["GET", "POST"],
    });
    expect(router.match("GET", "/v1/tasks/t1/cancel")).toEqual({
      kind: "method_not_allowed",
      allow: ["POST"],
    });
    expect(router.match("GET", "/v1/nope")).toEqual({ kind: "not_found" });
  });
});
