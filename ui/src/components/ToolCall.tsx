/**
 * A tool call in the transcript: its name (and MCP server), a state badge
 * (running, awaiting approval, ok, error, denied…), its duration, readable
 * arguments and result, and its approval when one is pending.
 */
import type { Approval, ToolRow } from "../contract.ts";
import {
  durationText,
  TOOL_STATE_LABEL,
  type ToolDisplayState,
  withoutIds,
} from "../transcript.ts";
import { ApprovalCard } from "./ApprovalCard.tsx";
import { JsonBlock } from "./JsonBlock.tsx";

export function ToolCall({
  row,
  state,
  args,
  approval,
  debug,
}: {
  row: ToolRow;
  state: ToolDisplayState;
  args: unknown;
  approval: Approval | null;
  debug: boolean;
}) {
  const result = row.resultText ?? null;
  return (
    <li
      class={`tool state-${state}`}
      data-testid="tool-row"
      data-tool-call-id={row.toolCallId}
      data-status={state}
      aria-label={`Tool call ${row.name || "tool"}: ${TOOL_STATE_LABEL[state]}`}
    >
      <div class="tool-head">
        <span class="tool-icon" aria-hidden="true">
          ⚙
        </span>
        <span class="tool-name">{row.name || "tool"}</span>
        {row.server ? <span class="muted small">via {row.server}</span> : null}
        <span class={`badge state-${state}`} data-testid="tool-state">
          {state === "running" ? <span class="spinner" aria-hidden="true" /> : null}
          {TOOL_STATE_LABEL[state]}
        </span>
        {row.elapsedMs !== null ? (
          <span class="muted small" data-testid="tool-duration">
            {durationText(row.elapsedMs)}
          </span>
        ) : null}
      </div>
      <JsonBlock label="Arguments" value={args} open={state === "awaiting_approval" && !approval} />
      {result !== null && result !== "" ? (
        <div class="tool-result">
          <span class="json-label">Result</span>
          <pre class="result-text" data-testid="tool-result">
            {result}
          </pre>
        </div>
      ) : null}
      {row.reason && state !== "ok" ? (
        <p class="muted small">{debug ? row.reason : withoutIds(row.reason)}</p>
      ) : null}
      {approval ? <ApprovalCard approval={approval} args={args} debug={debug} /> : null}
      {debug ? <p class="debug-id mono">call {row.toolCallId}</p> : null}
    </li>
  );
}
