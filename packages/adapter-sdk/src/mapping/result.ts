/**
 * Mapping of the execution result (outcome oneof) and its usage.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ExecutionResultSchema,
  type ExecutionResult as PbResult,
  type Usage as PbUsage,
  UsageSchema,
} from "@trellis/contracts/adapters";
import { EXECUTION_SCHEMA_VERSION, type ExecutionResult, type ExecutionUsage } from "../types.js";
import { reasonFromProto, reasonToProto } from "./negotiation.js";
import {
  contractInvalid,
  defined,
  suspensionKind,
  suspensionReason,
  valueFromPb,
  valueToPb,
} from "./tables.js";

// ----------------------------------------------------------------- result

export function usageToProto(value: ExecutionUsage): PbUsage {
  return create(UsageSchema, {
    inputTokens: BigInt(value.inputTokens ?? 0),
    outputTokens: BigInt(value.outputTokens ?? 0),
    costUnits: value.costUnits ?? 0,
    latencyMs: value.latencyMs ?? 0,
  });
}

export function usageFromProto(value: PbUsage): ExecutionUsage {
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
