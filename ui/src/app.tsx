/**
 * The operator UI: sign in with an API key, pick or start a session, watch
 * it (chat with streamed text, tool timeline, approvals, receipts), act on
 * it (send, approve / deny, branch from a message), and switch the stream to
 * the debug tier.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  ApiError,
  api,
  forgetKey,
  openHealthStream,
  openUiStream,
  storedKey,
  storeKey,
} from "./api.ts";
import {
  type Approval,
  applyItem,
  type ChatEntry,
  emptyView,
  type SessionView,
  type ToolRow,
} from "./contract.ts";

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

type Json = Record<string, unknown>;

function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------
// Routing: #/sessions/<id>

function sessionFromHash(): string | null {
  const match = /^#\/sessions\/(.+)$/.exec(window.location.hash);
  return match ? decodeURIComponent(match[1]!) : null;
}

function useSessionRoute(): [string | null, (id: string | null) => void] {
  const [id, setId] = useState(sessionFromHash);
  useEffect(() => {
    const onHash = () => setId(sessionFromHash());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  const go = useCallback((next: string | null) => {
    window.location.hash = next ? `#/sessions/${encodeURIComponent(next)}` : "#/";
  }, []);
  return [id, go];
}

// ---------------------------------------------------------------------------
// The stream of one session

function useSessionStream(
  sessionId: string | null,
  tier: "default" | "debug",
  until?: string,
): { view: SessionView; state: string; fatal: string | null } {
  const [view, setView] = useState(emptyView);
  const [state, setState] = useState("connecting");
  const [fatal, setFatal] = useState<string | null>(null);
  useEffect(() => {
    setView(emptyView());
    setFatal(null);
    if (!sessionId) return undefined;
    return openUiStream({
      sessionId,
      tier,
      ...(until ? { until } : {}),
      onItem: (item) => setView((current) => applyItem(current, item)),
      onFatal: (error) => setFatal(errorText(error)),
      onState: setState,
    });
  }, [sessionId, tier, until]);
  return { view, state, fatal };
}

// ---------------------------------------------------------------------------
// Sign in

function Login({ onKey }: { onKey(key: string): void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api("GET", "/v1/sessions?limit=1", undefined, key.trim());
      storeKey(key.trim());
      onKey(key.trim());
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form onSubmit={submit}>
        <h1>Trellis operator</h1>
        <p>
          Paste an API key (the admin key of <code>npm start</code> is in{" "}
          <code>.trellis/data/admin-api-key</code>). It is kept in this tab only.
        </p>
        <input
          type="password"
          data-testid="login-key"
          aria-label="API key"
          placeholder="API key"
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="login-submit" disabled={busy || key.trim() === ""}>
          Sign in
        </button>
        {error && <p class="error">{error}</p>}
      </form>
    </main>
  );
}

// ---------------------------------------------------------------------------
// Sessions

function Sidebar({
  current,
  go,
  refreshKey,
}: {
  current: string | null;
  go(id: string): void;
  refreshKey: number;
}) {
  const [sessions, setSessions] = useState<Json[]>([]);
  const [agents, setAgents] = useState<Json[]>([]);
  const [agent, setAgent] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    void tick;
    void refreshKey;
    api<{ data: Json[] }>("GET", "/v1/sessions?limit=200")
      .then((r) => setSessions([...r.data].reverse()))
      .catch((e) => setError(errorText(e)));
    api<{ data: Json[] }>("GET", "/v1/personas?limit=200")
      .then((r) => {
        setAgents(r.data);
        if (r.data.length > 0) setAgent((a) => a || String(r.data[r.data.length - 1]!.id));
      })
      .catch((e) => setError(errorText(e)));
  }, [tick, refreshKey]);
  const create = async () => {
    try {
      const session = await api("POST", "/v1/sessions", agent ? { persona_id: agent } : {});
      setTick((t) => t + 1);
      go(String(session.id));
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <nav class="sidebar">
      <div class="new-session">
        <select
          data-testid="new-session-agent"
          aria-label="Agent"
          value={agent}
          onChange={(e) => setAgent((e.target as HTMLSelectElement).value)}
        >
          {agents.length === 0 && <option value="">no agents</option>}
          {agents.map((a) => (
            <option key={String(a.id)} value={String(a.id)}>
              {String(a.name)} ({String(a.id).slice(0, 14)}…)
            </option>
          ))}
        </select>
        <button type="button" data-testid="new-session" onClick={create} disabled={!agent}>
          New session
        </button>
      </div>
      <div class="list-head">
        <h2>Sessions</h2>
        <button type="button" class="link" onClick={() => setTick((t) => t + 1)}>
          refresh
        </button>
      </div>
      {error && <p class="error">{error}</p>}
      <ul data-testid="session-list">
        {sessions.map((s) => (
          <li key={String(s.id)} class={s.id === current ? "active" : ""}>
            <button type="button" class="session-link" onClick={() => go(String(s.id))}>
              <span class="mono">{String(s.id)}</span>
              <span class="meta">
                {String(s.state ?? "").toLowerCase()}
                {s.parent_session_id ? " · branch" : ""}
              </span>
            </button>
          </li>
        ))}
      </ul>
    </nav>
  );
}

// ---------------------------------------------------------------------------
// One session

function ChatMessage({
  entry,
  onBranch,
  inherited,
}: {
  entry: ChatEntry;
  onBranch?: (eventId: string) => void;
  inherited?: boolean;
}) {
  return (
    <li
      class={`chat ${entry.role}${inherited ? " inherited" : ""}`}
      data-testid={inherited ? "inherited-entry" : "chat-entry"}
      data-role={entry.role}
    >
      <span class="role">{entry.role}</span>
      <span class="text">{entry.text}</span>
      {onBranch && entry.eventId && (
        <button
          type="button"
          class="link branch"
          data-testid="branch"
          title="Start a new session with the history up to this message"
          onClick={() => onBranch(entry.eventId!)}
        >
          branch from here
        </button>
      )}
    </li>
  );
}

/** The history a branch inherited: its parent's stream up to the fork point. */
function Inherited({
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
    <section class="inherited" data-testid="inherited">
      {depth < 4 && parent?.parent_session_id && parent.branch_source_event_id ? (
        <Inherited
          sessionId={String(parent.parent_session_id)}
          until={String(parent.branch_source_event_id)}
          depth={depth + 1}
        />
      ) : null}
      <p class="marker">
        history of <span class="mono">{sessionId}</span> up to the branch point
      </p>
      {fatal && <p class="error">{fatal}</p>}
      <ul class="chat-list">
        {view.chat.map((entry) => (
          <ChatMessage key={entry.key} entry={entry} inherited />
        ))}
      </ul>
    </section>
  );
}

function ToolTimeline({
  tools,
  turns,
  debug,
}: {
  tools: ToolRow[];
  turns: SessionView["turns"];
  debug: boolean;
}) {
  // A call still without an outcome when its turn ended never got a result.
  const ended = new Set(turns.filter((t) => t.status !== "running").map((t) => t.taskId));
  const statusOf = (t: ToolRow) =>
    t.status === "running" && t.taskId !== null && ended.has(t.taskId) ? "no_result" : t.status;
  return (
    <section class="panel">
      <h3>Tool timeline</h3>
      {tools.length === 0 ? (
        <p class="muted">No tool calls yet.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>call</th>
              <th>tool</th>
              <th>status</th>
              <th>elapsed</th>
              <th>result</th>
            </tr>
          </thead>
          <tbody>
            {tools.map((t) => (
              <tr
                key={t.key}
                data-testid="tool-row"
                data-tool-call-id={t.toolCallId}
                data-status={statusOf(t)}
              >
                <td class="mono">{t.toolCallId}</td>
                <td>{t.name}</td>
                <td>
                  <span class={`badge ${statusOf(t)}`}>{statusOf(t).replace("_", " ")}</span>
                </td>
                <td>{t.elapsedMs === null ? "" : `${t.elapsedMs} ms`}</td>
                <td class="result">
                  {t.resultText ?? t.reason ?? ""}
                  {debug && t.arguments !== undefined && (
                    <pre class="debug-json">{JSON.stringify(t.arguments)}</pre>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Approvals({ approvals }: { approvals: Approval[] }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const decide = async (approval: Approval, approved: boolean) => {
    setBusy(approval.requestId);
    setError(null);
    try {
      // The gateway's signal route: a tool confirmation resumes the waiting task.
      await api("POST", `/v1/tasks/${encodeURIComponent(approval.taskId)}/messages`, {
        kind: "tool_confirmation",
        message: { role: "user", parts: [{ type: "json", value: { approved } }] },
      });
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(null);
    }
  };
  const pending = approvals.filter((a) => a.decision === "pending");
  if (pending.length === 0 && error === null) return null;
  return (
    <section class="panel approvals">
      {pending.map((a) => (
        <div
          key={a.requestId}
          class="approval"
          data-testid="approval"
          data-request-id={a.requestId}
        >
          <p>
            <strong>Approval needed</strong>
            {a.toolName ? (
              <>
                {" "}
                to run <code>{a.toolName}</code>
              </>
            ) : null}
            {a.reason ? <span class="muted"> — {a.reason}</span> : null}
          </p>
          <button
            type="button"
            data-testid="approve"
            disabled={busy !== null}
            onClick={() => decide(a, true)}
          >
            Approve
          </button>
          <button
            type="button"
            class="secondary"
            data-testid="deny"
            disabled={busy !== null}
            onClick={() => decide(a, false)}
          >
            Deny
          </button>
        </div>
      ))}
      {error && <p class="error">{error}</p>}
    </section>
  );
}

function Receipts({ view }: { view: SessionView }) {
  const [results, setResults] = useState<Record<string, Json | string>>({});
  const verify = async (id: string) => {
    try {
      const result = await api("POST", `/v1/receipts/${encodeURIComponent(id)}/verify`, {});
      setResults((r) => ({ ...r, [id]: result }));
    } catch (e) {
      setResults((r) => ({ ...r, [id]: errorText(e) }));
    }
  };
  return (
    <section class="panel">
      <h3>Receipts</h3>
      {view.receipts.length === 0 ? (
        <p class="muted">No receipts yet.</p>
      ) : (
        <ul class="receipts">
          {view.receipts.map((r) => {
            const result = results[r.receiptId];
            return (
              <li key={r.receiptId} data-testid="receipt-row" data-receipt-id={r.receiptId}>
                <span class="mono">{r.receiptId}</span>{" "}
                <span class="muted">
                  {r.finalState ?? ""} · chain #{r.chainIndex ?? "?"}
                </span>{" "}
                <button
                  type="button"
                  class="link"
                  data-testid="verify"
                  onClick={() => verify(r.receiptId)}
                >
                  verify
                </button>
                {result !== undefined && (
                  <span
                    data-testid="verification"
                    class={typeof result === "string" || !result.valid ? "bad" : "good"}
                  >
                    {typeof result === "string"
                      ? result
                      : result.valid
                        ? "valid"
                        : `invalid: ${String(result.reason ?? "")}`}
                  </span>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </section>
  );
}

/** The session's health snapshot, live from the health stream. */
function HealthCard({ sessionId }: { sessionId: string }) {
  const [health, setHealth] = useState<Record<string, unknown> | null>(null);
  const [fatal, setFatal] = useState<string | null>(null);
  useEffect(() => {
    setHealth(null);
    setFatal(null);
    return openHealthStream(sessionId, setHealth, (e) => setFatal(errorText(e)));
  }, [sessionId]);
  const flags = (health?.flags ?? {}) as Record<string, boolean>;
  const reasons = (health?.reasons ?? []) as { flag: string; message: string }[];
  const enforcement = (health?.policy as { enforcement?: { reason?: string } } | undefined)
    ?.enforcement;
  return (
    <section
      class="panel health"
      data-testid="health"
      data-score={String(health?.score ?? "")}
      data-status={String(health?.status ?? "")}
    >
      <h3>
        Health{" "}
        {health && (
          <span class={`badge ${String(health.status)}`}>
            {String(health.score)} · {String(health.status)}
          </span>
        )}
      </h3>
      {fatal && <p class="error">{fatal}</p>}
      {!health && !fatal && <p class="muted">…</p>}
      {health && (
        <>
          <p>
            {Object.entries(flags).map(([flag, on]) => (
              <span
                key={flag}
                class={`flag ${on ? "on" : "off"}`}
                data-flag={flag}
                data-on={String(on)}
              >
                {flag.replace(/_/g, " ")}{" "}
              </span>
            ))}
          </p>
          <ul>
            {reasons.map((r, i) => (
              <li key={`${r.flag}-${i}`} class="muted">
                {r.message}
              </li>
            ))}
          </ul>
          {typeof health.recovery_hint === "string" && (
            <p class="muted">hint: {health.recovery_hint}</p>
          )}
          {enforcement?.reason && <p class="bad">enforced: {enforcement.reason}</p>}
        </>
      )}
    </section>
  );
}

/** A branch candidate of the session (`resume_points` of `GET /v1/ui/sessions/{id}`). */
interface ResumePoint {
  kind: string;
  checkpoint_type?: string;
  event_id: string;
  resume_cursor: string;
  task_id: string | null;
  summary: string;
}

/**
 * Where the session can be branched from (checkpoints, approvals, completed
 * turns), from session detail; re-read when `version` (the turns, approvals
 * and markers seen) changes, not on every envelope.
 */
function ResumePoints({
  sessionId,
  version,
  onBranch,
}: {
  sessionId: string;
  version: string;
  onBranch(cursor: string): void;
}) {
  const [points, setPoints] = useState<ResumePoint[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    api<{ resume_points: ResumePoint[] }>(
      "GET",
      `/v1/ui/sessions/${encodeURIComponent(sessionId)}?envelopes=0`,
    ).then(
      (detail) => {
        if (!current) return;
        setError(null);
        setPoints(detail.resume_points);
      },
      (e) => current && setError(errorText(e)),
    );
    return () => {
      current = false;
    };
  }, [sessionId, version]);
  if (!error && (points === null || points.length === 0)) return null;
  return (
    <section class="panel resume-points" data-testid="resume-points">
      <h3>Resume points</h3>
      {error && <p class="error">{error}</p>}
      <ol>
        {(points ?? []).map((p) => (
          <li
            key={p.event_id}
            data-testid="resume-point"
            data-kind={p.kind}
            data-cursor={p.resume_cursor}
          >
            <span class="muted">{(p.checkpoint_type ?? p.kind).replace(/_/g, " ")}</span>{" "}
            {p.summary}{" "}
            <button
              type="button"
              class="link"
              data-testid="resume-branch"
              title={`branch a new session at ${p.resume_cursor}`}
              onClick={() => onBranch(p.resume_cursor)}
            >
              branch
            </button>
          </li>
        ))}
      </ol>
    </section>
  );
}

function DebugLog({ view }: { view: SessionView }) {
  return (
    <section class="panel debug" data-testid="debug-log">
      <h3>
        Debug stream <span class="muted">({view.log.length} envelopes)</span>
      </h3>
      <ol>
        {view.log
          .slice(-200)
          .reverse()
          .map((item, i) => (
            <li key={item.cursor ?? `bootstrap-${i}`}>
              <span class="mono">{item.cursor ?? "—"}</span> <strong>{item.envelope.type}</strong>
              <pre class="debug-json">{JSON.stringify(item.envelope.payload)}</pre>
            </li>
          ))}
      </ol>
    </section>
  );
}

function Composer({ sessionId, disabled }: { sessionId: string; disabled: boolean }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const send = async (event: Event) => {
    event.preventDefault();
    const input = text.trim();
    if (input === "") return;
    setBusy(true);
    setError(null);
    try {
      await api("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/tasks`, { input });
      setText("");
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="composer" onSubmit={send}>
      <textarea
        data-testid="composer-input"
        aria-label="Message"
        placeholder="Message the agent"
        value={text}
        disabled={disabled}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey) {
            e.preventDefault();
            (e.currentTarget as HTMLTextAreaElement).form?.requestSubmit();
          }
        }}
      />
      <button type="submit" data-testid="composer-send" disabled={busy || disabled}>
        Send
      </button>
      {error && <p class="error">{error}</p>}
    </form>
  );
}

function SessionPane({
  sessionId,
  tier,
  go,
  onBranched,
}: {
  sessionId: string;
  tier: "default" | "debug";
  go(id: string): void;
  onBranched(): void;
}) {
  const { view, state, fatal } = useSessionStream(sessionId, tier);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const resumed = view.session?.resume_cursor;
    window.__trellisUi = {
      cursors: view.cursors,
      duplicates: view.duplicates,
      sessionId,
      resumeCursor: typeof resumed === "string" ? resumed : null,
    };
  }, [view, sessionId]);
  const branchAt = async (at: { at_event_id: string } | { at_cursor: string }) => {
    setError(null);
    try {
      const fork = await api("POST", `/v1/sessions/${encodeURIComponent(sessionId)}/fork`, at);
      onBranched();
      go(String(fork.id));
    } catch (e) {
      setError(errorText(e));
    }
  };
  const branch = (eventId: string) => branchAt({ at_event_id: eventId });
  const resumeVersion = [
    view.turns.map((t) => t.status).join(","),
    view.approvals.map((a) => a.decision).join(","),
    view.markers.length,
  ].join("|");
  const status = view.status;
  const running = Object.entries(view.streaming);
  const lastTurn = view.turns.at(-1);
  const closed = status?.status === "closed";
  const session = view.session;
  return (
    <div class="session">
      <header class="session-head">
        <div>
          <h2 class="mono">{sessionId}</h2>
          {session?.parent_session_id ? (
            <p class="muted">
              branch of{" "}
              <button
                type="button"
                class="link mono"
                onClick={() => go(String(session.parent_session_id))}
              >
                {String(session.parent_session_id)}
              </button>
            </p>
          ) : null}
        </div>
        <div class="status-card" data-testid="status" data-status={String(status?.status ?? "")}>
          <span class={`badge ${String(status?.status ?? "")}`}>
            {String(status?.status ?? "…")}
          </span>
          {lastTurn && (
            <span class="muted" data-testid="turn-status" data-turn-status={lastTurn.status}>
              {" "}
              last turn {lastTurn.status}
              {lastTurn.elapsedMs !== null ? ` in ${lastTurn.elapsedMs} ms` : ""}
            </span>
          )}
          <span class={`conn ${state}`} title="stream connection">
            {" "}
            ● {state}
          </span>
        </div>
      </header>
      {fatal && <p class="error">{fatal}</p>}
      {error && <p class="error">{error}</p>}
      <div class="columns">
        <div class="main-column">
          {session?.parent_session_id && session.branch_source_event_id ? (
            <Inherited
              sessionId={String(session.parent_session_id)}
              until={String(session.branch_source_event_id)}
              depth={0}
            />
          ) : null}
          {view.markers.map((m) => (
            <p key={m.key} class="marker" data-testid="marker" data-kind={m.kind}>
              ◆ {m.kind.replace(/_/g, " ")}: {m.text}
            </p>
          ))}
          <ul class="chat-list">
            {view.chat.map((entry) => (
              <ChatMessage key={entry.key} entry={entry} onBranch={branch} />
            ))}
            {running.map(([task, text]) => (
              <li key={`stream-${task}`} class="chat assistant streaming" data-testid="streaming">
                <span class="role">assistant</span>
                <span class="text">{text}</span>
              </li>
            ))}
          </ul>
          {Object.entries(view.thinking).map(([task, text]) => (
            <p key={`thinking-${task}`} class="thinking">
              thinking: {text}
            </p>
          ))}
          {view.turns
            .filter((t) => t.error)
            .map((t) => (
              <p key={`err-${t.taskId}`} class="error" data-testid="turn-error">
                {t.error!.code}: {t.error!.message}
              </p>
            ))}
          <Approvals approvals={view.approvals} />
          <Composer sessionId={sessionId} disabled={closed} />
        </div>
        <div class="side-column">
          <HealthCard sessionId={sessionId} />
          <ResumePoints
            sessionId={sessionId}
            version={resumeVersion}
            onBranch={(cursor) => void branchAt({ at_cursor: cursor })}
          />
          <ToolTimeline tools={view.tools} turns={view.turns} debug={tier === "debug"} />
          <Receipts view={view} />
          {view.artifacts.length > 0 && (
            <section class="panel">
              <h3>Artifacts</h3>
              <ul>
                {view.artifacts.map((a) => (
                  <li key={String(a.artifact_id)}>
                    <span class="mono">{String(a.artifact_id)}</span> {String(a.name ?? "")}
                  </li>
                ))}
              </ul>
            </section>
          )}
          {tier === "debug" && <DebugLog view={view} />}
        </div>
      </div>
    </div>
  );
}

// ---------------------------------------------------------------------------

export function App() {
  const [key, setKey] = useState<string | null>(storedKey);
  const [sessionId, go] = useSessionRoute();
  const [debug, setDebug] = useState(() => sessionStorage.getItem("trellis.debug") === "1");
  const [refreshKey, setRefreshKey] = useState(0);
  const tier = useMemo(() => (debug ? "debug" : "default"), [debug]);
  const signOut = () => {
    forgetKey();
    setKey(null);
  };
  const toggleDebug = () => {
    setDebug((d) => {
      sessionStorage.setItem("trellis.debug", d ? "0" : "1");
      return !d;
    });
  };
  const refreshed = useRef(0);
  if (!key) return <Login onKey={setKey} />;
  return (
    <div class="app">
      <header class="top">
        <h1>Trellis operator</h1>
        <label class="toggle">
          <input
            type="checkbox"
            data-testid="debug-toggle"
            checked={debug}
            onChange={toggleDebug}
          />{" "}
          debug tier
        </label>
        <button type="button" class="link" onClick={signOut}>
          sign out
        </button>
      </header>
      <div class="layout">
        <Sidebar current={sessionId} go={go} refreshKey={refreshKey} />
        <main class="content">
          {sessionId ? (
            <SessionPane
              key={sessionId}
              sessionId={sessionId}
              tier={tier}
              go={go}
              onBranched={() => {
                refreshed.current += 1;
                setRefreshKey(refreshed.current);
              }}
            />
          ) : (
            <p class="muted empty">Pick a session, or start one with an agent.</p>
          )}
        </main>
      </div>
    </div>
  );
}
