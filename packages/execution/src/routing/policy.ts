/**
 * Routing decisions, pure: which backends an agent allows, how each one
 * negotiated, and which one runs the request — the pinned backend, then the
 * best capability fit (fewest warnings), then cost / latency hints in the
 * agent's preferred order, then the least loaded. No I/O: the router feeds
 * it the registry's view and the negotiations.
 *
 * An agent states its policy in its definition, next to what its backend
 * reads (the router removes it before the backend sees the definition):
 *
 * ```json
 * "routing": {
 *   "backends": ["harness-a", "harness-b"],
 *   "pinned": "harness-a",
 *   "prefer": "latency",
 *   "requirements": { "approval_interrupts": "required", "max_elapsed_ms": 30000 }
 * }
 * ```
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  BACKEND_ID_PATTERN,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionRequirements,
  type ExecutionResult,
  type NegotiationReason,
  type RoutingPolicy,
  requirementProblems,
} from "@trellis/adapter-sdk";
import { isJsonObject, TrellisError } from "@trellis/runtime";
import type { BackendHints, BackendView } from "./registry.js";

/** Most backends a routing policy may allow (each one is negotiated per turn). */
export const MAX_ROUTING_BACKENDS = 32;
/** Blocking reasons named in a "no backend" message; the rest are counted. */
const REASONS_IN_MESSAGE = 8;
/** Reasons kept on a "no backend" result (and so in its events). */
const MAX_REASONS = 64;

/** The definition key holding the routing policy. */
export const ROUTING_KEY = "routing";

function definitionInvalid(param: string, message: string): TrellisError {
  return new TrellisError({
    reason: "agent_definition_invalid",
    message: `${param}: ${message}`,
    param,
  });
}

const REQUIREMENT_KEYS: Record<string, keyof ExecutionRequirements> = {
  tool_use: "toolUse",
  structured_tool_calls: "structuredToolCalls",
  continuation_support: "continuationSupport",
  approval_interrupts: "approvalInterrupts",
  trace_depth: "traceDepth",
  attachments: "attachments",
  streaming: "streaming",
  max_elapsed_ms: "maxElapsedMs",
};

/**
 * Read the routing policy out of an agent definition. Returns the policy
 * and the definition without it; throws `agent_definition_invalid` naming
 * the bad field.
 */
export function routingFromDefinition(definition: JsonObject): {
  policy?: RoutingPolicy;
  definition: JsonObject;
} {
  const raw = definition[ROUTING_KEY];
  if (raw === undefined) return { definition };
  const base = `agent.definition.${ROUTING_KEY}`;
  if (!isJsonObject(raw)) throw definitionInvalid(base, "must be an object");
  const known = new Set(["backends", "pinned", "prefer", "requirements"]);
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) throw definitionInvalid(`${base}.${key}`, "is not a routing field");
  }
  const policy: RoutingPolicy = {};
  if (raw.backends !== undefined) {
    if (
      !Array.isArray(raw.backends) ||
      raw.backends.some((b) => typeof b !== "string" || !BACKEND_ID_PATTERN.test(b))
    ) {
      throw definitionInvalid(
        `${base}.backends`,
        `must be a list of backend ids (${BACKEND_ID_PATTERN})`,
      );
    }
    if (raw.backends.length > MAX_ROUTING_BACKENDS) {
      throw definitionInvalid(
        `${base}.backends`,
        `must list at most ${MAX_ROUTING_BACKENDS} backends (got ${raw.backends.length})`,
      );
    }
    policy.allowedBackends = [...new Set(raw.backends as string[])];
  }
  if (raw.pinned !== undefined) {
    if (typeof raw.pinned !== "string" || !BACKEND_ID_PATTERN.test(raw.pinned)) {
      throw definitionInvalid(`${base}.pinned`, "must be a backend id");
    }
    policy.pinnedBackend = raw.pinned;
  }
  if (raw.prefer !== undefined) {
    if (raw.prefer !== "cost" && raw.prefer !== "latency") {
      throw definitionInvalid(`${base}.prefer`, "must be cost or latency");
    }
    policy.preference = raw.prefer;
  }
  if (raw.requirements !== undefined) {
    if (!isJsonObject(raw.requirements)) {
      throw definitionInvalid(`${base}.requirements`, "must be an object");
    }
    const requirements: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw.requirements)) {
      const field = REQUIREMENT_KEYS[key];
      if (!field) throw definitionInvalid(`${base}.requirements.${key}`, "is not a requirement");
      requirements[field] = value;
    }
    const [problem] = requirementProblems(requirements as ExecutionRequirements);
    if (problem) {
      const key = Object.entries(REQUIREMENT_KEYS).find(([, f]) => f === problem.field)?.[0];
      throw definitionInvalid(`${base}.requirements.${key ?? problem.field}`, problem.message);
    }
    policy.requirements = requirements as ExecutionRequirements;
  }
  const { [ROUTING_KEY]: _policy, ...rest } = definition;
  return { policy, definition: rest };
}

/** Marker of a checkpoint the router wrapped (so a resume goes back to its backend). */
const CHECKPOINT_MARK = "trellis.routed";

/** Wrap a backend's checkpoint with the backend that produced it. */
export function wrapCheckpoint(backendId: string, checkpoint: JsonValue): JsonValue {
  return { [CHECKPOINT_MARK]: 1, backend: backendId, state: checkpoint };
}

/** Unwrap a checkpoint; a foreign one (not wrapped) is returned as it is. */
export function unwrapCheckpoint(checkpoint: JsonValue): { backend?: string; state: JsonValue } {
  if (
    isJsonObject(checkpoint) &&
    checkpoint[CHECKPOINT_MARK] === 1 &&
    typeof checkpoint.backend === "string" &&
    "state" in checkpoint
  ) {
    return { backend: checkpoint.backend, state: checkpoint.state ?? null };
  }
  return { state: checkpoint };
}

/** A request made ready for routing. */
export interface PreparedRequest {
  /** The request backends see: definition without routing, checkpoint unwrapped, policy attached. */
  request: ExecutionRequest;
  /** Backends that may run it, primary first. */
  allowed: string[];
  /** Only this one (a pinned policy, or the backend a resumed turn suspended on). */
  pinned?: string;
}

/** Resolve the policy, the allowed backends and the resume backend of a request. */
export function prepareRequest(request: ExecutionRequest): PreparedRequest {
  const fromDefinition = routingFromDefinition(request.agent.definition);
  const policy = request.agent.routing ?? fromDefinition.policy;
  const allowed = [
    ...new Set([request.agent.backend, ...(policy?.allowedBackends ?? [])].filter(Boolean)),
  ];
  let pinned = policy?.pinnedBackend;
  if (pinned && !allowed.includes(pinned)) {
    throw definitionInvalid(
      `agent.definition.${ROUTING_KEY}.pinned`,
      `${pinned} is not one of the agent's backends (${allowed.join(", ")})`,
    );
  }
  let resume = request.resume;
  if (resume) {
    const unwrapped = unwrapCheckpoint(resume.checkpoint);
    // A suspended turn continues where its state lives.
    if (unwrapped.backend) pinned = unwrapped.backend;
    resume = { checkpoint: unwrapped.state, payload: resume.payload };
  }
  const prepared: ExecutionRequest = {
    ...request,
    agent: {
      ...request.agent,
      definition: fromDefinition.definition,
      ...(policy ? { routing: policy } : {}),
    },
    ...(resume ? { resume } : {}),
  };
  return { request: prepared, allowed, ...(pinned ? { pinned } : {}) };
}

/** One backend considered for a request. */
export interface Candidate {
  backendId: string;
  negotiation: ExecutionNegotiation;
  hints: BackendHints;
  /** In flight per unit of capacity. */
  load: number;
  inProcess: boolean;
}

/** Where a request goes, and why. */
export interface Decision {
  chosen?: Candidate;
  /** Supported candidates in preference order, then the unsupported ones. */
  candidates: Candidate[];
  /** The chosen backend's non-blocking reasons, or every blocking reason when none was chosen. */
  reasons: NegotiationReason[];
}

/** Reasons tagged with the backend they came from. */
function tagged(backendId: string, reasons: NegotiationReason[]): NegotiationReason[] {
  return reasons.map((r) => ({ ...r, metadata: { ...(r.metadata ?? {}), backend: backendId } }));
}

/** Compare two hint values where 0 means unknown (unknown sorts last). */
function byHint(a: number, b: number): number {
  if (a === b) return 0;
  if (a === 0) return 1;
  if (b === 0) return -1;
  return a - b;
}

function warnings(c: Candidate): number {
  return c.negotiation.reasons.filter((r) => r.severity === "warning").length;
}

/** Inputs of {@link decide}. */
export interface DecideInputs {
  prepared: PreparedRequest;
  /** The registry's view of a backend (undefined: no live worker). */
  view(backendId: string): BackendView | undefined;
  /** Negotiate the request with a backend (pure). */
  negotiate(view: BackendView, request: ExecutionRequest): ExecutionNegotiation;
  /** Backends already refused at claim time, with their reasons. */
  excluded?: ReadonlyMap<string, NegotiationReason[]>;
}

/** Decide where a request runs. Pure given its inputs. */
export function decide(inputs: DecideInputs): Decision {
  const { prepared } = inputs;
  const names = prepared.pinned ? [prepared.pinned] : prepared.allowed;
  const candidates: Candidate[] = [];
  const blocking: NegotiationReason[] = [];
  for (const backendId of names) {
    const refused = inputs.excluded?.get(backendId);
    if (refused) {
      blocking.push(
        ...tagged(
          backendId,
          refused.filter((r) => r.severity === "blocking"),
        ),
      );
      continue;
    }
    const view = inputs.view(backendId);
    if (!view) {
      blocking.push({
        code: "backend_unavailable",
        severity: "blocking",
        message: `backend ${backendId} has no live worker`,
        metadata: { backend: backendId },
      });
      continue;
    }
    const negotiation = inputs.negotiate(view, prepared.request);
    candidates.push({
      backendId,
      negotiation,
      hints: view.hints,
      load: view.capacity > 0 ? view.inFlight / view.capacity : Number.POSITIVE_INFINITY,
      inProcess: view.inProcess,
    });
    if (!negotiation.supported) {
      blocking.push(
        ...tagged(
          backendId,
          negotiation.reasons.filter((r) => r.severity === "blocking"),
        ),
      );
    }
  }
  const preference = prepared.request.agent.routing?.preference;
  const supported = candidates
    .filter((c) => c.negotiation.supported)
    .sort(
      (a, b) =>
        warnings(a) - warnings(b) ||
        (preference === "latency"
          ? byHint(a.hints.latencyMs, b.hints.latencyMs) ||
            byHint(a.hints.costPerExecution, b.hints.costPerExecution)
          : byHint(a.hints.costPerExecution, b.hints.costPerExecution) ||
            byHint(a.hints.latencyMs, b.hints.latencyMs)) ||
        a.load - b.load ||
        a.backendId.localeCompare(b.backendId),
    );
  const ordered = [...supported, ...candidates.filter((c) => !c.negotiation.supported)];
  const chosen = supported[0];
  if (!chosen) return { candidates: ordered, reasons: blocking };
  return {
    chosen,
    candidates: ordered,
    reasons: chosen.negotiation.reasons.filter((r) => r.severity !== "blocking"),
  };
}

/**
 * The result when no backend can run a request: `unsupported` with every
 * blocking reason, or `backend_unavailable` (retryable) when the only
 * problem is that no allowed backend has a live worker now.
 */
export function noBackendResult(reasons: NegotiationReason[]): ExecutionResult {
  const onlyUnavailable =
    reasons.length > 0 && reasons.every((r) => r.code === "backend_unavailable");
  // Summarised past a bound: the message and the reasons travel in the
  // turn's failure event, which must stay small whatever the policy lists.
  const clip = (text: string, max: number) =>
    text.length > max ? `${text.slice(0, max - 3)}...` : text;
  let listed = reasons
    .slice(0, REASONS_IN_MESSAGE)
    .map(
      (r) => `${clip(String(r.metadata?.backend ?? "?"), 64)}: ${r.code} (${clip(r.message, 200)})`,
    )
    .join("; ");
  if (reasons.length > REASONS_IN_MESSAGE) {
    listed += `; and ${reasons.length - REASONS_IN_MESSAGE} more`;
  }
  return {
    status: "failed",
    messages: [],
    category: onlyUnavailable ? "backend_unavailable" : "unsupported",
    message: `no backend allowed for the agent can run this request: ${listed || "the agent allows no backend"}`,
    retryable: onlyUnavailable,
    reasons: reasons.slice(0, MAX_REASONS).map((r) => ({ ...r, message: clip(r.message, 500) })),
  };
}
