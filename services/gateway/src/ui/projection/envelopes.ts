/**
 * The frontend event contract (spec `003`, "agent-harness frontend
 * contract"): the envelopes `{type, payload}` a UI reads, which tier each
 * belongs to, and which contract types Trellis cannot emit yet because no
 * service records the events they would be projected from.
 *
 * The envelopes are a projection of the canonical event log, never a second
 * source of truth (see `./projector.ts`).
 */
import type { JsonObject } from "@bufbuild/protobuf";

/**
 * Exposure tier chosen by the client. `default` is the operator view; `debug`
 * adds the debug-only types and the debug-only fields of every payload
 * (raw tool arguments and results, source event ids).
 */
export type UiTier = "default" | "debug";

/** Every tier, for parsing the `tier` query parameter. */
export const UI_TIERS: readonly UiTier[] = ["default", "debug"];

/**
 * Every envelope type the projection can emit, with its tier. Contract types
 * keep the tier the contract's inventory gives them; the four Trellis
 * extensions are listed in {@link UI_EXTENSION_TYPES}.
 */
export const UI_EVENT_TIERS = {
  session: "default",
  session_state: "default",
  session_checkpoint: "default",
  turn_start: "debug",
  token: "default",
  response: "default",
  thinking: "default",
  tool_call: "default",
  tool_result: "default",
  tool_outcome: "default",
  approval_required: "default",
  approval_applied: "default",
  usage: "debug",
  context_warning: "default",
  context_compacted: "default",
  turn_end: "default",
  completed: "default",
  error: "default",
  message: "default",
  artifact: "default",
  receipt: "default",
  raw_event: "debug",
} as const satisfies Record<string, UiTier>;

/** One envelope type of the UI event stream. */
export type UiEventType = keyof typeof UI_EVENT_TIERS;

/** The types the projection can emit (the UI must handle exactly these). */
export const UI_EVENT_TYPES = Object.keys(UI_EVENT_TIERS) as UiEventType[];

/**
 * Types Trellis adds to the contract (which is additive): user and system
 * messages of the transcript (`message`), stored artifacts (`artifact`),
 * issued receipts (`receipt`), and log events the projection has no mapping
 * for (`raw_event`, debug tier only).
 */
export const UI_EXTENSION_TYPES: readonly UiEventType[] = [
  "message",
  "artifact",
  "receipt",
  "raw_event",
];

/**
 * Contract types that need events no Trellis service records yet, and what
 * they would need. The projection never invents them.
 */
export const UI_TYPES_WITHOUT_EVENTS: Readonly<Record<string, string>> = {
  policy_decision: "no policy engine records its decisions as events",
  transport_diagnostic: "no provider fallback exists (only the scripted backend runs)",
  subagent_event: "delegated work (parent_task_id) emits no lifecycle events of its own",
  hook_event: "there are no harness hooks",
  sandbox_notice: "there is no execution sandbox",
  step_progress: "backends report no step progress",
  tool_batch: "no tool scheduler exists",
  tool_selected: "no semantic tool selection exists",
  tool_validation_error: "tool arguments are not validated against schemas",
  retrieval: "there is no retrieval",
  antahkarana: "there is no cognition summary",
  reflection: "there is no reflection engine",
  turn_start_tools: "agents do not announce their tool set per turn",
};

/**
 * Types the projection maps from event kinds that a backend may append but
 * none does today (the turn runner does not persist execution progress):
 * `token` (agent.text_delta / agent.token), `thinking`
 * (agent.thinking_delta / agent.thinking) and `usage` (agent.model_call).
 */
export const UI_TYPES_AWAITING_PRODUCERS: readonly UiEventType[] = ["token", "thinking", "usage"];

/**
 * One projected envelope before the tier is applied: `debug` holds the
 * fields only the debug tier may see.
 */
export interface ProjectedEnvelope {
  type: UiEventType;
  payload: JsonObject;
  debug?: JsonObject;
}

/** An envelope as a client of `tier` receives it, or undefined when hidden. */
export function envelopeForTier(
  envelope: ProjectedEnvelope,
  tier: UiTier,
): { type: UiEventType; payload: JsonObject } | undefined {
  if (tier === "default") {
    if (UI_EVENT_TIERS[envelope.type] !== "default") return undefined;
    return { type: envelope.type, payload: envelope.payload };
  }
  return {
    type: envelope.type,
    payload: envelope.debug ? { ...envelope.payload, ...envelope.debug } : envelope.payload,
  };
}
