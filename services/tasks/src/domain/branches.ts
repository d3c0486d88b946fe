/**
 * Branches (Harn v1 "Branch"): which kinds Trellis makes and how a
 * `base_ref` names the fork point in the parent session. Pure.
 *
 * | base_ref        | the branch starts with                          |
 * |-----------------|-------------------------------------------------|
 * | `head`          | the parent's whole transcript                   |
 * | `origin`        | nothing (a fork at the session's start)         |
 * | `evt_…`         | the transcript as it was when that event was    |
 * | any other id    | the transcript up to and including that message |
 */
import { BranchKind } from "@trellis/contracts/tasks";
import { invalidRequest } from "./errors.js";

/** Where a session branch forks its parent (the ForkSession fields). */
export type ForkPoint =
  | { at: "head" }
  | { at: "origin" }
  | { at: "event"; eventId: string }
  | { at: "message"; messageId: string };

/** Longest base_ref. */
const MAX_REF = 200;

/** The fork point `baseRef` names (see the table above). */
export function parseBaseRef(baseRef: string): ForkPoint {
  if (baseRef === "" || baseRef.length > MAX_REF) {
    throw invalidRequest(
      `base_ref is required (head, origin, an event id or a message id; at most ${MAX_REF} characters)`,
      "base_ref",
    );
  }
  if (baseRef === "head") return { at: "head" };
  if (baseRef === "origin") return { at: "origin" };
  if (baseRef.startsWith("evt_")) return { at: "event", eventId: baseRef };
  return { at: "message", messageId: baseRef };
}

/**
 * The kinds Trellis can branch: a session (a transcript fork). Workspace,
 * task and sandbox branches would need worktrees or sandboxes it does not
 * have, so they are refused clearly rather than recorded as if they existed.
 */
export function checkBranchKind(kind: BranchKind): BranchKind {
  if (kind === BranchKind.SESSION) return kind;
  if (kind === BranchKind.UNSPECIFIED) {
    throw invalidRequest("kind is required (session)", "kind");
  }
  throw invalidRequest(
    `branches of kind ${BranchKind[kind]?.toLowerCase() ?? String(kind)} are not supported; use kind session`,
    "kind",
  );
}
