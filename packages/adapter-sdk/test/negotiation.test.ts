import { chatToMessage } from "@trellis/messages";
import { describe, expect, it } from "vitest";
import {
  type ExecutionCapabilities,
  effectiveRequirements,
  MINIMAL_CAPABILITIES,
  narrowRequirements,
  negotiateCapabilities,
  weakestCapabilities,
} from "../src/index.js";
import { request } from "./support.js";

const caps = (over: Partial<ExecutionCapabilities> = {}): ExecutionCapabilities => ({
  ...MINIMAL_CAPABILITIES,
  notes: [],
  ...over,
});

const withImage = chatToMessage({
  role: "user",
  content: [
    { type: "text", text: "what is this?" },
    { type: "image", source: { type: "url", url: "https://example.test/cat.png" } },
  ],
});

describe("negotiateCapabilities", () => {
  it("is supported and not degraded when nothing is asked", () => {
    const n = negotiateCapabilities(caps(), request());
    expect(n).toMatchObject({ supported: true, degraded: false, reasons: [] });
  });

  it("blocks each required capability the backend lacks, with its code", () => {
    const cases = [
      [{ toolUse: "required" }, "tool_use_unsupported"],
      [{ structuredToolCalls: "required" }, "structured_tool_calls_unsupported"],
      [{ continuationSupport: "required" }, "continuation_unsupported"],
      [{ approvalInterrupts: "required" }, "approval_interrupt_unsupported"],
      [{ attachments: "required" }, "attachments_unsupported"],
      [{ streaming: "required" }, "streaming_unsupported"],
    ] as const;
    for (const [requirements, code] of cases) {
      const n = negotiateCapabilities(caps(), request({ requirements }));
      expect(n.supported).toBe(false);
      expect(n.degraded).toBe(false);
      expect(n.reasons).toEqual([expect.objectContaining({ code, severity: "blocking" })]);
    }
  });

  it("degrades, with a warning per loss, when preferred capabilities are missing", () => {
    const n = negotiateCapabilities(
      caps(),
      request({
        requirements: {
          structuredToolCalls: "preferred",
          continuationSupport: "preferred",
          approvalInterrupts: "preferred",
          streaming: "preferred",
          traceDepth: "detailed",
        },
      }),
    );
    expect(n.supported).toBe(true);
    expect(n.degraded).toBe(true);
    expect(n.reasons.map((r) => [r.code, r.severity])).toEqual([
      ["structured_tool_calls_unsupported", "warning"],
      ["continuation_unsupported", "warning"],
      ["approval_interrupt_unsupported", "warning"],
      ["trace_depth_reduced", "warning"],
      ["streaming_unsupported", "warning"],
    ]);
  });

  it("needs a native interrupt for required approvals: gating around the backend is not one", () => {
    const required = request({ requirements: { approvalInterrupts: "required" } });
    expect(
      negotiateCapabilities(caps({ approvalInterrupts: "adapter-mediated" }), required).supported,
    ).toBe(false);
    expect(negotiateCapabilities(caps({ approvalInterrupts: "native" }), required).supported).toBe(
      true,
    );
  });

  it("treats attachments in the input as required; forbidding them refuses such input", () => {
    const n = negotiateCapabilities(caps(), request({ input: withImage }));
    expect(n.supported).toBe(false);
    expect(n.reasons[0]).toMatchObject({
      code: "attachments_unsupported",
      metadata: { attachments: 1 },
    });
    expect(
      negotiateCapabilities(caps({ attachments: true }), request({ input: withImage })).supported,
    ).toBe(true);
    const forbidden = negotiateCapabilities(
      caps({ attachments: true }),
      request({ input: withImage, requirements: { attachments: "forbidden" } }),
    );
    expect(forbidden.supported).toBe(false);
  });

  it("refuses a newer contract version than the backend understands", () => {
    const n = negotiateCapabilities(caps(), request({ schemaVersion: 2 }));
    expect(n.reasons.map((r) => r.code)).toEqual(["schema_version_unsupported"]);
  });

  it("describes what the request will really get (forbidden tools: none)", () => {
    const n = negotiateCapabilities(
      caps({ toolUse: "native-iterative", streaming: "native" }),
      request({ requirements: { toolUse: "forbidden", streaming: "forbidden" } }),
    );
    expect(n.effectiveCapabilities.toolUse).toBe("none");
    expect(n.effectiveCapabilities.streaming).toBe("none");
  });

  it("warns about context pressure on a small-context backend with a long history", () => {
    const history = Array.from({ length: 60 }, () => chatToMessage({ role: "user", content: "x" }));
    const n = negotiateCapabilities(caps({ maxContextStrategy: "small" }), request({ history }));
    expect(n).toMatchObject({ supported: true, degraded: true });
    expect(n.reasons[0]?.code).toBe("context_pressure_expected");
  });
});

describe("effectiveRequirements", () => {
  it("lets the request override the agent's policy, field by field", () => {
    const r = request({
      agent: {
        id: "agt_1",
        backend: "b",
        definition: {},
        tools: [],
        routing: { requirements: { traceDepth: "detailed", approvalInterrupts: "required" } },
      },
      requirements: { approvalInterrupts: "preferred" },
    });
    expect(effectiveRequirements(r)).toEqual({
      traceDepth: "detailed",
      approvalInterrupts: "preferred",
    });
  });
});

describe("narrowRequirements", () => {
  it("takes the stricter value of each field and ignores weaker ones", () => {
    const { requirements, conflicts } = narrowRequirements(
      {
        toolUse: "allowed",
        approvalInterrupts: "preferred",
        traceDepth: "detailed",
        streaming: "required",
        maxElapsedMs: 30_000,
      },
      {
        toolUse: "forbidden",
        approvalInterrupts: "none",
        traceDepth: "minimal",
        streaming: "preferred",
        maxElapsedMs: 5_000,
        attachments: "required",
      },
    );
    expect(conflicts).toEqual([]);
    expect(requirements).toEqual({
      toolUse: "forbidden",
      approvalInterrupts: "preferred",
      traceDepth: "detailed",
      streaming: "required",
      maxElapsedMs: 5_000,
      attachments: "required",
    });
  });

  it("names every field where the request contradicts the agent", () => {
    const { conflicts } = narrowRequirements(
      { toolUse: "forbidden", structuredToolCalls: "required" },
      { toolUse: "required", structuredToolCalls: "forbidden" },
    );
    expect(conflicts.map((c) => c.field)).toEqual(["toolUse", "structuredToolCalls"]);
    expect(conflicts[0]?.message).toMatch(/required but the agent's routing requires forbidden/);
  });
});

describe("weakestCapabilities", () => {
  it("promises only what every worker of a backend can do", () => {
    const merged = weakestCapabilities([
      caps({
        toolUse: "native-iterative",
        attachments: true,
        traceDepth: "detailed",
        notes: ["a"],
      }),
      caps({
        toolUse: "adapter-mediated",
        attachments: false,
        traceDepth: "standard",
        notes: ["b"],
      }),
    ]);
    expect(merged).toMatchObject({
      toolUse: "adapter-mediated",
      attachments: false,
      traceDepth: "standard",
      notes: ["a", "b"],
    });
  });
});
