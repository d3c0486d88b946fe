/**
 * The `agent.blocked` event of a refused turn: just before its failure the
 * log gets one event a client can switch on without reading text (the
 * typed summary of `../domain/blocking.ts`, as JSON):
 *
 * ```json
 * {"category": "unsupported", "retryable": false,
 *  "reasons": [{"backend_id": "plain", "code": "approval_interrupt_unsupported",
 *               "capability": "approval_interrupts", "severity": "blocking",
 *               "message": "..."}],
 *  "omitted": 0}
 * ```
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { blockingReasons } from "../domain/blocking.js";
import type { RunOutcome } from "../domain/run.js";
import type { ProgressItem } from "./progress.js";

/** The `agent.blocked` item of a failed outcome with blocking reasons, else undefined. */
export function blockedItem(outcome: RunOutcome): ProgressItem | undefined {
  if (outcome.status !== "failed") return undefined;
  const summary = blockingReasons(outcome.reasons, outcome.category, outcome.retryable);
  if (!summary) return undefined;
  const reasons: JsonValue[] = summary.reasons.map((reason) => ({
    backend_id: reason.backendId,
    code: reason.code,
    capability: reason.capability,
    severity: reason.severity,
    message: reason.message,
  }));
  return {
    kind: EVENT_KIND.blocked,
    data: {
      category: outcome.category,
      retryable: outcome.retryable,
      reasons,
      omitted: summary.omitted,
    },
  };
}
