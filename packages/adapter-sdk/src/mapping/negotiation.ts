/**
 * Mapping of requirements, capabilities and the negotiation (reasons).
 */
import { create } from "@bufbuild/protobuf";
import {
  ExecutionCapabilitiesSchema,
  ExecutionNegotiationSchema,
  ExecutionRequirementsSchema,
  NegotiationReasonSchema,
  type ExecutionCapabilities as PbCapabilities,
  type ExecutionNegotiation as PbNegotiation,
  type NegotiationReason as PbReason,
  type ExecutionRequirements as PbRequirements,
} from "@trellis/contracts/adapters";
import type {
  ExecutionCapabilities,
  ExecutionNegotiation,
  ExecutionRequirements,
  NegotiationReason,
} from "../types.js";
import {
  approvals,
  contextStrategy,
  continuation,
  contractInvalid,
  defined,
  narrow,
  reasonCode,
  requirement,
  severity,
  streaming,
  toolUse,
  traceDepth,
} from "./tables.js";

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
/** Proto → requirements; a value a field does not accept is an error naming it. */
export function requirementsFromProto(
  value: PbRequirements | undefined,
  field = "requirements",
): ExecutionRequirements | undefined {
  if (!value) return undefined;
  const at = (name: string) => `${field}.${name}`;
  /** Requirement field `name` (proto number `raw`), one of `allowed`. */
  const level = <T extends string>(raw: number, name: string, allowed: readonly T[]) =>
    narrow(requirement.fromOptional(raw, at(name)), allowed, at(name));
  const allow = ["forbidden", "allowed", "required"] as const;
  const prefer = ["forbidden", "preferred", "required"] as const;
  const want = ["none", "preferred", "required"] as const;
  const out: ExecutionRequirements = defined({
    toolUse: level(value.toolUse, "tool_use", allow),
    structuredToolCalls: level(value.structuredToolCalls, "structured_tool_calls", prefer),
    continuationSupport: level(value.continuationSupport, "continuation_support", want),
    approvalInterrupts: level(value.approvalInterrupts, "approval_interrupts", want),
    traceDepth: traceDepth.fromOptional(value.traceDepth, at("trace_depth")),
    attachments: level(value.attachments, "attachments", allow),
    streaming: level(value.streaming, "streaming", prefer),
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
