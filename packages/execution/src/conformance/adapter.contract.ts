/**
 * The adapter conformance suite: BYOH Appendix B as one vitest suite that
 * every {@link ExecutionAdapter} must pass (the langgraphjs
 * checkpoint-validation pattern). An adapter's spec file is a few lines:
 *
 * ```ts
 * import { describeAdapterContract } from "@trellis/execution/conformance";
 * describeAdapterContract("my backend", {
 *   create: () => createMyAdapter(),
 *   sourceFiles: ["services/adapters/src/my/my-adapter.ts"],
 *   scenarios: { simple: { input: "hi" }, failure: {…}, slow: {…} },
 * });
 * ```
 *
 * Scenarios say how to make the backend do each thing; a capability the
 * adapter declares it lacks is checked the other way round (negotiation
 * blocks it and `execute` refuses with `unsupported`), so nothing is skipped.
 */
import { readFileSync } from "node:fs";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  BACKEND_ID_PATTERN,
  capabilitiesFromProto,
  capabilitiesToProto,
  capabilityProblems,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionRequest,
  type ExecutionRequirements,
  type ExecutionResult,
  type ExecutionToolDescriptor,
  type ReasonCode,
} from "@trellis/adapter-sdk";
import { type Message, Role } from "@trellis/contracts/core";
import { chatToMessage, textOf } from "@trellis/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** One way of driving the backend. */
export interface AdapterScenario {
  /** The user's text. */
  input: string;
  /** The agent definition for this scenario (default: the setup's). */
  definition?: JsonObject;
  history?: readonly Message[];
  toolDescriptors?: readonly ExecutionToolDescriptor[];
  requirements?: ExecutionRequirements;
  /** For a suspending scenario: the payload to resume it with. */
  resumePayload?: JsonValue;
}

/** How to run the suite for one adapter. */
export interface AdapterContractSetup {
  /** A fresh adapter; called more than once (its backendId must not change). */
  create(): ExecutionAdapter | Promise<ExecutionAdapter>;
  /** Release what `create` made. */
  dispose?(adapter: ExecutionAdapter): void | Promise<void>;
  /** The test agent's definition (default `{}`). */
  definition?: JsonObject;
  scenarios: {
    /** A simple message the backend answers with text. */
    simple: AdapterScenario;
    /** A request whose run calls a tool (needed unless toolUse is "none"). */
    toolUse?: AdapterScenario;
    /** A request the backend asks a clarifying question on (needed unless continuation is "none"). */
    clarification?: AdapterScenario;
    /** A request that stops for an approval (needed when approvalInterrupts is "native"). */
    approval?: AdapterScenario;
    /** A request the backend fails on. */
    failure: AdapterScenario;
    /** A request that runs for at least 2 seconds. */
    slow: AdapterScenario;
  };
  /** The adapter's translation code, for the ownership and size checks. */
  sourceFiles: readonly string[];
  /** Line budget of `sourceFiles` (BYOH §1.2 guideline; default 200). */
  maxLines?: number;
  /** Slack on `maxElapsedMs` for the timeout check (default 3000 ms). */
  timeoutSlackMs?: number;
}

/** Imports an adapter must not have: it translates; policy, sessions, continuations and memory live above it. */
const FORBIDDEN_IMPORTS = [
  "@trellis/platform",
  "@trellis/storage",
  "@trellis/eventlog",
  "@trellis/contracts/tasks",
  "@trellis/contracts/chat",
  "@trellis/contracts/receipts",
  "@trellis/tasks",
  "@trellis/chat",
  "@trellis/receipts",
  "@trellis/gateway",
];

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** Run the conformance suite for one adapter. */
export function describeAdapterContract(name: string, setup: AdapterContractSetup): void {
  describe(`adapter conformance (BYOH Appendix B): ${name}`, () => {
    let adapter: ExecutionAdapter;
    let caps: ExecutionCapabilities;
    let counter = 0;
    const made: ExecutionAdapter[] = [];

    beforeAll(async () => {
      adapter = await setup.create();
      made.push(adapter);
      caps = adapter.describeCapabilities?.() as ExecutionCapabilities;
    });
    afterAll(async () => {
      for (const a of made) await setup.dispose?.(a);
    });

    const request = (
      scenario: AdapterScenario,
      extra: Partial<ExecutionRequest> = {},
    ): ExecutionRequest => ({
      taskId: `tsk_conformance_${++counter}`,
      sessionId: "ses_conformance",
      workspaceId: "ws_conformance",
      agent: {
        id: "agt_conformance",
        backend: adapter.backendId,
        definition: scenario.definition ?? setup.definition ?? {},
        tools: (scenario.toolDescriptors ?? []).map((t) => t.name),
      },
      history: scenario.history ?? [],
      input: chatToMessage({ role: "user", content: scenario.input }),
      signal: new AbortController().signal,
      ...(scenario.toolDescriptors ? { toolDescriptors: scenario.toolDescriptors } : {}),
      ...(scenario.requirements ? { requirements: scenario.requirements } : {}),
      ...extra,
    });

    const run = async (r: ExecutionRequest) => {
      const events: ExecutionEvent[] = [];
      const result = await adapter.execute({ ...r, onEvent: (e) => events.push(e) });
      return { result, events };
    };

    const expectUnsupported = (result: ExecutionResult, code: ReasonCode) => {
      expect(result.status).toBe("failed");
      if (result.status !== "failed") return;
      expect(result.category).toBe("unsupported");
      expect(result.reasons?.some((r) => r.code === code && r.severity === "blocking")).toBe(true);
    };

    it("describeCapabilities() returns valid capabilities with no undefined field", () => {
      expect(typeof adapter.describeCapabilities).toBe("function");
      expect(capabilityProblems(caps)).toEqual([]);
      for (const [field, value] of Object.entries(caps)) {
        expect(value, `capabilities.${field}`).not.toBeUndefined();
      }
      // The proto form carries them unchanged (no field lost in transit).
      expect(capabilitiesFromProto(capabilitiesToProto(caps))).toEqual({
        ...caps,
        notes: [...caps.notes],
      });
    });

    it("backendId is a stable subject-safe token, the same on every instance", async () => {
      expect(adapter.backendId).toMatch(BACKEND_ID_PATTERN);
      const other = await setup.create();
      made.push(other);
      expect(other.backendId).toBe(adapter.backendId);
    });

    it("negotiate() returns supported: false with blocking reasons when a required capability is absent", () => {
      expect(typeof adapter.negotiate).toBe("function");
      const base = request(setup.scenarios.simple);
      const absent: [ExecutionRequirements, ReasonCode][] = [];
      if (caps.toolUse === "none") absent.push([{ toolUse: "required" }, "tool_use_unsupported"]);
      if (!caps.structuredToolCalls) {
        absent.push([{ structuredToolCalls: "required" }, "structured_tool_calls_unsupported"]);
      }
      if (caps.continuationSupport === "none") {
        absent.push([{ continuationSupport: "required" }, "continuation_unsupported"]);
      }
      if (caps.approvalInterrupts !== "native") {
        absent.push([{ approvalInterrupts: "required" }, "approval_interrupt_unsupported"]);
      }
      if (!caps.attachments) absent.push([{ attachments: "required" }, "attachments_unsupported"]);
      if (caps.streaming === "none")
        absent.push([{ streaming: "required" }, "streaming_unsupported"]);
      for (const [requirements, code] of absent) {
        const n = adapter.negotiate?.({ ...base, requirements });
        expect(n?.supported, JSON.stringify(requirements)).toBe(false);
        expect(n?.reasons.some((r) => r.code === code && r.severity === "blocking")).toBe(true);
      }
      // A newer contract than the backend understands is always refused.
      const newer = adapter.negotiate?.({ ...base, schemaVersion: caps.schemaVersion + 1 });
      expect(newer?.supported).toBe(false);
      expect(newer?.reasons.map((r) => r.code)).toContain("schema_version_unsupported");
    });

    it("negotiate() returns degraded: true with warning reasons when a preferred capability is absent", () => {
      const base = request(setup.scenarios.simple);
      const lacking: [ExecutionRequirements, ReasonCode][] = [];
      if (!caps.structuredToolCalls) {
        lacking.push([{ structuredToolCalls: "preferred" }, "structured_tool_calls_unsupported"]);
      }
      if (caps.continuationSupport === "none") {
        lacking.push([{ continuationSupport: "preferred" }, "continuation_unsupported"]);
      }
      if (caps.approvalInterrupts === "none") {
        lacking.push([{ approvalInterrupts: "preferred" }, "approval_interrupt_unsupported"]);
      }
      if (caps.streaming === "none")
        lacking.push([{ streaming: "preferred" }, "streaming_unsupported"]);
      if (caps.traceDepth !== "detailed")
        lacking.push([{ traceDepth: "detailed" }, "trace_depth_reduced"]);
      for (const [requirements, code] of lacking) {
        const n = adapter.negotiate?.({ ...base, requirements });
        expect(n?.supported, JSON.stringify(requirements)).toBe(true);
        expect(n?.degraded, JSON.stringify(requirements)).toBe(true);
        expect(n?.reasons.some((r) => r.code === code && r.severity === "warning")).toBe(true);
      }
      // What the backend has in full is not reported as lost.
      const full = adapter.negotiate?.({ ...base, requirements: { traceDepth: caps.traceDepth } });
      expect(full?.degraded).toBe(false);
    });

    it("negotiate() has no side effects: no network, no mutation, same answer every time", () => {
      const frozen = deepFreeze(
        request(setup.scenarios.simple, { requirements: { traceDepth: "detailed" } }),
      );
      const before = JSON.stringify(adapter.describeCapabilities?.());
      const realFetch = globalThis.fetch;
      let fetched = 0;
      globalThis.fetch = (() => {
        fetched++;
        return Promise.reject(new Error("negotiate() must not do I/O"));
      }) as typeof fetch;
      let answers: unknown[];
      try {
        answers = [1, 2, 3].map(() => adapter.negotiate?.(frozen));
      } finally {
        globalThis.fetch = realFetch;
      }
      expect(fetched).toBe(0);
      expect(answers[0]).not.toBeInstanceOf(Promise);
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      expect(JSON.stringify(adapter.describeCapabilities?.())).toBe(before);
    });

    it("execute() returns completed with answer text for a simple message", async () => {
      const { result } = await run(request(setup.scenarios.simple));
      expect(result.status).toBe("completed");
      const answer = result.messages
        .filter((m) => m.role === Role.ASSISTANT)
        .map(textOf)
        .join("");
      expect(answer.trim()).not.toBe("");
    });

    it("execute() returns completed with a tool trace for a tool-bearing request", async () => {
      if (caps.toolUse === "none") {
        const { result } = await run(
          request(setup.scenarios.simple, { requirements: { toolUse: "required" } }),
        );
        expectUnsupported(result, "tool_use_unsupported");
        return;
      }
      const scenario = setup.scenarios.toolUse;
      expect(scenario, "a toolUse scenario (the adapter declares tool use)").toBeDefined();
      if (!scenario) return;
      const { result, events } = await run(request(scenario));
      expect(result.status).toBe("completed");
      expect(result.trace?.toolCallCount ?? 0).toBeGreaterThanOrEqual(1);
      const started = events.filter((e) => e.kind === "tool_started");
      const toolMessages = result.messages.filter((m) => m.role === Role.TOOL);
      expect(started.length + toolMessages.length).toBeGreaterThanOrEqual(1);
    });

    it("execute() returns a clarification suspension with a continuation payload", async () => {
      if (caps.continuationSupport === "none") {
        const { result } = await run(
          request(setup.scenarios.simple, { requirements: { continuationSupport: "required" } }),
        );
        expectUnsupported(result, "continuation_unsupported");
        return;
      }
      const scenario = setup.scenarios.clarification;
      expect(
        scenario,
        "a clarification scenario (the adapter declares continuation)",
      ).toBeDefined();
      if (!scenario) return;
      const { result } = await run(request(scenario));
      expect(result.status).toBe("suspended");
      if (result.status !== "suspended") return;
      expect(result.reason).toBe("clarification");
      expect(result.checkpoint).not.toBeNull();
      expect(result.signalLabel).not.toBe("");
      // The continuation payload really continues the turn.
      const resumed = await run(
        request(scenario, {
          resume: {
            checkpoint: result.checkpoint,
            payload: scenario.resumePayload ?? { answer: "yes" },
          },
        }),
      );
      expect(["completed", "suspended"]).toContain(resumed.result.status);
    });

    it("execute() returns an approval suspension with an approval request", async () => {
      if (caps.approvalInterrupts !== "native") {
        const { result } = await run(
          request(setup.scenarios.simple, { requirements: { approvalInterrupts: "required" } }),
        );
        expectUnsupported(result, "approval_interrupt_unsupported");
        return;
      }
      const scenario = setup.scenarios.approval;
      expect(
        scenario,
        "an approval scenario (the adapter declares native approvals)",
      ).toBeDefined();
      if (!scenario) return;
      const { result } = await run(request(scenario));
      expect(result.status).toBe("suspended");
      if (result.status !== "suspended") return;
      expect(result.reason).toBe("approval");
      expect(result.approvalRequest).toBeDefined();
    });

    it("execute() returns failed with a structured error on backend failure", async () => {
      const { result } = await run(request(setup.scenarios.failure));
      expect(result.status).toBe("failed");
      if (result.status !== "failed") return;
      expect(result.category).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(result.message.trim()).not.toBe("");
      expect(typeof result.retryable).toBe("boolean");
    });

    it("execute() returns unsupported rather than faking success", async () => {
      const { result } = await run(
        request(setup.scenarios.simple, { schemaVersion: caps.schemaVersion + 1 }),
      );
      expectUnsupported(result, "schema_version_unsupported");
      expect(result.messages).toEqual([]);
    });

    it("trace.summary carries startedAt, completedAt, stepCount and toolCallCount", async () => {
      const { result } = await run(request(setup.scenarios.simple));
      const trace = result.trace;
      expect(trace).toBeDefined();
      if (!trace) return;
      const started = Date.parse(trace.startedAt);
      const completed = Date.parse(trace.completedAt);
      expect(Number.isNaN(started)).toBe(false);
      expect(completed).toBeGreaterThanOrEqual(started);
      expect(Number.isInteger(trace.stepCount) && trace.stepCount >= 1).toBe(true);
      expect(Number.isInteger(trace.toolCallCount) && trace.toolCallCount >= 0).toBe(true);
    });

    it("respects requirements.maxElapsedMs: failed with category timeout, retryable, never a hang", async () => {
      const limit = 300;
      const started = Date.now();
      const { result } = await run(
        request(setup.scenarios.slow, { requirements: { maxElapsedMs: limit } }),
      );
      expect(Date.now() - started).toBeLessThan(limit + (setup.timeoutSlackMs ?? 3000));
      expect(result.status).toBe("failed");
      if (result.status !== "failed") return;
      expect(result.category).toBe("timeout");
      expect(result.retryable).toBe(true);
    });

    it("executeStreaming() yields progress, then exactly one turn_finished with the result", async () => {
      expect(typeof adapter.executeStreaming).toBe("function");
      const events: ExecutionEvent[] = [];
      for await (const event of adapter.executeStreaming?.(request(setup.scenarios.simple)) ?? []) {
        events.push(event);
      }
      const finished = events.filter((e) => e.kind === "turn_finished");
      expect(finished).toHaveLength(1);
      expect(events.at(-1)?.kind).toBe("turn_finished");
      const last = events.at(-1);
      expect(last?.kind === "turn_finished" && last.result.status).toBe("completed");
    });

    it("does not reach policy, session, continuation or memory APIs (imports only the seam)", () => {
      expect(setup.sourceFiles.length).toBeGreaterThan(0);
      for (const file of setup.sourceFiles) {
        const source = readFileSync(file, "utf8");
        for (const forbidden of FORBIDDEN_IMPORTS) {
          expect(source.includes(`"${forbidden}"`), `${file} imports ${forbidden}`).toBe(false);
        }
      }
    });

    it(`keeps its translation code within ${setup.maxLines ?? 200} lines (BYOH §1.2 guideline)`, () => {
      let lines = 0;
      for (const file of setup.sourceFiles) {
        let inComment = false;
        for (const raw of readFileSync(file, "utf8").split("\n")) {
          const line = raw.trim();
          if (inComment) {
            if (line.includes("*/")) inComment = false;
            continue;
          }
          if (line.startsWith("/*")) {
            inComment = !line.includes("*/");
            continue;
          }
          if (line === "" || line.startsWith("//")) continue;
          lines++;
        }
      }
      expect(lines).toBeLessThanOrEqual(setup.maxLines ?? 200);
    });
  });
}
