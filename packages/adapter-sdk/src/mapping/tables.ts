/**
 * The enum tables between the seam's strings and the proto enums, and the
 * helpers every part of the mapping uses (contractInvalid, narrow, Value).
 */
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ApprovalInterrupts,
  ContextStrategy,
  ContinuationSupport,
  ReasonCode as PbReasonCode,
  SuspensionReason as PbSuspensionReason,
  TraceDepth as PbTraceDepth,
  Requirement,
  RoutingPreference,
  Severity,
  StreamingSupport,
  SuspensionKind,
  ToolOutcome,
  ToolUseSupport,
} from "@trellis/contracts/adapters";
import { TrellisError } from "@trellis/runtime";
import type { ReasonCode, SuspensionReason } from "../types.js";

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

export const requirement = table([
  ["forbidden", Requirement.FORBIDDEN],
  ["none", Requirement.NONE],
  ["allowed", Requirement.ALLOWED],
  ["preferred", Requirement.PREFERRED],
  ["required", Requirement.REQUIRED],
] as const);
export const traceDepth = table([
  ["minimal", PbTraceDepth.MINIMAL],
  ["standard", PbTraceDepth.STANDARD],
  ["detailed", PbTraceDepth.DETAILED],
] as const);
export const toolUse = table([
  ["none", ToolUseSupport.NONE],
  ["adapter-mediated", ToolUseSupport.ADAPTER_MEDIATED],
  ["native-iterative", ToolUseSupport.NATIVE_ITERATIVE],
] as const);
export const continuation = table([
  ["none", ContinuationSupport.NONE],
  ["opaque-resume", ContinuationSupport.OPAQUE_RESUME],
  ["structured", ContinuationSupport.STRUCTURED],
] as const);
export const approvals = table([
  ["none", ApprovalInterrupts.NONE],
  ["adapter-mediated", ApprovalInterrupts.ADAPTER_MEDIATED],
  ["native", ApprovalInterrupts.NATIVE],
] as const);
export const streaming = table([
  ["none", StreamingSupport.NONE],
  ["adapter-mediated", StreamingSupport.ADAPTER_MEDIATED],
  ["native", StreamingSupport.NATIVE],
] as const);
export const contextStrategy = table([
  ["unknown", ContextStrategy.UNKNOWN],
  ["small", ContextStrategy.SMALL],
  ["medium", ContextStrategy.MEDIUM],
  ["large", ContextStrategy.LARGE],
] as const);
export const reasonCode = table<ReasonCode, PbReasonCode>([
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
export const severity = table([
  ["info", Severity.INFO],
  ["warning", Severity.WARNING],
  ["blocking", Severity.BLOCKING],
] as const);
export const suspensionKind = table([
  ["input", SuspensionKind.INPUT],
  ["auth", SuspensionKind.AUTH],
] as const);
export const suspensionReason = table<SuspensionReason, PbSuspensionReason>([
  ["clarification", PbSuspensionReason.CLARIFICATION],
  ["approval", PbSuspensionReason.APPROVAL],
  ["deferred", PbSuspensionReason.DEFERRED],
]);
export const toolOutcome = table([
  ["ok", ToolOutcome.OK],
  ["error", ToolOutcome.ERROR],
  ["denied", ToolOutcome.DENIED],
  ["timeout", ToolOutcome.TIMEOUT],
] as const);
export const preference = table([
  ["cost", RoutingPreference.COST],
  ["latency", RoutingPreference.LATENCY],
] as const);

export function valueToPb(value: JsonValue) {
  return fromJson(ValueSchema, value);
}

export function valueFromPb(
  value: Parameters<typeof toJson<typeof ValueSchema>>[1] | undefined,
): JsonValue {
  return value === undefined ? null : toJson(ValueSchema, value);
}

/** Copy only the defined keys (exactOptionalPropertyTypes-friendly). */
export function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

export function narrow<T extends string>(
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
