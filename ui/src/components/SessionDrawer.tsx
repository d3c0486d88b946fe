/**
 * The session drawer: start a session with an agent (the choice is
 * remembered), search, and the sessions as readable rows — a title (the
 * first user message), the agent's name, a relative time and a status dot.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../api.ts";
import { errorText, type Json, useNow, usePreference } from "../hooks.ts";
import { relativeTime, titleOf } from "../transcript.ts";

/** First user message per session id (read once per page). */
const titles = new Map<string, string | null>();

async function loadTitle(sessionId: string): Promise<string | null> {
  const page = await api<{ data: Json[] }>(
    "GET",
    `/v1/sessions/${encodeURIComponent(sessionId)}/messages?limit=5`,
  );
  for (const m of page.data) {
    if (m.role !== "user" || !Array.isArray(m.parts)) continue;
    const text = (m.parts as Json[])
      .map((p) => (p.type === "text" && typeof p.text === "string" ? p.text : ""))
      .join("");
    const title = titleOf(text);
    if (title) return title;
  }
  return null;
}

/** The state of a session as a word and a dot colour. */
function statusOf(session: Json): { word: string; tone: string } {
  const state = String(session.state ?? "").toLowerCase();
  if (state === "closed" || state === "archived") return { word: "closed", tone: "off" };
  if (state === "active") return { word: "open", tone: "ok" };
  return { word: state || "unknown", tone: "warn" };
}

export function SessionDrawer({
  current,
  go,
  refreshKey,
  agents,
  agentNames,
  agentsError,
  onPicked,
}: {
  current: string | null;
  go(id: string): void;
  refreshKey: number;
  agents: Json[];
  agentNames: Map<string, string>;
  agentsError: string | null;
  onPicked(): void;
}) {
  const [sessions, setSessions] = useState<Json[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const [query, setQuery] = useState("");
  const [agent, setAgent] = usePreference("trellis.agent", "");
  const [, setTitlesVersion] = useState(0);
  const now = useNow();

  useEffect(() => {
    void tick;
    void refreshKey;
    // Sessions without a title yet may have one now.
    for (const [id, title] of titles) if (title === null) titles.delete(id);
    api<{ data: Json[] }>("GET", "/v1/sessions?limit=200").then(
      (r) => {
        const sorted = [...r.data].sort((a, b) =>
          String(b.updated_at ?? b.created_at ?? "").localeCompare(
            String(a.updated_at ?? a.created_at ?? ""),
          ),
        );
        setSessions(sorted);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  }, [tick, refreshKey]);

  // Titles of the first rows, read a few at a time.
  useEffect(() => {
    if (!sessions) return undefined;
    let live = true;
    const missing = sessions
      .filter((s) => !s.summary && !titles.has(String(s.id)))
      .slice(0, 40)
      .map((s) => String(s.id));
    void (async () => {
      for (let i = 0; i < missing.length && live; i += 6) {
        await Promise.all(
          missing.slice(i, i + 6).map(async (id) => {
            try {
              titles.set(id, await loadTitle(id));
            } catch {
              titles.set(id, null);
            }
          }),
        );
        if (live) setTitlesVersion((v) => v + 1);
      }
    })();
    return () => {
      live = false;
    };
  }, [sessions]);

  // The remembered agent, or the newest one when it is gone.
  const agentIds = agents.map((a) => String(a.id));
  const chosen = agentIds.includes(agent) ? agent : (agentIds.at(-1) ?? "");

  const create = async () => {
    try {
      const session = await api("POST", "/v1/sessions", chosen ? { persona_id: chosen } : {});
      setAgent(chosen);
      setTick((t) => t + 1);
      go(String(session.id));
      onPicked();
    } catch (e) {
      setError(errorText(e));
    }
  };

  const rows = useMemo(() => {
    const q = query.trim().toLowerCase();
    return (sessions ?? [])
      .map((s) => {
        const id = String(s.id);
        const personaId = typeof s.persona_id === "string" ? s.persona_id : null;
        const title =
          titleOf(typeof s.summary === "string" ? s.summary : null) ?? titles.get(id) ?? null;
        const agentName = personaId ? (agentNames.get(personaId) ?? "agent") : "no agent";
        return { s, id, title, agentName, branch: Boolean(s.parent_session_id) };
      })
      .filter(
        (r) =>
          q === "" ||
          (r.title ?? "").toLowerCase().includes(q) ||
          r.agentName.toLowerCase().includes(q) ||
          r.id.toLowerCase().includes(q),
      );
  }, [sessions, query, agentNames, titles.size]);

  return (
    <nav class="drawer-body" aria-label="Sessions">
      <div class="new-session">
        <label for="new-session-agent">Agent</label>
        <select
          id="new-session-agent"
          data-testid="new-session-agent"
          value={chosen}
          onChange={(e) => setAgent((e.target as HTMLSelectElement).value)}
        >
          {agents.length === 0 && <option value="">No agents yet</option>}
          {agents.map((a) => (
            <option key={String(a.id)} value={String(a.id)}>
              {String(a.name ?? a.id)}
            </option>
          ))}
        </select>
        <button
          type="button"
          class="primary"
          data-testid="new-session"
          onClick={create}
          disabled={!chosen}
        >
          New session
        </button>
      </div>
      <div class="list-head">
        <h2 id="sessions-title">Sessions</h2>
        <button type="button" class="ghost small" onClick={() => setTick((t) => t + 1)}>
          Refresh
        </button>
      </div>
      <input
        type="search"
        class="search"
        aria-label="Search sessions"
        placeholder="Search sessions"
        value={query}
        onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
      />
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {agentsError && <p class="error">{agentsError}</p>}
      {sessions !== null && sessions.length === 0 && (
        <p class="empty-state" data-testid="sessions-empty">
          No sessions yet. Pick an agent and start one.
        </p>
      )}
      {sessions !== null && sessions.length > 0 && rows.length === 0 && (
        <p class="empty-state">No session matches “{query}”.</p>
      )}
      <ul class="session-list" data-testid="session-list" aria-labelledby="sessions-title">
        {rows.map((r) => {
          const status = statusOf(r.s);
          return (
            <li key={r.id}>
              <button
                type="button"
                class={`session-link${r.id === current ? " active" : ""}`}
                aria-current={r.id === current ? "page" : undefined}
                data-session-id={r.id}
                onClick={() => {
                  go(r.id);
                  onPicked();
                }}
              >
                <span class="session-title">{r.title ?? "Untitled session"}</span>
                <span class="session-meta">
                  <span class={`dot ${status.tone}`} aria-hidden="true" />
                  <span class="sr-only">{status.word}, </span>
                  <span class="agent-name">{r.agentName}</span>
                  {r.branch ? <span> · branch</span> : null}
                  <span class="time">
                    {" · "}
                    {relativeTime(String(r.s.updated_at ?? r.s.created_at ?? ""), now)}
                  </span>
                </span>
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}
