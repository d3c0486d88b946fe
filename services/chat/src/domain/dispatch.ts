/**
 * harness-chat §6: which dispatch path an inbound Send takes. Pure.
 *
 * - new-session (harness §3.1): the session does not exist yet or its history
 *   is empty — the session is created (bound to the requested agent) and the
 *   turn runs;
 * - existing-session (harness §3.2): the history is non-empty — the turn runs
 *   with the session's bound agent; `agent_id` is not used.
 *
 * Send is never the signal-resume path (harness §3.3): resumes enter through
 * `trellis.tasks.v1.SignalService/Deliver`, and their outcomes leave through
 * Subscribe (harness-chat §8.2).
 *
 * Chat does not read the session to decide: the turn is always submitted the
 * same way — `create_session` set, `agent_id` as sent — and the tasks service
 * classifies it in the submitting transaction (a missing session is created
 * bound to the agent; an existing one runs its own). So the SubmitTask request
 * depends on the Send request alone: a retried Send with the same idempotency
 * key is the same SubmitTask even when the first attempt has since filled the
 * history. {@link dispatchPathOf} states the rule.
 */

/** A dispatch path of a Send. */
export type DispatchPath = "new_session" | "existing_session";

/** What the path is decided from: the session as loaded, or undefined when there is none. */
export interface LoadedSession {
  messageCount: bigint;
}

/** harness-chat §6: classify by the session's history. */
export function dispatchPathOf(session: LoadedSession | undefined): DispatchPath {
  return session === undefined || session.messageCount === 0n ? "new_session" : "existing_session";
}
