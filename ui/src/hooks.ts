/** Hooks shared by the components: routing, the session stream, transcript details, media queries. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, listAll, openUiStream } from "./api.ts";
import { applyItem, emptyView, type SessionView } from "./contract.ts";
import { addMessagePage, emptyDetails, type TranscriptDetails } from "./transcript.ts";

export type Json = Record<string, unknown>;

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

function sessionFromHash(): string | null {
  const match = /^#\/sessions\/(.+)$/.exec(window.location.hash);
  return match ? decodeURIComponent(match[1]!) : null;
}

/** The session in the URL fragment (`#/sessions/<id>`), and a way to go to another. */
export function useSessionRoute(): [string | null, (id: string | null) => void] {
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

/** The state a session's UI stream built, the connection state and a fatal error. */
export function useSessionStream(
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

/**
 * Tool arguments and message times from the transcript (`GET
 * /v1/sessions/{id}/messages`), re-read when `version` changes (a new tool
 * call or message the details do not cover yet), at most every 300 ms.
 */
export function useTranscriptDetails(sessionId: string, version: string): TranscriptDetails {
  const [details, setDetails] = useState(emptyDetails);
  useEffect(() => {
    setDetails(emptyDetails());
  }, [sessionId]);
  useEffect(() => {
    if (version === "") return undefined;
    let current = true;
    const timer = setTimeout(() => {
      listAll(`/v1/sessions/${encodeURIComponent(sessionId)}/messages`, { maxPages: 10 }).then(
        (messages) => {
          if (current) setDetails(addMessagePage(emptyDetails(), messages));
        },
        () => {
          // Details are a nicety: the transcript shows without them.
        },
      );
    }, 300);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [sessionId, version]);
  return details;
}

/** Whether a media query matches, kept current. */
export function useMedia(query: string): boolean {
  const [matches, setMatches] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const list = window.matchMedia(query);
    const onChange = () => setMatches(list.matches);
    list.addEventListener("change", onChange);
    onChange();
    return () => list.removeEventListener("change", onChange);
  }, [query]);
  return matches;
}

/** The agents (personas) of the workspace, by id. */
export function useAgents(refreshKey: number): {
  agents: Json[];
  names: Map<string, string>;
  error: string | null;
} {
  const [agents, setAgents] = useState<Json[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<{ data: Json[] }>("GET", "/v1/personas?limit=200").then(
      (r) => {
        setAgents(r.data);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  }, [refreshKey]);
  const names = new Map(agents.map((a) => [String(a.id), String(a.name ?? a.id)]));
  return { agents, names, error };
}

/** A value that survives reloads (localStorage), for preferences. */
export function usePreference(key: string, fallback: string): [string, (value: string) => void] {
  const [value, setValue] = useState(() => {
    try {
      return localStorage.getItem(key) ?? fallback;
    } catch {
      return fallback;
    }
  });
  const set = useCallback(
    (next: string) => {
      setValue(next);
      try {
        localStorage.setItem(key, next);
      } catch {
        // Storage disabled: the choice lasts this page.
      }
    },
    [key],
  );
  return [value, set];
}

/** `Date.now()`, re-read every `ms` (relative times). */
export function useNow(ms = 30_000): number {
  const [now, setNow] = useState(Date.now);
  const timer = useRef<ReturnType<typeof setInterval>>();
  useEffect(() => {
    timer.current = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer.current);
  }, [ms]);
  return now;
}
