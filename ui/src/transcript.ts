/**
 * What the session view shows, derived from the stream's state: the
 * transcript (messages, tool calls in place with their approvals, markers),
 * a tool call's displayed state, whether a turn runs, and the calm forms of
 * the side panels (health flags that are on, de-duplicated resume points).
 *
 * Pure (no DOM, no network), so it is tested without a browser.
 */
import type { Approval, ChatEntry, Marker, SessionView, ToolRow } from "./contract.ts";

/** A tool call's state as the operator reads it. */
export type ToolDisplayState =
  | "running"
  | "awaiting_approval"
  | "ok"
  | "error"
  | "denied"
  | "timeout"
  | "artifact"
  | "no_result";

/** Human words for each state. */
export const TOOL_STATE_LABEL: Record<ToolDisplayState, string> = {
  running: "running",
  awaiting_approval: "awaiting approval",
  ok: "ok",
  error: "error",
  denied: "denied",
  timeout: "timed out",
  artifact: "ok (artifact)",
  no_result: "no result",
};

/**
 * What the transcript's messages API adds to the stream (which carries tool
 * arguments in the debug tier only): arguments per tool call id, and the
 * creation time per message id. Read from `GET /v1/sessions/{id}/messages`.
 */
export interface TranscriptDetails {
  argumentsByCall: Record<string, unknown>;
  timeByMessage: Record<string, string>;
}

export function emptyDetails(): TranscriptDetails {
  return { argumentsByCall: {}, timeByMessage: {} };
}

interface HarnPart {
  type?: unknown;
  tool_call_id?: unknown;
  input?: unknown;
}

/** Fold one page of Harn messages (`data` of the messages list) into `details`. */
export function addMessagePage(details: TranscriptDetails, messages: unknown[]): TranscriptDetails {
  const argumentsByCall = { ...details.argumentsByCall };
  const timeByMessage = { ...details.timeByMessage };
  for (const message of messages) {
    if (typeof message !== "object" || message === null) continue;
    const m = message as { id?: unknown; created_at?: unknown; parts?: unknown };
    if (typeof m.id === "string" && typeof m.created_at === "string") {
      timeByMessage[m.id] = m.created_at;
    }
    if (!Array.isArray(m.parts)) continue;
    for (const part of m.parts as HarnPart[]) {
      if (part?.type === "tool_call" && typeof part.tool_call_id === "string") {
        argumentsByCall[part.tool_call_id] = part.input ?? null;
      }
    }
  }
  return { argumentsByCall, timeByMessage };
}

/** The pending approval that gates `row`, if any. */
export function approvalOf(row: ToolRow, approvals: readonly Approval[]): Approval | undefined {
  return approvals.find(
    (a) =>
      a.decision === "pending" &&
      a.toolCallId === row.toolCallId &&
      (row.taskId === null || a.taskId === row.taskId),
  );
}

/** The state to show for a tool row. */
export function toolState(
  row: ToolRow,
  view: Pick<SessionView, "approvals" | "turns">,
): ToolDisplayState {
  if (row.status !== "running") return row.status;
  if (approvalOf(row, view.approvals)) return "awaiting_approval";
  // A call still without an outcome when its turn ended never got a result.
  const turn = view.turns.find((t) => t.taskId === row.taskId);
  if (turn && turn.status !== "running") return "no_result";
  return "running";
}

/** One item of the transcript, in stream order. */
export type TranscriptItem =
  | { kind: "message"; key: string; entry: ChatEntry; at: string | null }
  | {
      kind: "tool";
      key: string;
      row: ToolRow;
      state: ToolDisplayState;
      arguments: unknown;
      /** The pending approval of this call, shown with it. */
      approval: Approval | null;
    }
  | { kind: "approval"; key: string; approval: Approval }
  | { kind: "marker"; key: string; marker: Marker };

function seqOf(item: TranscriptItem): number {
  switch (item.kind) {
    case "message":
      return item.entry.seq;
    case "tool":
      return item.row.seq;
    case "approval":
      return item.approval.seq;
    case "marker":
      return item.marker.seq;
  }
}

/**
 * The transcript: messages, tool calls in place (each with its arguments and
 * the approval that gates it), approvals that name no known call, markers.
 */
export function transcriptOf(view: SessionView, details: TranscriptDetails): TranscriptItem[] {
  const items: TranscriptItem[] = [];
  const attached = new Set<string>();
  for (const entry of view.chat) {
    items.push({
      kind: "message",
      key: `m:${entry.key}`,
      entry,
      at: details.timeByMessage[entry.key] ?? entry.at,
    });
  }
  for (const row of view.tools) {
    const approval = approvalOf(row, view.approvals) ?? null;
    if (approval) attached.add(approval.requestId);
    items.push({
      kind: "tool",
      key: `t:${row.key}`,
      row,
      state: toolState(row, view),
      arguments:
        row.arguments !== undefined ? row.arguments : details.argumentsByCall[row.toolCallId],
      approval,
    });
  }
  for (const approval of view.approvals) {
    if (approval.decision !== "pending" || attached.has(approval.requestId)) continue;
    items.push({ kind: "approval", key: `a:${approval.requestId}`, approval });
  }
  for (const marker of view.markers) {
    items.push({ kind: "marker", key: `k:${marker.key}`, marker });
  }
  return items.sort((a, b) => seqOf(a) - seqOf(b));
}

/** Session states in which a turn is under way. */
const BUSY_STATES = new Set([
  "queued",
  "running",
  "recovering",
  "awaiting_approval",
  "awaiting_auth",
]);

/**
 * The turn under way, if any: its task (what Stop cancels) and the state.
 * From the latest `session_state`, else the latest turn still running.
 */
export function activeTurn(view: SessionView): { taskId: string; state: string } | null {
  const status = view.status;
  const state = typeof status?.status === "string" ? status.status : null;
  if (state !== null && !BUSY_STATES.has(state)) return null;
  const fromStatus = typeof status?.task_id === "string" ? status.task_id : "";
  if (state !== null && fromStatus !== "") return { taskId: fromStatus, state };
  const running = view.turns.findLast((t) => t.status === "running");
  return running ? { taskId: running.taskId, state: state ?? "running" } : null;
}

/** Whether the agent is producing text right now (the typing indicator). */
export function isTyping(view: SessionView): boolean {
  const turn = activeTurn(view);
  return turn !== null && (turn.state === "running" || turn.state === "queued");
}

/** A resume point of session detail. */
export interface ResumePoint {
  kind: string;
  checkpoint_type?: string;
  event_id: string;
  resume_cursor: string;
  task_id: string | null;
  summary: string;
}

/** A readable label of a resume point's kind. */
export function resumeLabel(point: ResumePoint): string {
  return (point.checkpoint_type ?? point.kind).replace(/_/g, " ");
}

/**
 * Resume points as shown: the summary without the kind repeated in front
 * ("turn completed turn completed: …"), duplicates (same kind and summary)
 * kept once (the latest), the last `keep` in order.
 */
export function calmResumePoints(
  points: readonly ResumePoint[],
  keep = 3,
): { shown: (ResumePoint & { text: string })[]; hidden: number } {
  const seen = new Map<string, ResumePoint & { text: string }>();
  for (const point of points) {
    const label = resumeLabel(point);
    let text = point.summary.trim();
    const lower = text.toLowerCase();
    if (lower.startsWith(label.toLowerCase())) {
      text = text.slice(label.length).replace(/^[\s:–—-]+/, "");
    }
    const key = `${label}\u0000${text}`;
    seen.delete(key);
    seen.set(key, { ...point, text });
  }
  const all = [...seen.values()];
  return { shown: all.slice(-keep), hidden: Math.max(0, all.length - keep) };
}

/** The health flags that are on: the flag and its readable words. */
export function flagsOn(health: Record<string, unknown> | null): { flag: string; label: string }[] {
  const flags = health?.flags;
  if (typeof flags !== "object" || flags === null) return [];
  return Object.entries(flags as Record<string, unknown>)
    .filter(([, on]) => on === true)
    .map(([flag]) => ({ flag, label: flag.replace(/_/g, " ") }));
}

/** "just now", "5 min ago", "3 h ago", "2 d ago", then the date. */
export function relativeTime(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "";
  const then = Date.parse(iso);
  if (!Number.isFinite(then)) return "";
  const seconds = Math.round((now - then) / 1000);
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const days = Math.round(hours / 24);
  if (days < 7) return `${days} d ago`;
  return new Date(then).toISOString().slice(0, 10);
}

/** A one-line title: the first line of `text`, at most `max` characters. */
export function titleOf(text: string | null | undefined, max = 80): string | null {
  const line = (text ?? "").trim().split("\n")[0]?.trim() ?? "";
  if (line === "") return null;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** JSON arguments as readable text: pretty-printed, `null` when there are none. */
export function argumentsText(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "object" && Object.keys(value as object).length === 0) return "{}";
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** A one-line summary of arguments (`city: "Paris", days: 3`). */
export function argumentsSummary(value: unknown, max = 120): string {
  if (value === undefined || value === null) return "";
  let text: string;
  if (typeof value === "object" && !Array.isArray(value)) {
    text = Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}: ${JSON.stringify(v)}`)
      .join(", ");
  } else {
    text = JSON.stringify(value) ?? "";
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A duration for people: "84 ms", "1.2 s", "2 min 5 s". */
export function durationText(ms: number | null): string {
  if (ms === null) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Text for the default tier: internal ids (`task_…`, `ses_…`, `call_…`) taken out. */
export function withoutIds(text: string): string {
  return text
    .replace(/\s*\b(?:task|ses|call|evt|rcpt|msg|sig)_[0-9A-Za-z]{6,}(?::\w+)?\b/g, "")
    .replace(/\s{2,}/g, " ")
    .trim();
}

/** An input on a scroll area that may move it: a wheel turn, a key, or a finger's drag. */
export type ScrollInput =
  | { kind: "wheel"; deltaY: number }
  | { kind: "key"; key: string }
  | { kind: "drag"; fromY: number; toY: number };

/** Keys that scroll a focused scroll area up. */
const UP_KEYS = new Set(["ArrowUp", "PageUp", "Home"]);

/**
 * Whether an input asks to scroll up. The transcript stops following new
 * content on the input itself, not on the scroll event after it: a
 * re-render between the two would otherwise pin the view back to the
 * bottom and swallow the operator's scroll (a finger dragging down moves
 * the content up).
 */
export function asksToScrollUp(input: ScrollInput): boolean {
  switch (input.kind) {
    case "wheel":
      return input.deltaY < 0;
    case "key":
      return UP_KEYS.has(input.key);
    case "drag":
      return input.toY > input.fromY;
  }
}
