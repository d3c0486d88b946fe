/**
 * Mapping of the execution request and its routing policy.
 */
import { create } from "@bufbuild/protobuf";
import {
  ExecutionRequestSchema,
  type ExecutionRequest as PbRequest,
  type RoutingPolicy as PbRoutingPolicy,
  RoutingPolicySchema,
} from "@trellis/contracts/adapters";
import { BACKEND_ID_PATTERN } from "../define-adapter.js";
import {
  EXECUTION_SCHEMA_VERSION,
  type ExecutionEvent,
  type ExecutionRequest,
  type RoutingPolicy,
} from "../types.js";
import { requirementsFromProto, requirementsToProto } from "./negotiation.js";
import { contractInvalid, defined, preference, valueFromPb, valueToPb } from "./tables.js";

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
