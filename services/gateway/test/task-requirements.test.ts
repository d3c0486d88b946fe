// A REST task's own `requirements` (POST /v1/sessions/{id}/tasks): the agent
// definition's routing vocabulary, read into the proto the tasks service
// narrows and negotiates; a bad entry is a 400 naming the field.
import { Requirement, TraceDepth } from "@trellis/contracts/adapters";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { toHarnError } from "../src/domain/errors.js";
import { requirementsFromJson } from "../src/http/routes/tasks.js";

describe("REST task requirements", () => {
  it("reads levels, trace depth and a time limit", () => {
    const parsed = requirementsFromJson({
      approval_interrupts: "required",
      tool_use: "forbidden",
      trace_depth: "detailed",
      max_elapsed_ms: 30_000,
    });
    expect(parsed?.approvalInterrupts).toBe(Requirement.REQUIRED);
    expect(parsed?.toolUse).toBe(Requirement.FORBIDDEN);
    expect(parsed?.traceDepth).toBe(TraceDepth.DETAILED);
    expect(parsed?.maxElapsedMs).toBe(30_000);
    expect(parsed?.attachments).toBe(Requirement.UNSPECIFIED);
    expect(requirementsFromJson(undefined)).toBeUndefined();
  });

  it.each([
    [{ tool_use: "sometimes" }, "requirements.tool_use"],
    [{ trace_depth: 3 }, "requirements.trace_depth"],
    [{ max_elapsed_ms: -1 }, "requirements.max_elapsed_ms"],
    [{ max_elapsed_ms: 1.5 }, "requirements.max_elapsed_ms"],
    [{ colour: "blue" }, "requirements"],
  ])("refuses %j naming %s (400)", (raw, param) => {
    let thrown: unknown;
    try {
      requirementsFromJson(raw);
    } catch (error) {
      thrown = error;
    }
    expect(isTrellisError(thrown)).toBe(true);
    const { status, body } = toHarnError(thrown, "r");
    expect(status).toBe(400);
    expect(body.error.param).toBe(param);
  });
});
