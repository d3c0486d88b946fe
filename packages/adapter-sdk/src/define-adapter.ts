/**
 * `defineAdapter`: write only the translation (BYOH §1.2: ~100–200 lines per
 * backend) and get a complete {@link ExecutionAdapter}: capabilities,
 * negotiation (the pure generic one, optionally refined), an `execute` that
 * refuses what negotiation blocks (`unsupported`, never a fake success),
 * keeps `maxElapsedMs`, turns throws into `failed`, and fills the trace
 * summary, the degradation and the backend id; and `executeStreaming`.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { Role } from "@trellis/contracts/core";
import { negotiateCapabilities } from "./negotiation.js";
import { runExecution, streamExecution, unsupportedResult } from "./run-execution.js";
import {
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionResult,
} from "./types.js";

/** Backend ids are subject tokens: letters, digits, `_` and `-`, 1–64 long. */
export const BACKEND_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** What an adapter author writes. */
export interface AdapterSpec {
  /** Stable, unique id of the backend. */
  backendId: string;
  /** What the backend can honestly do (BYOH §1.4). */
  capabilities: ExecutionCapabilities;
  /** Check an agent definition; throw a TrellisError (`agent_definition_invalid`) when bad. */
  validateDefinition?(definition: JsonObject): void;
  /**
   * Refine the generic negotiation with backend-specific findings (pure: no
   * I/O, no state). Return the negotiation to use.
   */
  negotiate?(request: ExecutionRequest, generic: ExecutionNegotiation): ExecutionNegotiation;
  /**
   * Run the turn: translate the request to the backend, report progress with
   * `request.onEvent`, translate the answer back. Honour `request.signal`
   * (return `cancelled` soon after it aborts).
   */
  run(request: ExecutionRequest): Promise<ExecutionResult>;
  /** How long `run` may take to return after an abort (default 2000 ms). */
  graceMs?: number;
}

/** Build a full adapter from a spec. */
export function defineAdapter(spec: AdapterSpec): ExecutionAdapter {
  if (!BACKEND_ID_PATTERN.test(spec.backendId)) {
    throw new Error(
      `backend id ${JSON.stringify(spec.backendId)} must match ${BACKEND_ID_PATTERN}`,
    );
  }
  const capabilities = Object.freeze({ ...spec.capabilities, notes: [...spec.capabilities.notes] });
  const negotiate = (request: ExecutionRequest): ExecutionNegotiation => {
    const generic = negotiateCapabilities(capabilities, request);
    return spec.negotiate ? spec.negotiate(request, generic) : generic;
  };
  const execute = async (request: ExecutionRequest): Promise<ExecutionResult> => {
    const startedAt = new Date();
    const negotiation = negotiate(request);
    const info = {
      schemaVersion: EXECUTION_SCHEMA_VERSION,
      backendId: spec.backendId,
      ...(negotiation.degraded
        ? { degradation: negotiation.reasons.filter((r) => r.severity === "warning") }
        : {}),
    };
    if (!negotiation.supported) {
      const refused = unsupportedResult(negotiation.reasons, `backend ${spec.backendId}`);
      const at = new Date().toISOString();
      return {
        ...refused,
        ...info,
        trace: { startedAt: at, completedAt: at, stepCount: 0, toolCallCount: 0, degraded: false },
      };
    }
    let steps = 0;
    const tools = new Set<string>();
    const onEvent = request.onEvent;
    const counted = (event: ExecutionEvent) => {
      if (event.kind === "step_finished") steps++;
      if (event.kind === "tool_started") tools.add(event.toolCallId);
      onEvent?.(event);
    };
    const result = await runExecution(
      { execute: (r) => spec.run(r) },
      { ...request, onEvent: counted },
      spec.graceMs === undefined ? {} : { graceMs: spec.graceMs },
    );
    for (const message of result.messages) {
      if (message.role === Role.TOOL && message.toolCallId) tools.add(message.toolCallId);
    }
    return {
      ...result,
      ...info,
      ...(result.degradation ? { degradation: result.degradation } : {}),
      trace: result.trace ?? {
        startedAt: startedAt.toISOString(),
        completedAt: new Date().toISOString(),
        // A run that produced no step events still ran one step.
        stepCount: Math.max(steps, 1),
        toolCallCount: tools.size,
        degraded: negotiation.degraded,
      },
    };
  };
  return {
    backendId: spec.backendId,
    schemaVersion: EXECUTION_SCHEMA_VERSION,
    ...(spec.validateDefinition ? { validateDefinition: spec.validateDefinition } : {}),
    describeCapabilities: () => ({ ...capabilities, notes: [...capabilities.notes] }),
    negotiate,
    execute,
    executeStreaming: (request) => streamExecution(execute, request),
  };
}
