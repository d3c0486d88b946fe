/** The debug tier's log: every envelope received, newest first (the last 200). */
import type { SessionView } from "../contract.ts";

export function DebugLog({ view, sessionId }: { view: SessionView; sessionId: string }) {
  return (
    <section class="panel debug" data-testid="debug-log" aria-label="Debug stream">
      <p class="muted">
        Session <span class="mono">{sessionId}</span> · {view.log.length} envelopes
      </p>
      <ol class="debug-list">
        {view.log
          .slice(-200)
          .reverse()
          .map((item, i) => (
            <li key={item.cursor ?? `bootstrap-${i}`}>
              <span class="mono">{item.cursor ?? "—"}</span> <strong>{item.envelope.type}</strong>
              <pre class="json">{JSON.stringify(item.envelope.payload, null, 1)}</pre>
            </li>
          ))}
      </ol>
    </section>
  );
}
