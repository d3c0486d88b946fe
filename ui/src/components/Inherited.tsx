/** The history a branch inherited: its parent's stream up to the fork point (nested for branches of branches). */
import { useSessionStream } from "../hooks.ts";
import { Message } from "./Message.tsx";

export function Inherited({
  sessionId,
  until,
  depth,
}: {
  sessionId: string;
  until: string;
  depth: number;
}) {
  const { view, fatal } = useSessionStream(sessionId, "default", until);
  const parent = view.session;
  return (
    <section class="inherited" data-testid="inherited" aria-label="Inherited history">
      {depth < 4 && parent?.parent_session_id && parent.branch_source_event_id ? (
        <Inherited
          sessionId={String(parent.parent_session_id)}
          until={String(parent.branch_source_event_id)}
          depth={depth + 1}
        />
      ) : null}
      {fatal && <p class="error">{fatal}</p>}
      <ul class="msg-list">
        {view.chat.map((entry) => (
          <Message key={entry.key} entry={entry} at={entry.at} inherited />
        ))}
      </ul>
      {depth === 0 && (
        <p class="divider">Branched here — earlier messages are from the parent session</p>
      )}
    </section>
  );
}
