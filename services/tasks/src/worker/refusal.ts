/**
 * A refused turn's blocking reasons as typed fields: when no backend the
 * agent allows can run a request (a missing capability, no live worker, a
 * policy that allows nothing), the turn fails `unsupported` (or
 * `backend_unavailable`), and just before its failure the log gets one
 * `agent.blocked` event a client can switch on without reading text:
 *
 * ```json
 * {"category": "unsupported", "retryable": false,
 *  "reasons": [{"backend_id": "plain", "code": "approval_interrupt_unsupported",
 *               "capability": "approval_interrupts", "severity": "blocking",
 *               "message": "..."}],
 *  "omitted": 0}
 * ```
 *
 * Summarised past a bound: at most {@link MAX_BLOCKING_REASONS} reasons are
 * listed, each message clipped; `omitted` counts the rest, so the event stays
 * small whatever the routing policy lists.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { NegotiationReason } from "@trellis/execution";
import type { RunOutcome } from "../domain/run.js";
import type { ProgressItem } from "./progress.js";

/** Reasons listed in one `agent.blocked` event; the rest are counted. */
export const MAX_BLOCKING_REASONS = 16;
const MAX_MESSAGE = 300;
const MAX_ID = 64;

/** The requirement (capability) a reason code is about; "" when none. */
const CAPABILITY_OF_CODE: Readonly<Record<string, string>> = {
  tool_use_unsupported: "tool_use",
  structured_tool_calls_unsupported: "structured_tool_calls",
  continuation_unsupported: "continuation_support",
  approval_interrupt_unsupported: "approval_interrupts",
  attachments_unsupported: "attachments",
  trace_depth_reduced: "trace_depth",
  streaming_unsupported: "streaming",
  schema_version_unsupported: "schema_version",
  context_pressure_expected: "max_context_strategy",
};

const clip = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max - 3)}...` : text;

function backendOf(reason: NegotiationReason): string {
  const backend = reason.metadata?.backend ?? reason.metadata?.backend_id;
  return typeof backend === "string" ? clip(backend, MAX_ID) : "";
}

/** The `agent.blocked` item of a failed outcome with blocking reasons, else undefined. */
export function blockedItem(outcome: RunOutcome): ProgressItem | undefined {
  if (outcome.status !== "failed") return undefined;
  const blocking = (outcome.reasons ?? []).filter((r) => r.severity === "blocking");
  if (blocking.length === 0) return undefined;
  const reasons: JsonValue[] = blocking.slice(0, MAX_BLOCKING_REASONS).map((reason) => ({
    backend_id: backendOf(reason),
    code: reason.code,
    capability: CAPABILITY_OF_CODE[reason.code] ?? "",
    severity: reason.severity,
    message: clip(reason.message, MAX_MESSAGE),
  }));
  return {
    kind: EVENT_KIND.blocked,
    data: {
      category: outcome.category,
      retryable: outcome.retryable,
      reasons,
      omitted: Math.max(0, blocking.length - MAX_BLOCKING_REASONS),
    },
  };
}
