import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  ExecutionCapabilitiesSchema,
  ExecutionEventSchema,
  ExecutionRequestSchema,
  ExecutionRequirementsSchema,
  ExecutionResultSchema,
  Requirement,
  SecretsResponseSchema,
  ToolUseSupport,
} from "@trellis/contracts/adapters";
import { chatToMessage } from "@trellis/messages";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  capabilitiesFromProto,
  capabilitiesToProto,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionRequest,
  type ExecutionResult,
  eventFromProto,
  eventToProto,
  negotiateCapabilities,
  negotiationFromProto,
  negotiationToProto,
  requestFromProto,
  requestToProto,
  requirementsFromProto,
  resultFromProto,
  resultToProto,
  type VaultGrant,
  vaultGrantsFromProto,
  vaultGrantsToProto,
} from "../src/index.js";

const user = chatToMessage({ role: "user", content: "hello" });
const assistant = chatToMessage({ role: "assistant", content: "hi there" });

const capabilities: ExecutionCapabilities = {
  schemaVersion: 1,
  toolUse: "native-iterative",
  structuredToolCalls: true,
  continuationSupport: "structured",
  approvalInterrupts: "native",
  traceDepth: "detailed",
  attachments: false,
  streaming: "native",
  maxContextStrategy: "large",
  notes: ["a note"],
};

/** A request with every field set. */
function fullRequest(signal: AbortSignal): ExecutionRequest {
  return {
    schemaVersion: 1,
    taskId: "tsk_1",
    sessionId: "ses_1",
    workspaceId: "ws_1",
    traceId: "0af7651916cd43dd8448eb211c80319c",
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    agent: {
      id: "agt_1",
      backend: "harness",
      definition: { model: "gpt", nested: { n: 1, list: [true, null, "x"] } },
      tools: ["search", "email"],
      safeToRetry: true,
      routing: {
        allowedBackends: ["harness", "harness-b"],
        pinnedBackend: "harness",
        preference: "latency",
        requirements: { approvalInterrupts: "required", traceDepth: "standard" },
      },
    },
    history: [user, assistant],
    input: user,
    resume: { checkpoint: { node: "wait", step: 3 }, payload: { approved: true } },
    requirements: {
      toolUse: "allowed",
      structuredToolCalls: "preferred",
      continuationSupport: "none",
      approvalInterrupts: "preferred",
      traceDepth: "detailed",
      attachments: "forbidden",
      streaming: "required",
      maxElapsedMs: 30_000,
    },
    toolDescriptors: [
      {
        name: "email",
        description: "send an email",
        inputSchema: { type: "object", properties: { to: { type: "string" } } },
        requiresApproval: true,
        metadata: { risk: "high" },
      },
      { name: "search" },
    ],
    metadata: { source: "test" },
    signal,
  };
}

/** TS → proto → bytes → proto → TS. */
function roundTripRequest(request: ExecutionRequest, signal: AbortSignal): ExecutionRequest {
  const bytes = toBinary(ExecutionRequestSchema, requestToProto(request));
  return requestFromProto(fromBinary(ExecutionRequestSchema, bytes), { signal });
}

function roundTripResult(result: ExecutionResult): ExecutionResult {
  const bytes = toBinary(ExecutionResultSchema, resultToProto(result));
  return resultFromProto(fromBinary(ExecutionResultSchema, bytes));
}

function roundTripEvent(event: ExecutionEvent): ExecutionEvent {
  const bytes = toBinary(ExecutionEventSchema, eventToProto(event));
  return eventFromProto(fromBinary(ExecutionEventSchema, bytes));
}

function contractError(fn: () => unknown): { reason: string; param: string | undefined } {
  try {
    fn();
  } catch (error) {
    if (isTrellisError(error)) return { reason: error.reason, param: error.param };
    throw error;
  }
  throw new Error("expected a contract error");
}

describe("TS ↔ proto mapping of the execution seam", () => {
  it("round-trips a request with every field set, correlation ids included", () => {
    const signal = new AbortController().signal;
    const request = fullRequest(signal);
    expect(roundTripRequest(request, signal)).toEqual(request);
    const pb = requestToProto(request);
    expect(pb.correlation).toMatchObject({
      turnId: "tsk_1",
      sessionId: "ses_1",
      agentId: "agt_1",
      workspaceId: "ws_1",
      traceId: request.traceId,
    });
    expect(pb.requirements?.maxElapsedMs).toBe(30_000);
  });

  it("round-trips a minimal request without inventing fields", () => {
    const signal = new AbortController().signal;
    const minimal: ExecutionRequest = {
      taskId: "tsk_2",
      sessionId: "ses_2",
      workspaceId: "ws_2",
      agent: { id: "agt_2", backend: "scripted", definition: {}, tools: [] },
      history: [],
      input: user,
      signal,
    };
    expect(roundTripRequest(minimal, signal)).toEqual({ ...minimal, schemaVersion: 1 });
  });

  it("round-trips every result outcome with its details", () => {
    const results: ExecutionResult[] = [
      {
        status: "completed",
        messages: [assistant],
        schemaVersion: 1,
        backendId: "harness",
        degradation: [{ code: "trace_depth_reduced", severity: "warning", message: "less trace" }],
        usage: { inputTokens: 12, outputTokens: 34, costUnits: 0.5, latencyMs: 120 },
        trace: {
          startedAt: "2026-01-01T00:00:00.000Z",
          completedAt: "2026-01-01T00:00:01.250Z",
          stepCount: 2,
          toolCallCount: 1,
          degraded: true,
        },
      },
      {
        status: "suspended",
        messages: [assistant],
        signalLabel: "approval",
        metadata: { tool: "email" },
        kind: "input",
        checkpoint: { node: "wait", calls: [1, 2] },
        reason: "approval",
        approvalRequest: { reason: "send email", approvalKey: "call_1", metadata: { to: "bob" } },
      },
      {
        status: "suspended",
        messages: [],
        signalLabel: "login",
        metadata: {},
        kind: "auth",
        checkpoint: null,
      },
      {
        status: "failed",
        messages: [],
        category: "unsupported",
        message: "no backend",
        retryable: false,
        reasons: [
          {
            code: "attachments_unsupported",
            severity: "blocking",
            message: "no attachments",
            metadata: { backend: "scripted" },
          },
        ],
      },
      { status: "cancelled", messages: [assistant] },
    ];
    for (const result of results) {
      const back = roundTripResult(result);
      expect(back).toEqual({ ...result, schemaVersion: 1 });
    }
  });

  it("round-trips every event kind", () => {
    const events: ExecutionEvent[] = [
      { kind: "text_delta", text: "hel", index: 2 },
      { kind: "text_delta", text: "lo" },
      { kind: "thinking_delta", text: "hmm" },
      { kind: "message", message: assistant },
      { kind: "tool_call_delta", toolCallId: "c1", name: "email", argsDelta: '{"to":' },
      { kind: "tool_call_delta", toolCallId: "c1", argsDelta: '"bob"}' },
      { kind: "tool_started", toolCallId: "c1", name: "email", input: { to: "bob" } },
      {
        kind: "tool_started",
        toolCallId: "c2",
        name: "mcp__calc__add",
        input: { a: 2 },
        mcpServer: "calc",
      },
      { kind: "tool_finished", toolCallId: "c1", name: "email", status: "denied" },
      { kind: "step_finished", iteration: 3, usage: { inputTokens: 5, outputTokens: 7 } },
      {
        kind: "routed",
        backendId: "harness",
        workerId: "w1",
        attempt: 2,
        degraded: true,
        reasons: [{ code: "streaming_unsupported", severity: "warning", message: "no deltas" }],
      },
      {
        kind: "turn_finished",
        result: { status: "completed", messages: [assistant], schemaVersion: 1 },
      },
    ];
    for (const event of events) expect(roundTripEvent(event)).toEqual(event);
  });

  it("round-trips capabilities and negotiations", () => {
    expect(capabilitiesFromProto(capabilitiesToProto(capabilities))).toEqual(capabilities);
    const signal = new AbortController().signal;
    const negotiation = negotiateCapabilities(
      { ...capabilities, attachments: false, traceDepth: "minimal" },
      { ...fullRequest(signal), requirements: { traceDepth: "detailed", attachments: "required" } },
    );
    expect(negotiation.reasons.length).toBeGreaterThan(0);
    expect(negotiationFromProto(negotiationToProto(negotiation))).toEqual(negotiation);
  });

  it("refuses proto values a field does not accept, naming the field", () => {
    // tool_use takes forbidden / allowed / required, not preferred.
    const bad = create(ExecutionRequirementsSchema, { toolUse: Requirement.PREFERRED });
    expect(contractError(() => requirementsFromProto(bad))).toEqual({
      reason: "execution_contract_invalid",
      param: "requirements.tool_use",
    });
    // Capabilities must be complete: UNSPECIFIED is not a capability.
    const partial = create(ExecutionCapabilitiesSchema, {
      schemaVersion: 1,
      toolUse: ToolUseSupport.NONE,
    });
    expect(contractError(() => capabilitiesFromProto(partial)).param).toBe(
      "capabilities.continuation_support",
    );
    // A request needs its turn id, backend and input.
    const signal = new AbortController().signal;
    expect(
      contractError(() => requestFromProto(create(ExecutionRequestSchema, {}), { signal })).param,
    ).toBe("request.correlation.turn_id");
    // A result must say how it ended.
    expect(contractError(() => resultFromProto(create(ExecutionResultSchema, {}))).param).toBe(
      "result.outcome",
    );
  });

  it("carries vault grants with their secrets' fingerprints, refusing malformed ones by name", () => {
    const fingerprint = `hmac-sha256:${"ab".repeat(32)}` as const;
    const grants = new Map<string, VaultGrant>([
      [
        "vlt_a",
        {
          allowed: true,
          secrets: new Map([
            ["KEY", "v1"],
            ["PIN", "1234"],
          ]),
          fingerprints: new Map([["KEY", fingerprint]]),
        },
      ],
      ["vlt_b", { allowed: true, secrets: new Map([["X", "y"]]) }],
      ["vlt_c", { allowed: false, reason: "not listed" }],
    ]);
    const wire = (vaults: ReturnType<typeof vaultGrantsToProto>) =>
      fromBinary(
        SecretsResponseSchema,
        toBinary(SecretsResponseSchema, create(SecretsResponseSchema, { vaults })),
      ).vaults;
    expect(vaultGrantsFromProto(wire(vaultGrantsToProto(grants)))).toEqual(grants);

    const withFingerprint = (fingerprints: Record<string, string>) =>
      wire([{ vaultId: "vlt_a", allowed: true, secrets: { KEY: "v1" }, fingerprints }]);
    for (const bad of [
      "sha256:".concat("ab".repeat(32)),
      `hmac-sha256:${"AB".repeat(32)}`,
      `hmac-sha256:${"ab".repeat(31)}`,
      "",
      "v1",
    ]) {
      expect(contractError(() => vaultGrantsFromProto(withFingerprint({ KEY: bad })))).toEqual({
        reason: "execution_contract_invalid",
        param: 'vaults[0].fingerprints["KEY"]',
      });
    }
    // A fingerprint of a secret the vault does not grant.
    expect(
      contractError(() =>
        vaultGrantsFromProto(withFingerprint({ KEY: fingerprint, GHOST: fingerprint })),
      ).param,
    ).toBe('vaults[0].fingerprints["GHOST"]');
  });
});
