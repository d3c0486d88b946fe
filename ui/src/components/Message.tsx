/**
 * One message of the transcript, styled by role: the operator's on the
 * right, the agent's as markdown on the left, system and tool notes small.
 * Its time and "Branch" (a real button, reachable by keyboard and touch)
 * sit under it.
 */
import type { ChatEntry } from "../contract.ts";
import { Markdown } from "../markdown.tsx";

function clock(iso: string | null): { short: string; full: string } | null {
  if (!iso) return null;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return null;
  return {
    short: date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
    full: date.toLocaleString(),
  };
}

const ROLE_NAME: Record<ChatEntry["role"], string> = {
  user: "You",
  assistant: "Agent",
  system: "System",
  tool: "Tool",
};

export function Message({
  entry,
  at,
  onBranch,
  inherited = false,
  debug = false,
}: {
  entry: ChatEntry;
  at: string | null;
  onBranch?: ((eventId: string) => void) | undefined;
  inherited?: boolean;
  debug?: boolean;
}) {
  const time = clock(at);
  const canBranch = onBranch !== undefined && entry.eventId !== null;
  return (
    <li
      class={`msg ${entry.role}${inherited ? " inherited" : ""}`}
      data-testid={inherited ? "inherited-entry" : "chat-entry"}
      data-role={entry.role}
    >
      <span class="sr-only">{ROLE_NAME[entry.role]}: </span>
      <div class="bubble">
        {entry.role === "assistant" ? (
          <Markdown source={entry.text} class="text" />
        ) : (
          <div class="text plain">{entry.text}</div>
        )}
      </div>
      {(time || canBranch || debug) && (
        <div class="msg-meta">
          {time ? (
            <time dateTime={at ?? undefined} title={time.full}>
              {time.short}
            </time>
          ) : null}
          {canBranch ? (
            <button
              type="button"
              class="ghost small branch"
              data-testid="branch"
              aria-label="Branch from this message"
              title="Start a new session with the history up to this message"
              onClick={() => onBranch(entry.eventId!)}
            >
              Branch
            </button>
          ) : null}
          {debug && entry.eventId ? <span class="debug-id mono">{entry.eventId}</span> : null}
        </div>
      )}
    </li>
  );
}
