/**
 * Capability negotiation, pure: given what a backend can do and what a
 * request needs, say whether it can run, what it loses, and what it will
 * really get. No I/O and no state — the router calls it for every candidate
 * backend of every execution, and adapters use it as their `negotiate()`.
 *
 * Truthful degradation (BYOH §1.4): a `required` capability that is absent
 * is blocking; a `preferred` one is a warning (the run is degraded and says
 * so); what is merely different is info.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";
import {
  EXECUTION_SCHEMA_VERSION,
  type ExecutionCapabilities,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionRequirements,
  type NegotiationReason,
  type ReasonCode,
  type TraceDepth,
} from "./types.js";

/** Value orders, weakest first (used to compare and to merge workers). */
export const CAPABILITY_ORDER = {
  toolUse: ["none", "adapter-mediated", "native-iterative"],
  continuationSupport: ["none", "opaque-resume", "structured"],
  approvalInterrupts: ["none", "adapter-mediated", "native"],
  traceDepth: ["minimal", "standard", "detailed"],
  streaming: ["none", "adapter-mediated", "native"],
  maxContextStrategy: ["unknown", "small", "medium", "large"],
} as const;

const REQUIREMENT_VALUES = {
  toolUse: ["forbidden", "allowed", "required"],
  structuredToolCalls: ["forbidden", "preferred", "required"],
  continuationSupport: ["none", "preferred", "required"],
  approvalInterrupts: ["none", "preferred", "required"],
  traceDepth: ["minimal", "standard", "detailed"],
  attachments: ["forbidden", "allowed", "required"],
  streaming: ["forbidden", "preferred", "required"],
} as const;

/** A problem with capabilities or requirements: which field, and what is wrong. */
export interface SeamProblem {
  field: string;
  message: string;
}

/** Most notes a capability declaration may carry (they travel in every heartbeat). */
export const MAX_CAPABILITY_NOTES = 32;
/** Longest capability note, in characters. */
export const MAX_CAPABILITY_NOTE_CHARS = 512;

/** Check capabilities are complete and valid (registration, conformance). */

export function capabilityProblems(value: unknown): SeamProblem[] {
  const problems: SeamProblem[] = [];
  if (typeof value !== "object" || value === null) {
    return [{ field: "capabilities", message: "must be an object" }];
  }
  const caps = value as Record<string, unknown>;
  const version = caps.schemaVersion;
  if (typeof version !== "number" || !Number.isInteger(version) || version < 1) {
    problems.push({ field: "schemaVersion", message: "must be a positive integer" });
  }
  for (const [field, allowed] of Object.entries(CAPABILITY_ORDER)) {
    if (!(allowed as readonly unknown[]).includes(caps[field])) {
      problems.push({ field, message: `must be one of ${allowed.join(", ")}` });
    }
  }
  for (const field of ["structuredToolCalls", "attachments"]) {
    if (typeof caps[field] !== "boolean") problems.push({ field, message: "must be a boolean" });
  }
  if (!Array.isArray(caps.notes) || caps.notes.some((n) => typeof n !== "string")) {
    problems.push({ field: "notes", message: "must be a list of strings" });
  } else if (caps.notes.length > MAX_CAPABILITY_NOTES) {
    problems.push({ field: "notes", message: `must hold at most ${MAX_CAPABILITY_NOTES} notes` });
  } else {
    const long = caps.notes.findIndex((n: string) => n.length > MAX_CAPABILITY_NOTE_CHARS);
    if (long >= 0) {
      problems.push({
        field: `notes[${long}]`,
        message: `must be at most ${MAX_CAPABILITY_NOTE_CHARS} characters`,
      });
    }
  }
  return problems;
}

/** Check requirements use only the values each field accepts. */
export function requirementProblems(value: ExecutionRequirements | undefined): SeamProblem[] {
  if (value === undefined) return [];
  const problems: SeamProblem[] = [];
  for (const [field, allowed] of Object.entries(REQUIREMENT_VALUES)) {
    const given = (value as Record<string, unknown>)[field];
    if (given !== undefined && !(allowed as readonly unknown[]).includes(given)) {
      problems.push({ field, message: `must be one of ${allowed.join(", ")}` });
    }
  }
  const max = value.maxElapsedMs;
  if (max !== undefined && (!Number.isInteger(max) || max < 1 || max > 0xffffffff)) {
    problems.push({ field: "maxElapsedMs", message: "must be a positive whole number of ms" });
  }
  return problems;
}

/** Levels of the requirements that only grow stricter (weakest first). */
const STRICTNESS: Readonly<Record<string, readonly string[]>> = {
  continuationSupport: ["none", "preferred", "required"],
  approvalInterrupts: ["none", "preferred", "required"],
  traceDepth: ["minimal", "standard", "detailed"],
};
/** Requirements with two opposite strict values; the middle one is open. */
const OPEN_VALUE: Readonly<Record<string, string>> = {
  toolUse: "allowed",
  attachments: "allowed",
  structuredToolCalls: "preferred",
  streaming: "preferred",
};

/**
 * Narrow `base` (an agent's requirements) by `extra` (one request's): each
 * field takes the stricter value — a level only rises, an open value
 * (`allowed`, `preferred`) may become `forbidden` or `required`, a time limit
 * only shrinks. A weaker value is ignored (a request cannot loosen its
 * agent); two opposite strict values (`forbidden` against `required`) are a
 * conflict, named by field. Both inputs must be valid ({@link requirementProblems}).
 *
 * @example
 *   narrowRequirements({ toolUse: "allowed" }, { toolUse: "forbidden" })
 *   // → { requirements: { toolUse: "forbidden" }, conflicts: [] }
 */
export function narrowRequirements(
  base: ExecutionRequirements,
  extra: ExecutionRequirements,
): { requirements: ExecutionRequirements; conflicts: SeamProblem[] } {
  const merged: Record<string, unknown> = { ...base };
  const conflicts: SeamProblem[] = [];
  for (const [field, value] of Object.entries(extra)) {
    if (value === undefined) continue;
    const had = merged[field];
    if (had === undefined) {
      merged[field] = value;
    } else if (field === "maxElapsedMs") {
      merged[field] = Math.min(had as number, value as number);
    } else if (STRICTNESS[field]) {
      const order = STRICTNESS[field];
      if (order.indexOf(value as string) > order.indexOf(had as string)) merged[field] = value;
    } else if (OPEN_VALUE[field] !== undefined) {
      if (had === OPEN_VALUE[field]) merged[field] = value;
      else if (value !== OPEN_VALUE[field] && value !== had) {
        conflicts.push({
          field,
          message: `is ${String(value)} but the agent's routing requires ${String(had)}`,
        });
      }
    }
  }
  return { requirements: merged as ExecutionRequirements, conflicts };
}

function rank<K extends keyof typeof CAPABILITY_ORDER>(
  field: K,
  value: (typeof CAPABILITY_ORDER)[K][number],
): number {
  return (CAPABILITY_ORDER[field] as readonly string[]).indexOf(value);
}

/**
 * The weakest value of every capability (what all workers of one backend can
 * promise when they disagree).
 */
export function weakestCapabilities(all: readonly ExecutionCapabilities[]): ExecutionCapabilities {
  const [first, ...rest] = all;
  if (!first) throw new Error("weakestCapabilities needs at least one set");
  const pick = <K extends keyof typeof CAPABILITY_ORDER>(field: K) =>
    rest.reduce(
      (weakest, caps) => (rank(field, caps[field]) < rank(field, weakest) ? caps[field] : weakest),
      first[field],
    );
  return {
    schemaVersion: Math.min(...all.map((c) => c.schemaVersion)),
    toolUse: pick("toolUse"),
    structuredToolCalls: all.every((c) => c.structuredToolCalls),
    continuationSupport: pick("continuationSupport"),
    approvalInterrupts: pick("approvalInterrupts"),
    traceDepth: pick("traceDepth"),
    attachments: all.every((c) => c.attachments),
    streaming: pick("streaming"),
    maxContextStrategy: pick("maxContextStrategy"),
    notes: [...new Set(all.flatMap((c) => c.notes))],
  };
}

/** Parts that are attachments rather than text (images, files, artifacts). */
export function attachmentCount(message: Message | undefined): number {
  if (!message) return 0;
  return message.parts.filter((p) =>
    ["image", "imageRef", "fileRef", "artifactRef"].includes(p.kind.case ?? ""),
  ).length;
}

/**
 * The requirements a request really has: the agent's policy, overridden by
 * the request's own, plus what its input implies — an input that carries
 * attachments requires them (dropping them silently would launder the turn).
 */
export function effectiveRequirements(
  request: Pick<ExecutionRequest, "requirements" | "input" | "agent">,
): ExecutionRequirements {
  const merged: ExecutionRequirements = { ...(request.agent.routing?.requirements ?? {}) };
  for (const [key, value] of Object.entries(request.requirements ?? {})) {
    if (value !== undefined) (merged as Record<string, unknown>)[key] = value;
  }
  if (attachmentCount(request.input) > 0 && merged.attachments !== "forbidden") {
    merged.attachments = "required";
  }
  return merged;
}

function reason(
  code: ReasonCode,
  severity: NegotiationReason["severity"],
  message: string,
  metadata?: JsonObject,
): NegotiationReason {
  return { code, severity, message, ...(metadata ? { metadata } : {}) };
}

/** Histories longer than this are a squeeze for a backend with a small context. */
const SMALL_CONTEXT_MESSAGES = 40;

/**
 * Negotiate `request` against `capabilities`. Pure and deterministic.
 *
 * @example
 *   const n = negotiateCapabilities(caps, request);
 *   if (!n.supported) return unsupportedResult(n.reasons);
 */
export function negotiateCapabilities(
  capabilities: ExecutionCapabilities,
  request: Pick<
    ExecutionRequest,
    "requirements" | "input" | "agent" | "schemaVersion" | "history" | "toolDescriptors"
  >,
): ExecutionNegotiation {
  const needs = effectiveRequirements(request);
  const reasons: NegotiationReason[] = [];
  const effective: ExecutionCapabilities = { ...capabilities, notes: [...capabilities.notes] };
  const version = request.schemaVersion ?? EXECUTION_SCHEMA_VERSION;
  if (version > capabilities.schemaVersion) {
    reasons.push(
      reason(
        "schema_version_unsupported",
        "blocking",
        `the request follows contract version ${version}; the backend understands up to ${capabilities.schemaVersion}`,
      ),
    );
  }

  // Tool use.
  const wantsTools =
    needs.toolUse ?? ((request.toolDescriptors?.length ?? 0) > 0 ? "allowed" : undefined);
  if (wantsTools === "forbidden") effective.toolUse = "none";
  else if (capabilities.toolUse === "none" && wantsTools === "required") {
    reasons.push(
      reason(
        "tool_use_unsupported",
        "blocking",
        "the request needs tool use; the backend has none",
      ),
    );
  } else if (capabilities.toolUse === "none" && wantsTools === "allowed") {
    reasons.push(
      reason(
        "tool_use_unsupported",
        "warning",
        "the request offers tools; the backend cannot use them",
      ),
    );
  }
  if (needs.structuredToolCalls === "forbidden") effective.structuredToolCalls = false;
  else if (!capabilities.structuredToolCalls && needs.structuredToolCalls === "required") {
    reasons.push(
      reason(
        "structured_tool_calls_unsupported",
        "blocking",
        "the request needs structured tool calls",
      ),
    );
  } else if (!capabilities.structuredToolCalls && needs.structuredToolCalls === "preferred") {
    reasons.push(
      reason("structured_tool_calls_unsupported", "warning", "tool calls will not be structured"),
    );
  }

  // Continuation: a transcript dump is not structured continuation (BYOH §1.4).
  const continuation = capabilities.continuationSupport;
  if (needs.continuationSupport === "required" || needs.continuationSupport === "preferred") {
    const severity = needs.continuationSupport === "required" ? "blocking" : "warning";
    if (continuation === "none") {
      reasons.push(
        reason("continuation_unsupported", severity, "the backend cannot resume a suspended turn"),
      );
    } else if (continuation === "opaque-resume") {
      reasons.push(
        reason("continuation_unsupported", "info", "the backend resumes from opaque state only"),
      );
    }
  }

  // Approvals: only a native interrupt pauses inside the turn; gating around
  // the backend, or text asking for approval, is not the same thing.
  const approvals = capabilities.approvalInterrupts;
  if (needs.approvalInterrupts === "required" && approvals !== "native") {
    reasons.push(
      reason(
        "approval_interrupt_unsupported",
        "blocking",
        approvals === "none"
          ? "the request needs approval interrupts; the backend has none"
          : "the request needs native approval interrupts; the backend only gates around execution",
      ),
    );
  } else if (needs.approvalInterrupts === "preferred" && approvals === "none") {
    reasons.push(
      reason("approval_interrupt_unsupported", "warning", "the backend cannot pause for approval"),
    );
  } else if (needs.approvalInterrupts === "preferred" && approvals === "adapter-mediated") {
    reasons.push(
      reason("approval_interrupt_unsupported", "info", "approvals are gated around the backend"),
    );
  }

  // Trace depth.
  const wantedDepth: TraceDepth | undefined = needs.traceDepth;
  if (
    wantedDepth &&
    rank("traceDepth", capabilities.traceDepth) < rank("traceDepth", wantedDepth)
  ) {
    reasons.push(
      reason(
        "trace_depth_reduced",
        "warning",
        `the trace will be ${capabilities.traceDepth}, not ${wantedDepth}`,
      ),
    );
  }

  // Attachments.
  const attachments = attachmentCount(request.input);
  if (needs.attachments === "forbidden") {
    effective.attachments = false;
    if (attachments > 0) {
      reasons.push(
        reason(
          "attachments_unsupported",
          "blocking",
          `the request forbids attachments but its input carries ${attachments}`,
        ),
      );
    }
  } else if (!capabilities.attachments && needs.attachments === "required") {
    reasons.push(
      reason(
        "attachments_unsupported",
        "blocking",
        attachments > 0
          ? `the input carries ${attachments} attachment(s); the backend cannot take attachments`
          : "the request needs attachments; the backend cannot take them",
        { attachments },
      ),
    );
  }

  // Streaming.
  if (needs.streaming === "forbidden") effective.streaming = "none";
  else if (capabilities.streaming === "none" && needs.streaming === "required") {
    reasons.push(
      reason(
        "streaming_unsupported",
        "blocking",
        "the request needs streaming; the backend has none",
      ),
    );
  } else if (capabilities.streaming === "none" && needs.streaming === "preferred") {
    reasons.push(
      reason("streaming_unsupported", "warning", "progress arrives only with the result"),
    );
  } else if (capabilities.streaming === "adapter-mediated" && needs.streaming === "preferred") {
    reasons.push(
      reason("streaming_unsupported", "info", "progress arrives as whole messages, not deltas"),
    );
  }

  // Context.
  if (
    capabilities.maxContextStrategy === "small" &&
    request.history.length > SMALL_CONTEXT_MESSAGES
  ) {
    reasons.push(
      reason(
        "context_pressure_expected",
        "warning",
        `${request.history.length} messages of history for a small-context backend`,
      ),
    );
  }

  const supported = !reasons.some((r) => r.severity === "blocking");
  return {
    supported,
    degraded: supported && reasons.some((r) => r.severity === "warning"),
    reasons,
    effectiveCapabilities: effective,
  };
}

/**
 * What an adapter that does not describe itself is assumed to do: nothing
 * beyond running a turn (claiming less than the truth is safe, more is not).
 */
export const MINIMAL_CAPABILITIES: ExecutionCapabilities = Object.freeze({
  schemaVersion: EXECUTION_SCHEMA_VERSION,
  toolUse: "none",
  structuredToolCalls: false,
  continuationSupport: "none",
  approvalInterrupts: "none",
  traceDepth: "minimal",
  attachments: false,
  streaming: "none",
  maxContextStrategy: "unknown",
  notes: ["the adapter does not describe its capabilities; assuming the minimum"],
});

/** An adapter's capabilities, or the minimum when it does not say. */
export function capabilitiesOf(adapter: {
  describeCapabilities?(): ExecutionCapabilities;
}): ExecutionCapabilities {
  return adapter.describeCapabilities?.() ?? MINIMAL_CAPABILITIES;
}

/** An adapter's negotiation of `request`, or the generic one on its capabilities. */
export function negotiateWith(
  adapter: {
    describeCapabilities?(): ExecutionCapabilities;
    negotiate?(request: ExecutionRequest): ExecutionNegotiation;
  },
  request: ExecutionRequest,
): ExecutionNegotiation {
  return adapter.negotiate
    ? adapter.negotiate(request)
    : negotiateCapabilities(capabilitiesOf(adapter), request);
}
