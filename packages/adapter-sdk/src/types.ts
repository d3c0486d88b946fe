/**
 * The execution seam (BYOH, "bring your own harness"): how Trellis asks an
 * agent backend to run one turn, what a backend says it can do, and what it
 * answers. The proto contract `trellis.adapters.v1` (proto/trellis/adapters/
 * v1/execution.proto) is the source of truth; these types map onto it one to
 * one (`./mapping.ts`), except the two things that only exist in a process:
 * `signal` (cancellation) and `onEvent` (progress).
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";
import type { SecretFingerprint } from "@trellis/runtime";

/**
 * The contract version these types follow. Bumped on additive changes to
 * requests, results or capabilities; a reader refuses a newer version it
 * cannot interpret (`schema_version_unsupported`) instead of guessing.
 */
export const EXECUTION_SCHEMA_VERSION = 1;

// ----------------------------------------------------------------- request

/** How the router may place an agent's turns (proto `RoutingPolicy`). */
export interface RoutingPolicy {
  /** Backends allowed to run the agent; empty or absent: only `agent.backend`. */
  allowedBackends?: readonly string[];
  /** Only this backend is considered (it must be allowed). */
  pinnedBackend?: string;
  /** Tie-break among equally fit backends (default: cost, then latency). */
  preference?: "cost" | "latency";
  /** Requirements of every turn of the agent (the request's own win). */
  requirements?: ExecutionRequirements;
}

/** The agent as the executor sees it. */
export interface ExecutionAgent {
  id: string;
  /** Backend id: "scripted", "harness", a command worker's backend, … */
  backend: string;
  /** Backend-specific definition (e.g. the scripted graph document). */
  definition: JsonObject;
  tools: readonly string[];
  /**
   * Whether a turn may run again on another worker after the one running it
   * died. Absent means false: the turn then fails with `worker_lost`.
   */
  safeToRetry?: boolean;
  /** Placement policy; absent means "run on `backend`". */
  routing?: RoutingPolicy;
}

/** How much a request needs a capability (proto `Requirement`). */
export type AllowRequirement = "forbidden" | "allowed" | "required";
export type PreferRequirement = "forbidden" | "preferred" | "required";
export type WantRequirement = "none" | "preferred" | "required";
export type TraceDepth = "minimal" | "standard" | "detailed";

/** Semantics the caller expects; they drive negotiation, not policy. */
export interface ExecutionRequirements {
  toolUse?: AllowRequirement;
  structuredToolCalls?: PreferRequirement;
  continuationSupport?: WantRequirement;
  approvalInterrupts?: WantRequirement;
  traceDepth?: TraceDepth;
  attachments?: AllowRequirement;
  streaming?: PreferRequirement;
  /**
   * Longest the execution may take, in ms. Past it the backend is stopped and
   * the result is `failed` with category `timeout`, retryable — never a hang.
   */
  maxElapsedMs?: number;
}

/** A tool chosen upstream, with its schema (proto `ToolDescriptor`). */
export interface ExecutionToolDescriptor {
  name: string;
  description?: string;
  inputSchema?: JsonObject;
  requiresApproval?: boolean;
  metadata?: JsonObject;
}

/** One turn to run. */
export interface ExecutionRequest {
  /** Contract version (default {@link EXECUTION_SCHEMA_VERSION}). */
  schemaVersion?: number;
  /** The turn: the task being run (proto `correlation.turn_id`). */
  taskId: string;
  sessionId: string;
  workspaceId: string;
  /** `agent.id` is the correlation's agent id. */
  agent: ExecutionAgent;
  /** W3C trace id of the caller, when it traces. */
  traceId?: string;
  /** W3C traceparent of the caller's span, when it traces. */
  traceparent?: string;
  /** The session transcript before this turn (the input message is NOT in it). */
  history: readonly Message[];
  /** The turn's input message. */
  input: Message;
  /** Set when resuming a suspended turn: where it stopped and what the signal carried. */
  resume?: { checkpoint: JsonValue; payload: JsonValue };
  requirements?: ExecutionRequirements;
  /** Tools with their schemas, when the caller has them. */
  toolDescriptors?: readonly ExecutionToolDescriptor[];
  metadata?: JsonObject;
  /**
   * The session's agent state before this turn: the fields besides the
   * transcript, as the session's last completed or suspended run left them.
   * Absent when no run kept any.
   */
  state?: JsonObject;
  /** Aborted when the task is canceled or interrupted. */
  signal: AbortSignal;
  onEvent?(event: ExecutionEvent): void;
  /**
   * The vaults the agent's tools may name, asked of the host when a tool
   * needs a secret (absent: the host provides none). Keyed by vault id.
   */
  vaultSecrets?(): Promise<ReadonlyMap<string, VaultGrant>>;
  /**
   * The run's memory (Harn v1 "Memory"), provided by a host that keeps it
   * (absent: the run has none — e.g. on a remote worker). The host decides
   * the owner of each scope from the run and records every read and write
   * on the task's event log.
   */
  memory?: RunMemory;
}

/** One memory record as a run sees it. */
export interface RunMemoryRecord {
  id: string;
  /** `persona`, `session`, `workspace` or `tenant`. */
  scope: string;
  ownerId: string;
  content: JsonValue;
  provenance: JsonObject;
  /** RFC 3339. */
  createdAt: string;
}

/**
 * Memory a run reads and writes. The owner of each scope is the run's own:
 * its agent (`persona`), session, workspace, or the tenant.
 */
export interface RunMemory {
  /** The newest records of a scope (at most `limit`, default and cap 10). */
  read(query: { scope: string; limit?: number; toolCallId?: string }): Promise<RunMemoryRecord[]>;
  /**
   * Writes a record. The same `toolCallId` writes once, however often the
   * call is retried.
   */
  write(input: {
    scope: string;
    content: JsonValue;
    toolCallId?: string;
  }): Promise<RunMemoryRecord>;
}

/**
 * One vault as an execution's tools see it: allowed with its secrets, or
 * refused. `fingerprints` (secret name → the deployment's keyed
 * `hmac-sha256:<hex>` of its value) is what a router sends with the secrets
 * it grants a remote worker, which holds no fingerprint key, so the worker's
 * records of the reads carry the deployment's fingerprint.
 */
export type VaultGrant =
  | {
      allowed: true;
      secrets: ReadonlyMap<string, string>;
      fingerprints?: ReadonlyMap<string, SecretFingerprint>;
    }
  | { allowed: false; reason: string };

// ----------------------------------------------------------- capabilities

/** What a backend can honestly do. Every field is set. */
export interface ExecutionCapabilities {
  /** Highest contract version the backend understands. */
  schemaVersion: number;
  toolUse: "none" | "adapter-mediated" | "native-iterative";
  structuredToolCalls: boolean;
  continuationSupport: "none" | "opaque-resume" | "structured";
  approvalInterrupts: "none" | "adapter-mediated" | "native";
  traceDepth: TraceDepth;
  attachments: boolean;
  streaming: "none" | "adapter-mediated" | "native";
  maxContextStrategy: "unknown" | "small" | "medium" | "large";
  notes: readonly string[];
}

/** Machine-readable cause of a negotiation reason (proto `ReasonCode`). */
export type ReasonCode =
  | "tool_use_unsupported"
  | "structured_tool_calls_unsupported"
  | "continuation_unsupported"
  | "approval_interrupt_unsupported"
  | "attachments_unsupported"
  | "trace_depth_reduced"
  | "context_pressure_expected"
  | "streaming_unsupported"
  | "schema_version_unsupported"
  | "backend_unavailable"
  | "other";

/** One finding of a negotiation. */
export interface NegotiationReason {
  code: ReasonCode;
  message: string;
  /** info: for the record; warning: runs degraded; blocking: cannot run. */
  severity: "info" | "warning" | "blocking";
  metadata?: JsonObject;
}

/** A backend's answer to "can you run this honestly?". */
export interface ExecutionNegotiation {
  supported: boolean;
  degraded: boolean;
  reasons: NegotiationReason[];
  effectiveCapabilities: ExecutionCapabilities;
}

// ----------------------------------------------------------------- results

/** What an execution consumed. */
export interface ExecutionUsage {
  inputTokens?: number;
  outputTokens?: number;
  costUnits?: number;
  latencyMs?: number;
}

/** A summary of the execution; never more than the backend exposed. */
export interface ExecutionTraceSummary {
  startedAt: string;
  completedAt: string;
  stepCount: number;
  toolCallCount: number;
  degraded: boolean;
}

/** What every result may say besides its outcome. */
export interface ExecutionResultInfo {
  schemaVersion?: number;
  /** The backend that ran it (set by the router). */
  backendId?: string;
  /** What the run lost against the request (warning reasons). */
  degradation?: NegotiationReason[];
  usage?: ExecutionUsage;
  trace?: ExecutionTraceSummary;
  /**
   * The agent's session state after a completed or suspended run (the whole
   * of it, not a diff). Absent: the backend keeps no state; the session's
   * stays as it was.
   */
  state?: JsonObject;
}

/** Why a backend suspended (proto `SuspensionReason`). */
export type SuspensionReason = "clarification" | "approval" | "deferred";

/** How a turn ended. `messages` are the new messages, in execution order. */
export type ExecutionResult = (
  | { status: "completed"; messages: Message[] }
  | {
      status: "suspended";
      messages: Message[];
      /** Backend's label for what it waits on; the task builds the signal id from it. */
      signalLabel: string;
      metadata: JsonObject;
      /** INPUT_REQUIRED ("input") or AUTH_REQUIRED ("auth"). */
      kind: "input" | "auth";
      /** Opaque state handed back in `resume.checkpoint`. */
      checkpoint: JsonValue;
      reason?: SuspensionReason;
      approvalRequest?: { reason?: string; approvalKey?: string; metadata?: JsonObject };
    }
  | {
      status: "failed";
      messages: Message[];
      category: string;
      message: string;
      retryable: boolean;
      /** For `unsupported`: why no backend could run the request. */
      reasons?: NegotiationReason[];
    }
  | { status: "cancelled"; messages: Message[] }
) &
  ExecutionResultInfo;

// ------------------------------------------------------------------ events

/** Progress an execution reports while it runs (streamed into the event log). */
export type ExecutionEvent =
  | { kind: "text_delta"; text: string; index?: number }
  | { kind: "thinking_delta"; text: string }
  | { kind: "message"; message: Message }
  | { kind: "tool_call_delta"; toolCallId: string; name?: string; argsDelta: string }
  | {
      kind: "tool_started";
      toolCallId: string;
      name: string;
      input?: JsonValue;
      /** The MCP server of the tool (recorded as `agent.mcp_tool_use`); absent for other tools. */
      mcpServer?: string;
    }
  | {
      kind: "tool_finished";
      toolCallId: string;
      name: string;
      status: "ok" | "error" | "denied" | "timeout";
    }
  | { kind: "step_finished"; iteration: number; usage?: ExecutionUsage }
  | {
      /** The router placed the execution (first event of a routed run). */
      kind: "routed";
      backendId: string;
      /** Empty for an in-process backend. */
      workerId: string;
      attempt: number;
      degraded: boolean;
      /** Warning and info reasons of the chosen backend. */
      reasons: NegotiationReason[];
    }
  | { kind: "turn_finished"; result: ExecutionResult };

// ----------------------------------------------------------------- adapters

/**
 * An agent backend. `backendId` and `execute` are the minimum; the BYOH
 * members (`describeCapabilities`, `negotiate`, `executeStreaming`) are
 * optional here so older adapters keep compiling — {@link defineAdapter}
 * fills them in, and the conformance suite requires them.
 */
export interface ExecutionAdapter {
  /** Stable id: [A-Za-z0-9_-], at most 64 characters. */
  readonly backendId: string;
  /** Contract version the adapter was written against. */
  readonly schemaVersion?: number;
  /** Check a definition when an agent is created; throws a TrellisError when invalid. */
  validateDefinition?(definition: JsonObject): void;
  /** Static or cheap-to-compute capabilities. */
  describeCapabilities?(): ExecutionCapabilities;
  /** Whether the backend can run this request honestly. Pure: no I/O, no state change. */
  negotiate?(request: ExecutionRequest): ExecutionNegotiation;
  /** Run one bounded turn. Rejects only for adapter faults; failures are results. */
  execute(request: ExecutionRequest): Promise<ExecutionResult>;
  /** The same run as events, ending with exactly one `turn_finished`. */
  executeStreaming?(request: Omit<ExecutionRequest, "onEvent">): AsyncIterable<ExecutionEvent>;
}

/** Runs a turn on whichever backend the agent's policy picks (the dispatch port). */
export interface AgentExecutor {
  /** Backends this executor can run now. */
  backends(): readonly string[];
  validateDefinition(backend: string, definition: JsonObject): void;
  execute(request: ExecutionRequest): Promise<ExecutionResult>;
  /**
   * Negotiate `request` without running it: the `failed` result it would get
   * now because no backend the agent allows has what it requires (category
   * `unsupported`, with the blocking reasons), else undefined. Optional: an
   * executor that cannot tell leaves it out, and the turn is refused when it
   * runs instead.
   */
  preflight?(request: ExecutionRequest): ExecutionResult | undefined;
}
