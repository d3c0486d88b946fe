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
 * The turn itself is always submitted the same way — `create_session` set,
 * no agent — so the SubmitTask request depends on the Send request alone: a
 * retried Send with the same idempotency key is the same SubmitTask even when
 * the first attempt's turn has since filled the history. Binding a new session
 * to its agent is a CreateSession before it.
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

/**
 * Whether the path must be read from the store before submitting: only to
 * bind a new session to an agent. With no agent to bind both paths submit
 * alike — the tasks service creates a missing session (bound to the workspace
 * default) and otherwise appends to it, in one transaction.
 */
export function needsSessionLoad(agentId: string): boolean {
  return agentId !== "";
}

/**
 * Whether Send creates the session, bound to `agentId`, before submitting the
 * turn: on the new-session path, when the session does not exist yet and an
 * agent was asked for. (A session that exists with an empty history keeps the
 * agent it was created with.)
 */
export function createsBoundSession(session: LoadedSession | undefined, agentId: string): boolean {
  return session === undefined && agentId !== "";
}
