/**
 * An approval in place: what the agent wants to run, with its arguments,
 * and Approve / Deny as real buttons (keyboard and touch). The internal
 * request id shows in the debug tier only.
 */
import { useState } from "preact/hooks";
import { confirmTool } from "../api.ts";
import type { Approval } from "../contract.ts";
import { errorText } from "../hooks.ts";
import { argumentsText, withoutIds } from "../transcript.ts";

export function ApprovalCard({
  approval,
  args,
  debug,
}: {
  approval: Approval;
  args: unknown;
  debug: boolean;
}) {
  const [busy, setBusy] = useState<"approve" | "deny" | null>(null);
  const [error, setError] = useState<string | null>(null);
  const decide = async (approved: boolean) => {
    setBusy(approved ? "approve" : "deny");
    setError(null);
    try {
      await confirmTool(approval.taskId, approved);
    } catch (e) {
      setError(errorText(e));
      setBusy(null);
    }
  };
  const titleId = `approval-${approval.requestId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const text = argumentsText(args);
  return (
    <section
      class="approval"
      data-testid="approval"
      data-request-id={approval.requestId}
      aria-labelledby={titleId}
    >
      <h3 id={titleId} class="approval-title">
        Approval needed
        {approval.toolName ? (
          <>
            {" "}
            to run <code>{approval.toolName}</code>
          </>
        ) : null}
      </h3>
      {approval.reason && !/^waiting for signal/i.test(approval.reason) ? (
        <p class="muted">{debug ? approval.reason : withoutIds(approval.reason)}</p>
      ) : null}
      {text !== null ? (
        <div class="approval-args">
          <span class="json-label">With arguments</span>
          <pre class="json" data-testid="approval-arguments">
            {text}
          </pre>
        </div>
      ) : (
        <p class="muted">The agent sent no arguments for this call.</p>
      )}
      <div class="approval-actions">
        <button
          type="button"
          class="primary"
          data-testid="approve"
          disabled={busy !== null}
          onClick={() => decide(true)}
        >
          {busy === "approve" ? "Approving…" : "Approve"}
        </button>
        <button
          type="button"
          class="danger"
          data-testid="deny"
          disabled={busy !== null}
          onClick={() => decide(false)}
        >
          {busy === "deny" ? "Denying…" : "Deny"}
        </button>
      </div>
      {debug && (
        <p class="debug-id mono">
          request {approval.requestId}
          {approval.toolCallId ? ` · call ${approval.toolCallId}` : ""}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
