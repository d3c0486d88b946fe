/**
 * The composer, fixed under the transcript: Enter sends, Shift+Enter adds a
 * line. While a turn runs, Send gives way to Stop (the real cancel of the
 * running task).
 */
import { useState } from "preact/hooks";
import { api, cancelTask } from "../api.ts";
import { errorText } from "../hooks.ts";

export function Composer({
  sessionId,
  closed,
  activeTaskId,
  onSent,
}: {
  sessionId: string;
  closed: boolean;
  /** The running turn's task, if one runs (Stop cancels it). */
  activeTaskId: string | null;
  onSent(): void;
}) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [stopping, setStopping] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const running = activeTaskId !== null;

  const send = async (event: Event) => {
    event.preventDefault();
    const input = text.trim();
    if (input === "" || running || busy) return;
    setBusy(true);
    setError(null);
    try {
      await api("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/tasks`, { input });
      setText("");
      onSent();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };

  const stop = async () => {
    if (!activeTaskId) return;
    setStopping(activeTaskId);
    setError(null);
    try {
      await cancelTask(activeTaskId);
    } catch (e) {
      setError(errorText(e));
      setStopping(null);
    }
  };

  return (
    <form class="composer" onSubmit={send} aria-label="Send a message">
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="composer-row">
        <textarea
          data-testid="composer-input"
          aria-label="Message"
          placeholder={closed ? "This session is closed" : "Message the agent"}
          rows={1}
          value={text}
          disabled={closed}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              (e.currentTarget as HTMLTextAreaElement).form?.requestSubmit();
            }
          }}
        />
        {running ? (
          <button
            type="button"
            class="danger"
            data-testid="composer-stop"
            onClick={stop}
            disabled={stopping === activeTaskId}
          >
            {stopping === activeTaskId ? "Stopping…" : "Stop"}
          </button>
        ) : (
          <button
            type="submit"
            class="primary"
            data-testid="composer-send"
            disabled={busy || closed || text.trim() === ""}
          >
            Send
          </button>
        )}
      </div>
    </form>
  );
}
