/**
 * One session: a head (title, agent, status, panels toggle), the transcript
 * in its own scroll area, the composer fixed under it, and the side panels
 * (a column on wide screens, a sheet over the transcript on narrow ones).
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../api.ts";
import { errorText, useMedia, useSessionStream, useTranscriptDetails } from "../hooks.ts";
import { activeTurn, durationText } from "../transcript.ts";
import { Composer } from "./Composer.tsx";
import { DebugLog } from "./DebugLog.tsx";
import { HealthPanel } from "./HealthPanel.tsx";
import { Inherited } from "./Inherited.tsx";
import { ReceiptsPanel } from "./ReceiptsPanel.tsx";
import { ResumePoints } from "./ResumePoints.tsx";
import { type PanelTab, SidePanels } from "./SidePanels.tsx";
import { Transcript } from "./Transcript.tsx";

declare global {
  interface Window {
    /** Read by the browser tests: what the current session's stream applied. */
    __trellisUi?: {
      cursors: string[];
      duplicates: number;
      sessionId: string | null;
      /** The cursor the current connection resumed from (null: from the start). */
      resumeCursor: string | null;
    };
  }
}

const STATUS_WORDS: Record<string, string> = {
  active: "Ready",
  idle: "Ready",
  queued: "Queued",
  running: "Working",
  recovering: "Recovering",
  awaiting_approval: "Waiting for approval",
  awaiting_auth: "Waiting for sign-in",
  closed: "Closed",
};

/** The agent (persona) id of a session, from `GET /v1/sessions/{id}`. */
function useSessionAgent(sessionId: string): string | null {
  const [agent, setAgent] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    setAgent(null);
    api("GET", `/v1/sessions/${encodeURIComponent(sessionId)}`).then(
      (s) => current && setAgent(typeof s.persona_id === "string" ? s.persona_id : null),
      () => {
        // The head shows "No agent"; the stream reports real failures.
      },
    );
    return () => {
      current = false;
    };
  }, [sessionId]);
  return agent;
}

export function SessionView({
  sessionId,
  debug,
  agentNames,
  go,
  onChanged,
}: {
  sessionId: string;
  debug: boolean;
  agentNames: Map<string, string>;
  go(id: string): void;
  /** The session list may have changed (a branch, a first message). */
  onChanged(): void;
}) {
  const tier = debug ? "debug" : "default";
  const { view, state, fatal } = useSessionStream(sessionId, tier);
  const wide = useMedia("(min-width: 1200px)");
  const [panelsOpen, setPanelsOpen] = useState(wide);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => setPanelsOpen(wide), [wide]);

  useEffect(() => {
    const resumed = view.session?.resume_cursor;
    window.__trellisUi = {
      cursors: view.cursors,
      duplicates: view.duplicates,
      sessionId,
      resumeCursor: typeof resumed === "string" ? resumed : null,
    };
  }, [view, sessionId]);

  // Re-read arguments and times when a call or message appears that they lack.
  const detailsVersion = `${view.tools.length}/${view.chat.length}`;
  const details = useTranscriptDetails(
    sessionId,
    view.chat.length + view.tools.length > 0 ? detailsVersion : "",
  );

  const branchAt = async (at: { at_event_id: string } | { at_cursor: string }) => {
    setError(null);
    try {
      const fork = await api("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/fork`, at);
      onChanged();
      go(String(fork.id));
    } catch (e) {
      setError(errorText(e));
    }
  };

  const resumeVersion = [
    view.turns.map((t) => t.status).join(","),
    view.approvals.map((a) => a.decision).join(","),
    view.markers.length,
  ].join("|");
  const status = String(view.status?.status ?? "");
  const lastTurn = view.turns.at(-1);
  const turn = activeTurn(view);
  const session = view.session;
  const personaId = useSessionAgent(sessionId);
  const agentName = personaId ? (agentNames.get(personaId) ?? "Agent") : null;
  const firstUser = view.chat.find((c) => c.role === "user")?.text.split("\n")[0];
  const title = firstUser && firstUser.trim() !== "" ? firstUser : "Untitled session";

  const tabs = useMemo<PanelTab[]>(() => {
    const list: PanelTab[] = [
      {
        id: "health",
        label: "Health",
        content: <HealthPanel sessionId={sessionId} debug={debug} />,
      },
      {
        id: "resume",
        label: "Resume",
        content: (
          <ResumePoints
            sessionId={sessionId}
            version={resumeVersion}
            debug={debug}
            onBranch={(cursor) => void branchAt({ at_cursor: cursor })}
          />
        ),
      },
      {
        id: "receipts",
        label: "Receipts",
        count: view.receipts.length,
        content: <ReceiptsPanel receipts={view.receipts} debug={debug} />,
      },
    ];
    if (view.artifacts.length > 0) {
      list.push({
        id: "artifacts",
        label: "Artifacts",
        count: view.artifacts.length,
        content: (
          <section class="panel" aria-label="Artifacts">
            <ul class="artifact-list">
              {view.artifacts.map((a) => (
                <li key={String(a.artifact_id)}>
                  {String(a.name || "artifact")}
                  {typeof a.size_bytes === "number" ? (
                    <span class="muted"> · {a.size_bytes} bytes</span>
                  ) : null}
                  {debug ? <span class="debug-id mono"> {String(a.artifact_id)}</span> : null}
                </li>
              ))}
            </ul>
          </section>
        ),
      });
    }
    if (debug) {
      list.push({
        id: "debug",
        label: "Debug",
        content: <DebugLog view={view} sessionId={sessionId} />,
      });
    }
    return list;
  }, [sessionId, resumeVersion, debug, view]);

  return (
    <div class={`session${panelsOpen ? " panels-open" : ""}`}>
      <header class="session-head">
        <div class="session-heading">
          <h2 class="session-name" title={title}>
            {title}
          </h2>
          <p class="session-sub">
            {agentName ? <span>{agentName}</span> : <span>No agent</span>}
            {session?.parent_session_id ? (
              <>
                {" · branch of "}
                <button
                  type="button"
                  class="link"
                  onClick={() => go(String(session.parent_session_id))}
                >
                  the parent session
                </button>
              </>
            ) : null}
            {debug ? <span class="debug-id mono"> · {sessionId}</span> : null}
          </p>
        </div>
        <div class="session-status">
          <span
            class={`chip status-${status || "unknown"}`}
            data-testid="status"
            data-status={status}
            role="status"
          >
            {STATUS_WORDS[status] ?? (status || "Connecting…")}
          </span>
          {lastTurn && (
            <span
              class="muted small turn-status"
              data-testid="turn-status"
              data-turn-status={lastTurn.status}
            >
              Last turn {lastTurn.status}
              {lastTurn.elapsedMs !== null ? ` in ${durationText(lastTurn.elapsedMs)}` : ""}
            </span>
          )}
          <span class={`conn ${state}`} title={`Stream ${state}`}>
            <span class="dot" aria-hidden="true" />
            <span class="sr-only">Stream {state}</span>
          </span>
          <button
            type="button"
            class="secondary small"
            aria-expanded={panelsOpen}
            aria-controls="session-panels"
            onClick={() => setPanelsOpen((o) => !o)}
          >
            {panelsOpen ? "Hide panels" : "Panels"}
          </button>
        </div>
      </header>
      {(fatal || error) && (
        <p class="error banner" role="alert">
          {fatal ?? error}
        </p>
      )}
      <div class="session-body">
        <div class="chat-column">
          <Transcript
            view={view}
            details={details}
            debug={debug}
            onBranch={(eventId) => void branchAt({ at_event_id: eventId })}
            before={
              session?.parent_session_id && session.branch_source_event_id ? (
                <Inherited
                  sessionId={String(session.parent_session_id)}
                  until={String(session.branch_source_event_id)}
                  depth={0}
                />
              ) : null
            }
          />
          <Composer
            sessionId={sessionId}
            closed={status === "closed"}
            activeTaskId={turn?.taskId ?? null}
            onSent={onChanged}
          />
        </div>
        <div id="session-panels" class="side-wrap" hidden={!panelsOpen}>
          <SidePanels
            tabs={tabs}
            {...(debug ? { initial: "debug" } : {})}
            onClose={wide ? undefined : () => setPanelsOpen(false)}
          />
        </div>
      </div>
    </div>
  );
}
