/**
 * The one-to-one mapping between the TypeScript seam (`./types.ts`) and the
 * proto contract `trellis.adapters.v1`. Every TS field has exactly one proto
 * field and back:
 *
 * | TypeScript                         | proto                                   |
 * |------------------------------------|-----------------------------------------|
 * | request.taskId / sessionId / workspaceId / agent.id / traceId / traceparent | request.correlation.turn_id / session_id / workspace_id / agent_id / trace_id / traceparent |
 * | request.agent.{backend, definition, tools, safeToRetry, routing} | request.agent.{…} |
 * | request.history / input / resume / requirements / toolDescriptors / metadata / state | history / input / resume / requirements / tools / metadata / state |
 * | result.state                       | result.state                            |
 * | "forbidden" / "none" / "allowed" / "preferred" / "required" | REQUIREMENT_* |
 * | capabilities strings               | the matching enum values (never UNSPECIFIED) |
 * | result.status + its fields         | result.outcome oneof (completed / suspended / failed / cancelled) |
 * | event.kind + its fields            | event.kind oneof                        |
 *
 * Not mapped, because they only exist in a process: `request.signal` (a
 * remote caller cancels the call; a worker receives a CancelNotice) and
 * `request.onEvent` (remote progress is the ExecutionEvent stream).
 *
 * Decoding validates: a value outside a field's accepted set, or an
 * UNSPECIFIED capability, is a `execution_contract_invalid` error naming the
 * field (Connect InvalidArgument through the error interceptor).
 */
import {
  create,
  fromJson,
  type JsonValue,
  type MessageInitShape,
  toJson,
} from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ApprovalInterrupts,
  ContextStrategy,
  ContinuationSupport,
  ExecutionCapabilitiesSchema,
  ExecutionEventSchema,
  ExecutionNegotiationSchema,
  ExecutionRequestSchema,
  ExecutionRequirementsSchema,
  ExecutionResultSchema,
  NegotiationReasonSchema,
  type ExecutionCapabilities as PbCapabilities,
  type ExecutionEvent as PbEvent,
  type ExecutionNegotiation as PbNegotiation,
  type NegotiationReason as PbReason,
  ReasonCode as PbReasonCode,
  type ExecutionRequest as PbRequest,
  type ExecutionRequirements as PbRequirements,
  type ExecutionResult as PbResult,
  type RoutingPolicy as PbRoutingPolicy,
  SuspensionReason as PbSuspensionReason,
  TraceDepth as PbTraceDepth,
  type Usage as PbUsage,
  type VaultGrant as PbVaultGrant,
  Requirement,
  RoutingPolicySchema,
  RoutingPreference,
  Severity,
  StreamingSupport,
  SuspensionKind,
  ToolOutcome,
  ToolUseSupport,
  UsageSchema,
  type VaultGrantSchema,
} from "@trellis/contracts/adapters";
import { isSecretFingerprint, type SecretFingerprint, TrellisError } from "@trellis/runtime";
import { BACKEND_ID_PATTERN } from "./define-adapter.js";
import {
  EXECUTION_SCHEMA_VERSION,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionRequirements,
  type ExecutionResult,
  type ExecutionUsage,
  type NegotiationReason,
  type ReasonCode,
  type RoutingPolicy,
  type SuspensionReason,
  type VaultGrant,
} from "./types.js";

/** A proto field held a value the seam does not accept. */
export function contractInvalid(field: string, message: string): TrellisError {
  return new TrellisError({
    reason: "execution_contract_invalid",
    message: `${field}: ${message}`,
    param: field,
    domain: "adapters.trellis.dev",
  });
}

/** A two-way table between TS strings and a proto enum. */
function table<S extends string, E extends number>(pairs: readonly (readonly [S, E])[]) {
  const toPb = new Map<S, E>(pairs);
  const fromPb = new Map<number, S>(pairs.map(([s, e]) => [e, s]));
  return {
    to(value: S): E {
      const mapped = toPb.get(value);
      if (mapped === undefined) throw contractInvalid("enum", `unknown value ${value}`);
      return mapped;
    },
    from(value: number, field: string): S {
      const mapped = fromPb.get(value);
      if (mapped === undefined) {
        throw contractInvalid(field, `must be one of ${[...toPb.keys()].join(", ")}`);
      }
      return mapped;
    },
    /** UNSPECIFIED (0) ↔ undefined. */
    toOptional(value: S | undefined): E | 0 {
      return value === undefined ? 0 : this.to(value);
    },
    fromOptional(value: number, field: string): S | undefined {
      return value === 0 ? undefined : this.from(value, field);
    },
  };
}

const requirement = table([
  ["forbidden", Requirement.FORBIDDEN],
  ["none", Requirement.NONE],
  ["allowed", Requirement.ALLOWED],
  ["preferred", Requirement.PREFERRED],
  ["required", Requirement.REQUIRED],
] as const);
const traceDepth = table([
  ["minimal", PbTraceDepth.MINIMAL],
  ["standard", PbTraceDepth.STANDARD],
  ["detailed", PbTraceDepth.DETAILED],
] as const);
const toolUse = table([
  ["none", ToolUseSupport.NONE],
  ["adapter-mediated", ToolUseSupport.ADAPTER_MEDIATED],
  ["native-iterative", ToolUseSupport.NATIVE_ITERATIVE],
] as const);
const continuation = table([
  ["none", ContinuationSupport.NONE],
  ["opaque-resume", ContinuationSupport.OPAQUE_RESUME],
  ["structured", ContinuationSupport.STRUCTURED],
] as const);
const approvals = table([
  ["none", ApprovalInterrupts.NONE],
  ["adapter-mediated", ApprovalInterrupts.ADAPTER_MEDIATED],
  ["native", ApprovalInterrupts.NATIVE],
] as const);
const streaming = table([
  ["none", StreamingSupport.NONE],
  ["adapter-mediated", StreamingSupport.ADAPTER_MEDIATED],
  ["native", StreamingSupport.NATIVE],
] as const);
const contextStrategy = table([
  ["unknown", ContextStrategy.UNKNOWN],
  ["small", ContextStrategy.SMALL],
  ["medium", ContextStrategy.MEDIUM],
  ["large", ContextStrategy.LARGE],
] as const);
const reasonCode = table<ReasonCode, PbReasonCode>([
  ["tool_use_unsupported", PbReasonCode.TOOL_USE_UNSUPPORTED],
  ["structured_tool_calls_unsupported", PbReasonCode.STRUCTURED_TOOL_CALLS_UNSUPPORTED],
  ["continuation_unsupported", PbReasonCode.CONTINUATION_UNSUPPORTED],
  ["approval_interrupt_unsupported", PbReasonCode.APPROVAL_INTERRUPT_UNSUPPORTED],
  ["attachments_unsupported", PbReasonCode.ATTACHMENTS_UNSUPPORTED],
  ["trace_depth_reduced", PbReasonCode.TRACE_DEPTH_REDUCED],
  ["context_pressure_expected", PbReasonCode.CONTEXT_PRESSURE_EXPECTED],
  ["streaming_unsupported", PbReasonCode.STREAMING_UNSUPPORTED],
  ["schema_version_unsupported", PbReasonCode.SCHEMA_VERSION_UNSUPPORTED],
  ["backend_unavailable", PbReasonCode.BACKEND_UNAVAILABLE],
  ["other", PbReasonCode.OTHER],
]);
const severity = table([
  ["info", Severity.INFO],
  ["warning", Severity.WARNING],
  ["blocking", Severity.BLOCKING],
] as const);
const suspensionKind = table([
  ["input", SuspensionKind.INPUT],
  ["auth", SuspensionKind.AUTH],
] as const);
const suspensionReason = table<SuspensionReason, PbSuspensionReason>([
  ["clarification", PbSuspensionReason.CLARIFICATION],
  ["approval", PbSuspensionReason.APPROVAL],
  ["deferred", PbSuspensionReason.DEFERRED],
]);
const toolOutcome = table([
  ["ok", ToolOutcome.OK],
  ["error", ToolOutcome.ERROR],
  ["denied", ToolOutcome.DENIED],
  ["timeout", ToolOutcome.TIMEOUT],
] as const);
const preference = table([
  ["cost", RoutingPreference.COST],
  ["latency", RoutingPreference.LATENCY],
] as const);

function valueToPb(value: JsonValue) {
  return fromJson(ValueSchema, value);
}

function valueFromPb(
  value: Parameters<typeof toJson<typeof ValueSchema>>[1] | undefined,
): JsonValue {
  return value === undefined ? null : toJson(ValueSchema, value);
}

/** Copy only the defined keys (exactOptionalPropertyTypes-friendly). */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

// ------------------------------------------------------------ requirements

/** Requirements → proto (absent ↔ UNSPECIFIED, no limit ↔ 0). */
export function requirementsToProto(value: ExecutionRequirements | undefined): PbRequirements {
  const r = value ?? {};
  return create(ExecutionRequirementsSchema, {
    toolUse: requirement.toOptional(r.toolUse),
    structuredToolCalls: requirement.toOptional(r.structuredToolCalls),
    continuationSupport: requirement.toOptional(r.continuationSupport),
    approvalInterrupts: requirement.toOptional(r.approvalInterrupts),
    traceDepth: traceDepth.toOptional(r.traceDepth),
    attachments: requirement.toOptional(r.attachments),
    streaming: requirement.toOptional(r.streaming),
    maxElapsedMs: r.maxElapsedMs ?? 0,
  });
}

function narrow<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  field: string,
): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) {
    throw contractInvalid(field, `must be one of ${allowed.join(", ")}`);
  }
  return value as T;
}

/** Proto → requirements; a value a field does not accept is an error naming it. */
export function requirementsFromProto(
  value: PbRequirements | undefined,
  field = "requirements",
): ExecutionRequirements | undefined {
  if (!value) return undefined;
  const at = (name: string) => `${field}.${name}`;
  const allow = ["forbidden", "allowed", "required"] as const;
  const prefer = ["forbidden", "preferred", "required"] as const;
  const want = ["none", "preferred", "required"] as const;
  const out: ExecutionRequirements = defined({
    toolUse: narrow(requirement.fromOptional(value.toolUse, at("tool_use")), allow, at("tool_use")),
    structuredToolCalls: narrow(
      requirement.fromOptional(value.structuredToolCalls, at("structured_tool_calls")),
      prefer,
      at("structured_tool_calls"),
    ),
    continuationSupport: narrow(
      requirement.fromOptional(value.continuationSupport, at("continuation_support")),
      want,
      at("continuation_support"),
    ),
    approvalInterrupts: narrow(
      requirement.fromOptional(value.approvalInterrupts, at("approval_interrupts")),
      want,
      at("approval_interrupts"),
    ),
    traceDepth: traceDepth.fromOptional(value.traceDepth, at("trace_depth")),
    attachments: narrow(
      requirement.fromOptional(value.attachments, at("attachments")),
      allow,
      at("attachments"),
    ),
    streaming: narrow(
      requirement.fromOptional(value.streaming, at("streaming")),
      prefer,
      at("streaming"),
    ),
    maxElapsedMs: value.maxElapsedMs === 0 ? undefined : value.maxElapsedMs,
  });
  return out;
}

// ----------------------------------------------------------- capabilities

export function capabilitiesToProto(value: ExecutionCapabilities): PbCapabilities {
  return create(ExecutionCapabilitiesSchema, {
    schemaVersion: value.schemaVersion,
    toolUse: toolUse.to(value.toolUse),
    structuredToolCalls: value.structuredToolCalls,
    continuationSupport: continuation.to(value.continuationSupport),
    approvalInterrupts: approvals.to(value.approvalInterrupts),
    traceDepth: traceDepth.to(value.traceDepth),
    attachments: value.attachments,
    streaming: streaming.to(value.streaming),
    maxContextStrategy: contextStrategy.to(value.maxContextStrategy),
    notes: [...value.notes],
  });
}

/** Proto → capabilities. Every field must be set (UNSPECIFIED is refused). */
export function capabilitiesFromProto(
  value: PbCapabilities | undefined,
  field = "capabilities",
): ExecutionCapabilities {
  if (!value) throw contractInvalid(field, "is required");
  if (value.schemaVersion < 1) throw contractInvalid(`${field}.schema_version`, "must be ≥ 1");
  return {
    schemaVersion: value.schemaVersion,
    toolUse: toolUse.from(value.toolUse, `${field}.tool_use`),
    structuredToolCalls: value.structuredToolCalls,
    continuationSupport: continuation.from(
      value.continuationSupport,
      `${field}.continuation_support`,
    ),
    approvalInterrupts: approvals.from(value.approvalInterrupts, `${field}.approval_interrupts`),
    traceDepth: traceDepth.from(value.traceDepth, `${field}.trace_depth`),
    attachments: value.attachments,
    streaming: streaming.from(value.streaming, `${field}.streaming`),
    maxContextStrategy: contextStrategy.from(
      value.maxContextStrategy,
      `${field}.max_context_strategy`,
    ),
    notes: [...value.notes],
  };
}

// ------------------------------------------------------------ negotiation

export function reasonToProto(value: NegotiationReason): PbReason {
  return create(NegotiationReasonSchema, {
    code: reasonCode.to(value.code),
    message: value.message,
    severity: severity.to(value.severity),
    ...(value.metadata ? { metadata: value.metadata } : {}),
  });
}

export function reasonFromProto(value: PbReason, field = "reason"): NegotiationReason {
  return {
    code: reasonCode.from(value.code, `${field}.code`),
    message: value.message,
    severity: severity.from(value.severity, `${field}.severity`),
    ...(value.metadata ? { metadata: value.metadata } : {}),
  };
}

export function negotiationToProto(value: ExecutionNegotiation): PbNegotiation {
  return create(ExecutionNegotiationSchema, {
    supported: value.supported,
    degraded: value.degraded,
    reasons: value.reasons.map(reasonToProto),
    effectiveCapabilities: capabilitiesToProto(value.effectiveCapabilities),
  });
}

export function negotiationFromProto(
  value: PbNegotiation | undefined,
  field = "negotiation",
): ExecutionNegotiation {
  if (!value) throw contractInvalid(field, "is required");
  return {
    supported: value.supported,
    degraded: value.degraded,
    reasons: value.reasons.map((r, i) => reasonFromProto(r, `${field}.reasons[${i}]`)),
    effectiveCapabilities: capabilitiesFromProto(
      value.effectiveCapabilities,
      `${field}.effective_capabilities`,
    ),
  };
}

// ---------------------------------------------------------------- request

export function routingPolicyToProto(value: RoutingPolicy): PbRoutingPolicy {
  return create(RoutingPolicySchema, {
    allowedBackends: [...(value.allowedBackends ?? [])],
    pinnedBackend: value.pinnedBackend ?? "",
    preference: preference.toOptional(value.preference),
    ...(value.requirements ? { requirements: requirementsToProto(value.requirements) } : {}),
  });
}

/** Most backends a routing policy may allow (the router negotiates each one per turn). */
export const MAX_POLICY_BACKENDS = 32;

export function routingPolicyFromProto(
  value: PbRoutingPolicy | undefined,
  field = "agent.routing",
): RoutingPolicy | undefined {
  if (!value) return undefined;
  if (value.allowedBackends.length > MAX_POLICY_BACKENDS) {
    throw contractInvalid(
      `${field}.allowed_backends`,
      `must list at most ${MAX_POLICY_BACKENDS} backends (got ${value.allowedBackends.length})`,
    );
  }
  const badBackend = [...value.allowedBackends, value.pinnedBackend].find(
    (id) => id !== "" && !BACKEND_ID_PATTERN.test(id),
  );
  if (badBackend !== undefined) {
    throw contractInvalid(
      `${field}.allowed_backends`,
      `must be backend ids (${BACKEND_ID_PATTERN})`,
    );
  }
  const requirements = requirementsFromProto(value.requirements, `${field}.requirements`);
  return defined({
    allowedBackends: value.allowedBackends.length ? [...value.allowedBackends] : undefined,
    pinnedBackend: value.pinnedBackend || undefined,
    preference: preference.fromOptional(value.preference, `${field}.preference`),
    requirements,
  });
}

/** TS request → proto (drops `signal`, `onEvent` and `vaultSecrets`, see the module comment). */
export function requestToProto(value: ExecutionRequest): PbRequest {
  return create(ExecutionRequestSchema, {
    schemaVersion: value.schemaVersion ?? EXECUTION_SCHEMA_VERSION,
    correlation: {
      turnId: value.taskId,
      sessionId: value.sessionId,
      agentId: value.agent.id,
      workspaceId: value.workspaceId,
      traceId: value.traceId ?? "",
      traceparent: value.traceparent ?? "",
    },
    agent: {
      backend: value.agent.backend,
      definition: value.agent.definition,
      tools: [...value.agent.tools],
      safeToRetry: value.agent.safeToRetry ?? false,
      ...(value.agent.routing ? { routing: routingPolicyToProto(value.agent.routing) } : {}),
    },
    history: [...value.history],
    input: value.input,
    ...(value.resume
      ? {
          resume: {
            checkpoint: valueToPb(value.resume.checkpoint),
            payload: valueToPb(value.resume.payload),
          },
        }
      : {}),
    ...(value.requirements ? { requirements: requirementsToProto(value.requirements) } : {}),
    tools: (value.toolDescriptors ?? []).map((t) => ({
      name: t.name,
      description: t.description ?? "",
      requiresApproval: t.requiresApproval ?? false,
      ...(t.inputSchema ? { inputSchema: t.inputSchema } : {}),
      ...(t.metadata ? { metadata: t.metadata } : {}),
    })),
    ...(value.metadata ? { metadata: value.metadata } : {}),
    ...(value.state ? { state: value.state } : {}),
  });
}

/** What a decoded request needs from the process it runs in. */
export interface RequestRuntime {
  signal: AbortSignal;
  onEvent?(event: ExecutionEvent): void;
  vaultSecrets?: ExecutionRequest["vaultSecrets"];
}

/** Proto → TS request. Validates what the TS type promises. */
export function requestFromProto(value: PbRequest, runtime: RequestRuntime): ExecutionRequest {
  const correlation = value.correlation;
  if (!correlation?.turnId) throw contractInvalid("request.correlation.turn_id", "is required");
  if (!value.agent?.backend) throw contractInvalid("request.agent.backend", "is required");
  if (!value.input) throw contractInvalid("request.input", "is required");
  const agent = value.agent;
  const routing = routingPolicyFromProto(agent.routing, "request.agent.routing");
  const requirements = requirementsFromProto(value.requirements, "request.requirements");
  const request: ExecutionRequest = {
    schemaVersion: value.schemaVersion || EXECUTION_SCHEMA_VERSION,
    taskId: correlation.turnId,
    sessionId: correlation.sessionId,
    workspaceId: correlation.workspaceId,
    agent: {
      id: correlation.agentId,
      backend: agent.backend,
      definition: agent.definition ?? {},
      tools: [...agent.tools],
      ...(agent.safeToRetry ? { safeToRetry: true } : {}),
      ...(routing ? { routing } : {}),
    },
    history: value.history,
    input: value.input,
    signal: runtime.signal,
    ...(runtime.vaultSecrets ? { vaultSecrets: runtime.vaultSecrets } : {}),
    ...(correlation.traceId ? { traceId: correlation.traceId } : {}),
    ...(correlation.traceparent ? { traceparent: correlation.traceparent } : {}),
    ...(value.resume
      ? {
          resume: {
            checkpoint: valueFromPb(value.resume.checkpoint),
            payload: valueFromPb(value.resume.payload),
          },
        }
      : {}),
    ...(requirements ? { requirements } : {}),
    ...(value.tools.length
      ? {
          toolDescriptors: value.tools.map((t) =>
            defined({
              name: t.name,
              description: t.description || undefined,
              inputSchema: t.inputSchema,
              requiresApproval: t.requiresApproval || undefined,
              metadata: t.metadata,
            }),
          ),
        }
      : {}),
    ...(value.metadata ? { metadata: value.metadata } : {}),
    ...(value.state ? { state: value.state } : {}),
    ...(runtime.onEvent ? { onEvent: runtime.onEvent } : {}),
  };
  return request;
}

// ----------------------------------------------------------------- result

function usageToProto(value: ExecutionUsage): PbUsage {
  return create(UsageSchema, {
    inputTokens: BigInt(value.inputTokens ?? 0),
    outputTokens: BigInt(value.outputTokens ?? 0),
    costUnits: value.costUnits ?? 0,
    latencyMs: value.latencyMs ?? 0,
  });
}

function usageFromProto(value: PbUsage): ExecutionUsage {
  return defined({
    inputTokens: value.inputTokens ? Number(value.inputTokens) : undefined,
    outputTokens: value.outputTokens ? Number(value.outputTokens) : undefined,
    costUnits: value.costUnits || undefined,
    latencyMs: value.latencyMs || undefined,
  });
}

export function resultToProto(value: ExecutionResult): PbResult {
  let outcome: MessageInitShape<typeof ExecutionResultSchema>["outcome"];
  switch (value.status) {
    case "completed":
      outcome = { case: "completed", value: {} };
      break;
    case "cancelled":
      outcome = { case: "cancelled", value: {} };
      break;
    case "failed":
      outcome = {
        case: "failed",
        value: {
          category: value.category,
          message: value.message,
          retryable: value.retryable,
          reasons: (value.reasons ?? []).map(reasonToProto),
        },
      };
      break;
    case "suspended":
      outcome = {
        case: "suspended",
        value: {
          signalLabel: value.signalLabel,
          metadata: value.metadata,
          kind: suspensionKind.to(value.kind),
          checkpoint: valueToPb(value.checkpoint),
          reason: suspensionReason.toOptional(value.reason),
          ...(value.approvalRequest
            ? {
                approvalRequest: {
                  reason: value.approvalRequest.reason ?? "",
                  approvalKey: value.approvalRequest.approvalKey ?? "",
                  ...(value.approvalRequest.metadata
                    ? { metadata: value.approvalRequest.metadata }
                    : {}),
                },
              }
            : {}),
        },
      };
      break;
  }
  return create(ExecutionResultSchema, {
    schemaVersion: value.schemaVersion ?? EXECUTION_SCHEMA_VERSION,
    backendId: value.backendId ?? "",
    messages: value.messages,
    outcome,
    degradation: (value.degradation ?? []).map(reasonToProto),
    ...(value.usage ? { usage: usageToProto(value.usage) } : {}),
    ...(value.state ? { state: value.state } : {}),
    ...(value.trace
      ? {
          trace: {
            startedAt: timestampFromDate(new Date(value.trace.startedAt)),
            completedAt: timestampFromDate(new Date(value.trace.completedAt)),
            stepCount: value.trace.stepCount,
            toolCallCount: value.trace.toolCallCount,
            degraded: value.trace.degraded,
          },
        }
      : {}),
  });
}

export function resultFromProto(value: PbResult | undefined, field = "result"): ExecutionResult {
  if (!value) throw contractInvalid(field, "is required");
  const info = defined({
    schemaVersion: value.schemaVersion || undefined,
    backendId: value.backendId || undefined,
    degradation: value.degradation.length
      ? value.degradation.map((r, i) => reasonFromProto(r, `${field}.degradation[${i}]`))
      : undefined,
    usage: value.usage ? usageFromProto(value.usage) : undefined,
    state: value.state,
    trace: value.trace
      ? {
          startedAt: value.trace.startedAt
            ? timestampDate(value.trace.startedAt).toISOString()
            : "",
          completedAt: value.trace.completedAt
            ? timestampDate(value.trace.completedAt).toISOString()
            : "",
          stepCount: value.trace.stepCount,
          toolCallCount: value.trace.toolCallCount,
          degraded: value.trace.degraded,
        }
      : undefined,
  });
  const messages = value.messages;
  const outcome = value.outcome;
  switch (outcome.case) {
    case "completed":
      return { status: "completed", messages, ...info };
    case "cancelled":
      return { status: "cancelled", messages, ...info };
    case "failed":
      return {
        status: "failed",
        messages,
        category: outcome.value.category,
        message: outcome.value.message,
        retryable: outcome.value.retryable,
        ...(outcome.value.reasons.length
          ? {
              reasons: outcome.value.reasons.map((r, i) =>
                reasonFromProto(r, `${field}.failed.reasons[${i}]`),
              ),
            }
          : {}),
        ...info,
      };
    case "suspended": {
      const s = outcome.value;
      const reason = suspensionReason.fromOptional(s.reason, `${field}.suspended.reason`);
      return {
        status: "suspended",
        messages,
        signalLabel: s.signalLabel,
        metadata: s.metadata ?? {},
        kind: suspensionKind.from(s.kind, `${field}.suspended.kind`),
        checkpoint: valueFromPb(s.checkpoint),
        ...(reason ? { reason } : {}),
        ...(s.approvalRequest
          ? {
              approvalRequest: defined({
                reason: s.approvalRequest.reason || undefined,
                approvalKey: s.approvalRequest.approvalKey || undefined,
                metadata: s.approvalRequest.metadata,
              }),
            }
          : {}),
        ...info,
      };
    }
    default:
      throw contractInvalid(`${field}.outcome`, "is required");
  }
}

// ----------------------------------------------------------------- events

type EventInit = MessageInitShape<typeof ExecutionEventSchema>["kind"];

function eventKindToProto(value: ExecutionEvent): EventInit {
  switch (value.kind) {
    case "text_delta":
      return { case: "textDelta", value: { text: value.text, index: value.index ?? 0 } };
    case "thinking_delta":
      return { case: "thinkingDelta", value: { text: value.text } };
    case "message":
      return { case: "message", value: value.message };
    case "tool_call_delta":
      return {
        case: "toolCallDelta",
        value: { toolCallId: value.toolCallId, name: value.name ?? "", argsDelta: value.argsDelta },
      };
    case "tool_started":
      return {
        case: "toolStarted",
        value: {
          toolCallId: value.toolCallId,
          name: value.name,
          ...(value.input !== undefined ? { input: valueToPb(value.input) } : {}),
          ...(value.mcpServer ? { mcpServer: value.mcpServer } : {}),
        },
      };
    case "tool_finished":
      return {
        case: "toolFinished",
        value: {
          toolCallId: value.toolCallId,
          name: value.name,
          outcome: toolOutcome.to(value.status),
        },
      };
    case "step_finished":
      return {
        case: "stepFinished",
        value: {
          iteration: value.iteration,
          ...(value.usage ? { usage: usageToProto(value.usage) } : {}),
        },
      };
    case "routed":
      return {
        case: "routed",
        value: {
          backendId: value.backendId,
          workerId: value.workerId,
          attempt: value.attempt,
          degraded: value.degraded,
          reasons: value.reasons.map(reasonToProto),
        },
      };
    case "turn_finished":
      return { case: "turnFinished", value: { result: resultToProto(value.result) } };
  }
}

export function eventToProto(value: ExecutionEvent): PbEvent {
  return create(ExecutionEventSchema, { kind: eventKindToProto(value) });
}

export function eventFromProto(value: PbEvent, field = "event"): ExecutionEvent {
  const kind = value.kind;
  switch (kind.case) {
    case "textDelta":
      return defined({
        kind: "text_delta",
        text: kind.value.text,
        index: kind.value.index || undefined,
      });
    case "thinkingDelta":
      return { kind: "thinking_delta", text: kind.value.text };
    case "message":
      return { kind: "message", message: kind.value };
    case "toolCallDelta":
      return defined({
        kind: "tool_call_delta",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name || undefined,
        argsDelta: kind.value.argsDelta,
      });
    case "toolStarted":
      return {
        kind: "tool_started",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name,
        ...(kind.value.input ? { input: valueFromPb(kind.value.input) } : {}),
        ...(kind.value.mcpServer ? { mcpServer: kind.value.mcpServer } : {}),
      };
    case "toolFinished":
      return {
        kind: "tool_finished",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name,
        status: toolOutcome.from(kind.value.outcome, `${field}.tool_finished.outcome`),
      };
    case "stepFinished":
      return {
        kind: "step_finished",
        iteration: kind.value.iteration,
        ...(kind.value.usage ? { usage: usageFromProto(kind.value.usage) } : {}),
      };
    case "routed":
      return {
        kind: "routed",
        backendId: kind.value.backendId,
        workerId: kind.value.workerId,
        attempt: kind.value.attempt,
        degraded: kind.value.degraded,
        reasons: kind.value.reasons.map((r, i) =>
          reasonFromProto(r, `${field}.routed.reasons[${i}]`),
        ),
      };
    case "turnFinished":
      return {
        kind: "turn_finished",
        result: resultFromProto(kind.value.result, `${field}.turn_finished.result`),
      };
    default:
      throw contractInvalid(`${field}.kind`, "is required");
  }
}

/** Vault grants → proto (`VaultGrant`, of SecretsResponse and GetAgentVaultsResponse). */
export function vaultGrantsToProto(
  vaults: ReadonlyMap<string, VaultGrant>,
): MessageInitShape<typeof VaultGrantSchema>[] {
  return [...vaults].map(([vaultId, grant]) =>
    grant.allowed
      ? {
          vaultId,
          allowed: true,
          secrets: Object.fromEntries(grant.secrets),
          ...(grant.fingerprints ? { fingerprints: Object.fromEntries(grant.fingerprints) } : {}),
        }
      : { vaultId, allowed: false, reason: grant.reason },
  );
}

/**
 * Proto `VaultGrant`s → vault grants, by vault id.
 *
 * @throws TrellisError `execution_contract_invalid` when a fingerprint is not
 *   `hmac-sha256:<64 lowercase hex>` or names a secret the vault does not
 *   grant (the sender is broken: no record may carry it).
 */
export function vaultGrantsFromProto(
  vaults: readonly PbVaultGrant[],
): ReadonlyMap<string, VaultGrant> {
  return new Map(
    vaults.map((vault, i): [string, VaultGrant] => {
      if (!vault.allowed) return [vault.vaultId, { allowed: false, reason: vault.reason }];
      const fingerprints = new Map<string, SecretFingerprint>();
      for (const [name, fingerprint] of Object.entries(vault.fingerprints)) {
        const field = `vaults[${i}].fingerprints[${JSON.stringify(name)}]`;
        if (!isSecretFingerprint(fingerprint)) {
          throw contractInvalid(field, "must be hmac-sha256:<64 lowercase hex>");
        }
        if (!Object.hasOwn(vault.secrets, name)) {
          throw contractInvalid(field, `names no secret of vault ${vault.vaultId}`);
        }
        fingerprints.set(name, fingerprint);
      }
      const secrets = new Map(Object.entries(vault.secrets));
      return [
        vault.vaultId,
        fingerprints.size > 0
          ? { allowed: true, secrets, fingerprints }
          : { allowed: true, secrets },
      ];
    }),
  );
}
