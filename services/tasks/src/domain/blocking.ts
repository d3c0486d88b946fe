/**
 * A refusal's blocking reasons as typed fields (`trellis.core.v1.BlockingReasons`):
 * when no backend the agent allows can run a turn (a missing capability, no
 * live worker, a policy that allows nothing) the client gets, without
 * reading text, which backend refused, over which capability, with which
 * reason code. The same summary rides on a failed task's `TaskFailure`, the
 * `agent.blocked` event and the Connect error that refuses a task at submit.
 *
 * Summarised past a bound: at most {@link MAX_BLOCKING_REASONS} reasons are
 * listed, each message clipped to 300 characters and each backend id to 64;
 * `omitted` counts the rest, so the summary stays small whatever the routing
 * policy lists.
 */
import { create } from "@bufbuild/protobuf";
import { type BlockingReasons, BlockingReasonsSchema } from "@trellis/contracts/core";
import type { NegotiationReason } from "@trellis/execution";

/** Reasons listed in one summary; the rest are counted. */
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

/**
 * The typed summary of `reasons`' blocking ones, or undefined when none
 * blocks. `category` and `retryable` are the failure's.
 */
export function blockingReasons(
  reasons: readonly NegotiationReason[] | undefined,
  category: string,
  retryable: boolean,
): BlockingReasons | undefined {
  const blocking = (reasons ?? []).filter((r) => r.severity === "blocking");
  if (blocking.length === 0) return undefined;
  return create(BlockingReasonsSchema, {
    category: clip(category, MAX_ID),
    retryable,
    reasons: blocking.slice(0, MAX_BLOCKING_REASONS).map((reason) => ({
      backendId: backendOf(reason),
      code: reason.code,
      capability: CAPABILITY_OF_CODE[reason.code] ?? "",
      severity: reason.severity,
      message: clip(reason.message, MAX_MESSAGE),
    })),
    omitted: Math.max(0, blocking.length - MAX_BLOCKING_REASONS),
  });
}

/** How a task failed, as the store records it (`TaskFailure` without its detail). */
export interface TaskEndFailure {
  category: string;
  message: string;
  retryable: boolean;
  /** Why no backend could run it, when that is why. */
  blocking?: BlockingReasons;
}

/** `{ blocking }` for a failed outcome refused by routing, else `{}` (to spread into a failure). */
export function blockingOf(outcome: {
  reasons?: readonly NegotiationReason[];
  category: string;
  retryable: boolean;
}): { blocking?: BlockingReasons } {
  const blocking = blockingReasons(outcome.reasons, outcome.category, outcome.retryable);
  return blocking ? { blocking } : {};
}
