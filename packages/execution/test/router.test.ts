import { create } from "@bufbuild/protobuf";
import {
  type ExecutionEvent,
  type ExecutionRequest,
  type RoutingPolicy,
  routingPolicyFromProto,
} from "@trellis/adapter-sdk";
import { RoutingPolicySchema } from "@trellis/contracts/adapters";
import { chatToMessage, textOf } from "@trellis/messages";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { decide, noBackendResult, prepareRequest } from "../src/routing/policy.js";
import { BackendRegistry } from "../src/routing/registry.js";
import { Router } from "../src/routing/router.js";
import { probeAdapter } from "../src/testing/index.js";

const withImage = chatToMessage({
  role: "user",
  content: [
    { type: "text", text: "look" },
    { type: "image", source: { type: "url", url: "https://example.test/a.png" } },
  ],
});

function request(routing: RoutingPolicy, over: Partial<ExecutionRequest> = {}): ExecutionRequest {
  return {
    taskId: "tsk_1",
    sessionId: "ses_1",
    workspaceId: "ws_1",
    agent: { id: "agt_1", backend: "plain", definition: {}, tools: [], routing },
    history: [],
    input: chatToMessage({ role: "user", content: "hi" }),
    signal: new AbortController().signal,
    ...over,
  };
}

/** Three in-process backends: no approvals, gated approvals, native approvals. */
function threeBackends() {
  const runs: string[] = [];
  const registry = new BackendRegistry();
  registry.addLocal(probeAdapter({ backendId: "plain", onRun: () => runs.push("plain") }), {
    hints: { costPerExecution: 1 },
  });
  registry.addLocal(
    probeAdapter({
      backendId: "gated",
      capabilities: { approvalInterrupts: "adapter-mediated" },
      onRun: () => runs.push("gated"),
    }),
    { hints: { costPerExecution: 2 } },
  );
  registry.addLocal(
    probeAdapter({
      backendId: "native",
      capabilities: { approvalInterrupts: "native", traceDepth: "detailed" },
      onRun: () => runs.push("native"),
    }),
    { hints: { costPerExecution: 5 } },
  );
  return { router: new Router({ registry }), registry, runs };
}

const all: RoutingPolicy = { allowedBackends: ["plain", "gated", "native"] };

async function run(router: Router, r: ExecutionRequest) {
  const events: ExecutionEvent[] = [];
  const result = await router.execute({ ...r, onEvent: (e) => events.push(e) });
  return { result, events };
}

describe("Router (in process)", () => {
  it("sends a request needing approval interrupts only to the backend that has them", async () => {
    const { router, runs } = threeBackends();
    const { result, events } = await run(
      router,
      request(all, { requirements: { approvalInterrupts: "required" } }),
    );
    expect(runs).toEqual(["native"]);
    expect(result).toMatchObject({ status: "completed", backendId: "native" });
    expect(events[0]).toMatchObject({ kind: "routed", backendId: "native", degraded: false });
    expect(events.filter((e) => e.kind === "turn_finished")).toHaveLength(1);
    expect(events.at(-1)?.kind).toBe("turn_finished");
  });

  it("picks the cheapest fitting backend when nothing special is needed", async () => {
    const { router, runs } = threeBackends();
    await run(router, request(all));
    expect(runs).toEqual(["plain"]);
  });

  it("fails with attachments_unsupported when no backend takes attachments, running none", async () => {
    const { router, runs } = threeBackends();
    const { result, events } = await run(router, request(all, { input: withImage }));
    expect(runs).toEqual([]);
    expect(result).toMatchObject({ status: "failed", category: "unsupported", retryable: false });
    if (result.status !== "failed") return;
    expect(result.reasons?.map((r) => [r.code, r.severity, r.metadata?.backend])).toEqual([
      ["attachments_unsupported", "blocking", "plain"],
      ["attachments_unsupported", "blocking", "gated"],
      ["attachments_unsupported", "blocking", "native"],
    ]);
    expect(result.message).toContain("attachments_unsupported");
    expect(events.map((e) => e.kind)).toEqual(["turn_finished"]);
  });

  it("runs degraded when a preferred capability is missing, and says so", async () => {
    const { router } = threeBackends();
    const { result, events } = await run(
      router,
      request(
        { allowedBackends: ["plain"] },
        { requirements: { approvalInterrupts: "preferred" } },
      ),
    );
    expect(result.status).toBe("completed");
    expect(result.degradation).toEqual([
      expect.objectContaining({ code: "approval_interrupt_unsupported", severity: "warning" }),
    ]);
    expect(events[0]).toMatchObject({
      kind: "routed",
      backendId: "plain",
      degraded: true,
      reasons: [expect.objectContaining({ code: "approval_interrupt_unsupported" })],
    });
  });

  it("prefers the backend that loses nothing over a cheaper degraded one", async () => {
    const { router, runs } = threeBackends();
    await run(router, request(all, { requirements: { approvalInterrupts: "preferred" } }));
    // plain: warning; gated: info only (cost 2) wins over native (cost 5).
    expect(runs).toEqual(["gated"]);
  });

  it("keeps to a pinned backend, and never falls back silently when it cannot run", async () => {
    const { router, runs } = threeBackends();
    const pinned = { ...all, pinnedBackend: "plain" };
    const ok = await run(router, request(pinned));
    expect(ok.result).toMatchObject({ backendId: "plain" });
    const refused = await run(
      router,
      request(pinned, { requirements: { approvalInterrupts: "required" } }),
    );
    expect(refused.result).toMatchObject({ status: "failed", category: "unsupported" });
    expect(runs).toEqual(["plain"]);
  });

  it("resumes a suspended turn on the backend that suspended it", async () => {
    const { router, runs } = threeBackends();
    const first = await run(
      router,
      request(all, {
        requirements: { approvalInterrupts: "required" },
        input: chatToMessage({ role: "user", content: "suspend" }),
      }),
    );
    expect(first.result.status).toBe("suspended");
    if (first.result.status !== "suspended") return;
    // The checkpoint names its backend; the backend sees its own state only.
    expect(first.result.checkpoint).toMatchObject({ backend: "native", state: { step: 1 } });
    const resumed = await run(
      router,
      request(all, { resume: { checkpoint: first.result.checkpoint, payload: { ok: 1 } } }),
    );
    expect(runs).toEqual(["native", "native"]);
    expect(textOf(resumed.result.messages[0]!)).toBe(
      'native resumed from {"step":1} with {"ok":1}',
    );
  });

  it("reads the policy from the agent definition and hides it from the backend", async () => {
    const seen: unknown[] = [];
    const registry = new BackendRegistry();
    registry.addLocal(
      probeAdapter({ backendId: "a", onRun: (r) => seen.push(r.agent.definition) }),
    );
    registry.addLocal(
      probeAdapter({
        backendId: "b",
        capabilities: { attachments: true },
        onRun: (r) => seen.push(r.agent.definition),
      }),
    );
    const router = new Router({ registry });
    const definition = { prompt: "be nice", routing: { backends: ["b"] } };
    const { result } = await run(router, {
      ...request({}),
      agent: { id: "agt_1", backend: "a", definition, tools: [] },
      input: withImage,
    });
    expect(result).toMatchObject({ status: "completed", backendId: "b" });
    expect(seen).toEqual([{ prompt: "be nice" }]);
  });

  it("keeps a no-backend failure small however many backends refused", () => {
    const reasons = Array.from({ length: 50_000 }, (_, i) => ({
      code: "tool_use_unsupported" as const,
      message: "y".repeat(1000),
      severity: "blocking" as const,
      metadata: { backend: `b${i}` },
    }));
    const result = noBackendResult(reasons);
    if (result.status !== "failed") throw new Error(`expected failed, got ${result.status}`);
    expect(result.message.length).toBeLessThan(4096);
    expect(result.message).toContain("and 49992 more");
    expect(result.reasons?.length).toBe(64);
    expect(JSON.stringify(result).length).toBeLessThan(64 * 1024);
  });

  it("refuses a routing policy over the wire with too many or malformed backends", () => {
    const many = create(RoutingPolicySchema, {
      allowedBackends: Array.from({ length: 50_000 }, (_, i) => `b${i}`),
    });
    const bad = create(RoutingPolicySchema, { allowedBackends: ["ok", "not ok"] });
    for (const policy of [many, bad]) {
      try {
        routingPolicyFromProto(policy);
        expect.unreachable("accepted");
      } catch (error) {
        expect(isTrellisError(error) && [error.reason, error.param]).toEqual([
          "execution_contract_invalid",
          "agent.routing.allowed_backends",
        ]);
      }
    }
  });

  it("refuses a bad routing policy with agent_definition_invalid naming the field", () => {
    const { router } = threeBackends();
    const cases: [unknown, string][] = [
      [{ backends: "plain" }, "agent.definition.routing.backends"],
      [{ prefer: "cheap" }, "agent.definition.routing.prefer"],
      [
        { requirements: { approval_interrupts: "sometimes" } },
        "agent.definition.routing.requirements.approval_interrupts",
      ],
      [
        { requirements: { max_elapsed_ms: -5 } },
        "agent.definition.routing.requirements.max_elapsed_ms",
      ],
      [{ pinned: "native" }, "agent.definition.routing.pinned"],
      [{ colour: "red" }, "agent.definition.routing.colour"],
      // A 429 KiB policy of 50,000 backend ids was once accepted.
      [
        { backends: Array.from({ length: 50_000 }, (_, i) => `b${i}`) },
        "agent.definition.routing.backends",
      ],
    ];
    for (const [routing, param] of cases) {
      try {
        router.validateDefinition("plain", { routing } as never);
        expect.unreachable(`accepted ${JSON.stringify(routing)}`);
      } catch (error) {
        expect(isTrellisError(error) && [error.reason, error.param]).toEqual([
          "agent_definition_invalid",
          param,
        ]);
      }
    }
  });

  it("checks a definition against every in-process backend of its routing list", () => {
    const registry = new BackendRegistry();
    registry.addLocal(probeAdapter({ backendId: "lenient" }));
    registry.addLocal({
      ...probeAdapter({ backendId: "strict" }),
      validateDefinition(definition) {
        if (!("graph" in definition)) throw new Error("definition.graph is required");
      },
    });
    const router = new Router({ registry });
    // The primary backend accepts it; one the turn may be routed to does not.
    try {
      router.validateDefinition("lenient", { routing: { backends: ["strict"] } } as never);
      expect.unreachable("accepted a definition backend strict refuses");
    } catch (error) {
      expect(isTrellisError(error) && [error.reason, error.param, error.metadata]).toEqual([
        "agent_definition_invalid",
        "agent.definition",
        { backend_id: "strict" },
      ]);
      expect(String(error)).toMatch(
        /backend strict of routing.backends refuses it: definition.graph/,
      );
    }
    expect(() =>
      router.validateDefinition("lenient", {
        graph: {},
        routing: { backends: ["strict"] },
      } as never),
    ).not.toThrow();
    // Without it in the routing list, backend strict is not asked.
    expect(() => router.validateDefinition("lenient", {} as never)).not.toThrow();
  });

  it("stops a backend that outlives maxElapsedMs: failed, timeout, retryable", async () => {
    const { router } = threeBackends();
    const { result } = await run(
      router,
      request(all, {
        requirements: { maxElapsedMs: 100 },
        input: chatToMessage({ role: "user", content: "sleep 5000" }),
      }),
    );
    expect(result).toMatchObject({ status: "failed", category: "timeout", retryable: true });
  });

  it("executeStreaming yields routed, progress and one turn_finished", async () => {
    const { router } = threeBackends();
    const kinds: string[] = [];
    for await (const event of router.executeStreaming(request(all))) kinds.push(event.kind);
    expect(kinds).toEqual(["routed", "text_delta", "step_finished", "turn_finished"]);
  });
});

describe("decide", () => {
  it("breaks ties by the agent's preference, then by load", () => {
    const registry = new BackendRegistry();
    registry.addLocal(probeAdapter({ backendId: "cheap" }), {
      hints: { costPerExecution: 1, latencyMs: 900 },
    });
    registry.addLocal(probeAdapter({ backendId: "fast" }), {
      hints: { costPerExecution: 9, latencyMs: 50 },
    });
    const router = new Router({ registry });
    const pick = (routing: RoutingPolicy) =>
      decide({
        prepared: prepareRequest(
          request(routing, {
            agent: { id: "a", backend: "cheap", definition: {}, tools: [], routing },
          }),
        ),
        view: (id) => registry.backend(id),
        negotiate: (view, r) => router.negotiate(view, r),
      }).chosen?.backendId;
    expect(pick({ allowedBackends: ["fast"] })).toBe("cheap");
    expect(pick({ allowedBackends: ["fast"], preference: "latency" })).toBe("fast");

    const even = new BackendRegistry();
    even.addLocal(probeAdapter({ backendId: "one" }), { capacity: 2 });
    even.addLocal(probeAdapter({ backendId: "two" }), { capacity: 2 });
    const busy = even.track("one");
    const chosen = decide({
      prepared: prepareRequest(
        request(
          {},
          {
            agent: {
              id: "a",
              backend: "one",
              definition: {},
              tools: [],
              routing: { allowedBackends: ["two"] },
            },
          },
        ),
      ),
      view: (id) => even.backend(id),
      negotiate: (view, r) => router.negotiate(view, r),
    }).chosen?.backendId;
    busy();
    expect(chosen).toBe("two");
  });
});

describe("Router.preflight (dry run before a task is stored)", () => {
  it("is undefined when an allowed backend fits, without running anything", () => {
    const { router, runs } = threeBackends();
    const refusal = router.preflight(
      request(all, { requirements: { approvalInterrupts: "required" } }),
    );
    expect(refusal).toBeUndefined();
    expect(runs).toEqual([]);
  });

  it("is the unsupported result with every blocking reason when none fits", () => {
    const { router, runs } = threeBackends();
    const refusal = router.preflight(
      request({ allowedBackends: ["plain"] }, { requirements: { approvalInterrupts: "required" } }),
    );
    expect(refusal).toMatchObject({ status: "failed", category: "unsupported", retryable: false });
    const reasons = refusal?.status === "failed" ? (refusal.reasons ?? []) : [];
    expect(reasons).toEqual([
      expect.objectContaining({
        code: "approval_interrupt_unsupported",
        severity: "blocking",
        metadata: expect.objectContaining({ backend: "plain" }),
      }),
    ]);
    expect(runs).toEqual([]);
  });

  it("does not refuse for backends that only lack a live worker (one may join)", () => {
    const { router } = threeBackends();
    const ghostly = request(
      {},
      { agent: { id: "agt_1", backend: "ghost", definition: {}, tools: [], routing: {} } },
    );
    // Nothing can run it now…
    const { decision } = router.plan(ghostly);
    expect(decision.chosen).toBeUndefined();
    expect(decision.reasons.map((r) => r.code)).toEqual(["backend_unavailable"]);
    // …but that is not the request's fault: it is queued, not refused.
    expect(router.preflight(ghostly)).toBeUndefined();
    // Nor while one allowed backend may still join, even if the others lack a capability.
    const mixed = request(
      { allowedBackends: ["plain", "ghost"] },
      { requirements: { approvalInterrupts: "required" } },
    );
    expect(router.plan(mixed).decision.chosen).toBeUndefined();
    expect(router.preflight(mixed)).toBeUndefined();
  });

  it("throws for a request that is itself invalid", () => {
    const { router } = threeBackends();
    expect(() =>
      router.preflight(request(all, { requirements: { toolUse: "preferred" as never } })),
    ).toThrow(/requirements.toolUse/);
  });
});
